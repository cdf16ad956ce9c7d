// Loading a topology: reading the file safely, parsing the TOML, running the Checker, and keeping
// exceptions from crossing the public API (parse_topology, load_topology).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <filesystem>
#include <new>
#include <string>
#include <utility>

#include <toml++/toml.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "postal/routing/topology_spec.h"
#include "postal/wire/absl_compat.h"
#include "topology_checker.h"
#include "topology_escape.h"

namespace postal::routing {
namespace {

using topology_internal::Checker;
using topology_internal::printable;

constexpr std::size_t kMaxDescription = 200;  // Bytes of a TOML syntax error shown.

absl::StatusOr<TopologySpec> parse_unguarded(std::string_view text, std::string_view file) {
  if (text.size() > kMaxTopologyFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(sv(file), ": the topology is ", text.size(), " bytes, more than the limit of ",
                     kMaxTopologyFileBytes, "; a topology file describes procs, not data"));
  }
#if TOML_EXCEPTIONS
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(file));
  } catch (const toml::parse_error& e) {
#else
  toml::parse_result parsed = toml::parse(text, std::string_view(file));
  if (!parsed) {
    const toml::parse_error& e = parsed.error();
#endif
    return absl::InvalidArgumentError(
        absl::StrCat(sv(file), ":", e.source().begin.line, ":", e.source().begin.column,
                     ": not valid TOML: ", printable(e.description(), kMaxDescription),
                     "; fix the syntax here (see docs/topologies.md for the format)"));
  }
#if !TOML_EXCEPTIONS
  toml::table root = std::move(parsed).table();
#endif
  TopologySpec spec;
  POSTAL_TOPO_TRY(Checker(file).check(root, spec));
  return spec;
}

// A proc's `binary` that is a relative path (it has a '/' but does not start with one, e.g.
// "./my_actors" or "bin/my_actors") names a file relative to the topology file, wherever `postal
// up` runs: it becomes <directory of the file>/<binary>, that directory made absolute against the
// current directory. An absolute path is kept. A bare name without '/' ("my_actors") is kept too:
// like a shell, the launcher looks it up in PATH. A topology from parse_topology has no file, so
// its binaries stay as written (relative ones then resolve against the launcher's current
// directory, as before).
void resolve_binaries(const std::string& path, TopologySpec& spec) {
  std::error_code error;
  std::filesystem::path dir = std::filesystem::absolute(path, error).parent_path();
  if (error) dir = std::filesystem::path(path).parent_path();
  for (ProcSpec& proc : spec.procs) {
    if (!proc.binary || proc.binary->find('/') == std::string::npos) continue;
    if (proc.binary->front() == '/') continue;
    proc.binary = (dir / *proc.binary).string();
  }
}

absl::StatusOr<TopologySpec> load_unguarded(const std::string& path) {
  // O_NOFOLLOW refuses a symlink; O_NONBLOCK keeps a FIFO without a writer from blocking the open.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP) {
      return absl::InvalidArgumentError(
          absl::StrCat(path,
                       ": is a symbolic link; topology files are read only as regular files, so "
                       "give the path of the file it points to"));
    }
    if (err == ENXIO) {  // A Unix socket, or a device file without a device.
      return absl::InvalidArgumentError(absl::StrCat(
          path,
          ": is a socket or a device; a topology must be a regular .toml file, give its path"));
    }
    return absl::ErrnoToStatus(err, absl::StrCat(path, ": cannot open the topology file"));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot stat the topology file"));
  }
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISFIFO(st.st_mode)                           ? "a FIFO"
                       : S_ISDIR(st.st_mode)                          ? "a directory"
                       : S_ISSOCK(st.st_mode)                         ? "a socket"
                       : (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) ? "a device"
                                                                      : "not a regular file";
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": is ", kind, "; a topology must be a regular .toml file, give its path"));
  }
  const std::string too_big =
      absl::StrCat(path, ": is larger than ", kMaxTopologyFileBytes,
                   " bytes (1 MiB), the limit for a topology file; is it the right file?");
  if (st.st_size > static_cast<off_t>(kMaxTopologyFileBytes)) {
    return absl::InvalidArgumentError(too_big);
  }
  // Read at most one byte past the limit: the file may grow after fstat.
  std::string text(kMaxTopologyFileBytes + 1, '\0');
  std::size_t used = 0;
  while (used < text.size()) {
    const ssize_t n = ::read(fd, text.data() + used, text.size() - used);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot read the topology file"));
    }
    used += static_cast<std::size_t>(n);
  }
  if (used > kMaxTopologyFileBytes) return absl::InvalidArgumentError(too_big);
  text.resize(used);
  absl::StatusOr<TopologySpec> spec = parse_unguarded(text, path);
  if (spec.ok()) resolve_binaries(path, *spec);
  return spec;
}

// Runs `body`, turning an escaping exception (only allocation failure is expected) into a status:
// exceptions never cross the public API.
template <class Body>
absl::StatusOr<TopologySpec> guarded(std::string_view file, Body body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat(sv(file), ": out of memory while reading the topology"));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(sv(file), ": unexpected error while reading the topology: ", e.what()));
  } catch (...) {
    return absl::InternalError(
        absl::StrCat(sv(file), ": unexpected error while reading the topology"));
  }
}

}  // namespace

absl::StatusOr<TopologySpec> parse_topology(std::string_view toml_text,
                                            std::string_view file_name) noexcept {
  return guarded(file_name, [&] { return parse_unguarded(toml_text, file_name); });
}

absl::StatusOr<TopologySpec> load_topology(const std::string& path) noexcept {
  return guarded(path, [&] { return load_unguarded(path); });
}

}  // namespace postal::routing
