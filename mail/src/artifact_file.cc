#include "postal/mail/artifact_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

std::string_view kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

// Closes the descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

absl::Status too_big(const std::filesystem::path& path, std::string_view what, uint64_t size,
                     uint64_t max_bytes) {
  return IoFailedError(absl::StrCat(sv(what), " '", path.string(), "' holds ", size,
                                    " bytes, over the ceiling of ", max_bytes,
                                    " bytes; refused, nothing was read (M-STORE-1). Split it into "
                                    "smaller files"));
}

}  // namespace

absl::StatusOr<std::string> read_artifact_file(const std::filesystem::path& path,
                                               std::string_view what, uint64_t max_bytes) {
  Fd f{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) {
    if (errno == ELOOP) {
      return IoFailedError(absl::StrCat(sv(what), " '", path.string(),
                                        "' is a symlink; refused (M-STORE-1). Name the real "
                                        "file instead"));
    }
    return IoFailedError(absl::StrCat(sv(what), " '", path.string(),
                                      "' cannot be opened: ", std::strerror(errno),
                                      "; check the path and its permissions"));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    return IoFailedError(
        absl::StrCat(sv(what), " '", path.string(), "': fstat failed: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return IoFailedError(absl::StrCat(sv(what), " '", path.string(), "' is ",
                                      sv(kind_of(st.st_mode)),
                                      "; refused without reading (M-STORE-1). Give a regular "
                                      "file"));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return too_big(path, what, static_cast<uint64_t>(st.st_size), max_bytes);
  }
  std::string out;
  out.resize(static_cast<size_t>(st.st_size));
  size_t have = 0;
  while (true) {
    if (have == out.size()) {
      // Reached the size fstat saw: one more byte means the file grew; keep to the ceiling.
      if (out.size() >= max_bytes + 1) return too_big(path, what, out.size(), max_bytes);
      out.resize(std::min<uint64_t>(std::max<size_t>(out.size() * 2, 4096), max_bytes + 1));
    }
    const ssize_t n = ::read(f.fd, out.data() + have, out.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoFailedError(
          absl::StrCat(sv(what), " '", path.string(), "': read failed: ", std::strerror(errno)));
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  if (have > max_bytes) return too_big(path, what, have, max_bytes);
  out.resize(have);
  return out;
}

}  // namespace postal::mail
