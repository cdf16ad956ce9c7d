#include "topology_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "postal/runtime/logger.h"

namespace postal::tools {
namespace {

using routing::ChannelKey;

constexpr off_t kMaxStateBytes = 1 << 20;

const runtime::Logger& log() { return runtime::Logger::tools(); }

// R-SEC-3: a folder is ours when it is a real folder (not a link), owned by us, and no one else
// may write into it. A folder that is not ours is refused, never used.
absl::Status check_private_dir(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(dir, ": ", std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::PermissionDeniedError(
        absl::StrCat(dir, " is not a folder (a link or a file); remove it"));
  }
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        dir, " belongs to uid ", st.st_uid, " or others may write to it (mode ",
        absl::StrCat(absl::Hex(st.st_mode & 07777)), "); postal keeps its state in a folder ",
        "only you can write: remove it, or set XDG_RUNTIME_DIR"));
  }
  return absl::OkStatus();
}

std::string parent_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && *xdg == '/' && check_private_dir(xdg).ok()) return xdg;
  return "/tmp";
}

// Reads a state file without following a link or blocking on a FIFO; refuses what we do not own.
absl::StatusOr<std::string> read_private_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  struct stat st {};
  std::string text;
  absl::Status refused;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    refused = absl::PermissionDeniedError(absl::StrCat(path, " is not a regular file"));
  } else if (st.st_uid != ::geteuid()) {
    refused = absl::PermissionDeniedError(
        absl::StrCat(path, " belongs to uid ", st.st_uid, ", not to you"));
  } else if (st.st_size > kMaxStateBytes) {
    refused = absl::PermissionDeniedError(absl::StrCat(path, " is over 1 MiB"));
  } else {
    text.resize(static_cast<size_t>(st.st_size));
    const ssize_t n = ::read(fd, text.data(), text.size());
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  if (!refused.ok()) return refused;
  return text;
}

TopologyState parse_state(std::string name, const std::string& text) {
  TopologyState state;
  state.name = std::move(name);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind, addr;
    words >> kind >> addr;
    if (kind == "gateway" || kind == "proc") {
      TopologyMember m;
      m.kind = kind == "gateway" ? TopologyMember::Kind::kGateway : TopologyMember::Kind::kProc;
      m.addr = addr;
      if (!(words >> m.pid)) m.pid = 0;
      state.members.push_back(std::move(m));
    } else if (kind == "secret") {
      state.secret = absl::HexStringToBytes(addr);
      ChannelKey::wipe(addr);
    } else if (kind == "tls") {
      state.tls = routing::parse_tls_mode(addr).value_or(routing::TlsMode::kAuto);
    } else if (kind == "dead") {
      std::string rest;
      std::getline(words, rest);
      for (TopologyMember& m : state.members) {
        if (m.addr == addr) {
          m.dead = true;
          m.exit = std::string(absl::StripLeadingAsciiWhitespace(rest));
        }
      }
    }
  }
  return state;
}

std::optional<TopologyState> read_state(const std::string& name) {
  absl::StatusOr<std::string> text = read_private_file(state_file(name));
  if (!text.ok()) {
    if (!absl::IsNotFound(text.status())) {
      log().warn(absl::StrCat("ignoring a state file: ", text.status().message()));
    }
    return std::nullopt;
  }
  return parse_state(name, *text);
}

}  // namespace

std::string state_dir() { return absl::StrCat(parent_dir(), "/postal-", ::geteuid()); }

std::string state_file(const std::string& topology) {
  return absl::StrCat(state_dir(), "/", topology, ".state");
}

absl::Status write_topology_state(const routing::Host& host,
                                  const std::vector<routing::ProcExit>& exits) {
  const std::string dir = state_dir();
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
  }
  if (absl::Status s = check_private_dir(dir); !s.ok()) return s;
  std::ostringstream out;
  out << "pid " << ::getpid() << "\n";
  if (!host.secret().empty()) out << "secret " << absl::BytesToHexString(host.secret()) << "\n";
  if (host.spec().tls) out << "tls " << routing::to_string(*host.spec().tls) << "\n";
  for (const routing::Node* g : host.gateways()) {
    out << "gateway " << const_cast<routing::Node*>(g)->proc().addr().to_string() << "\n";
  }
  for (const auto& p : host.procs()) out << "proc " << p.addr.to_string() << " " << p.pid << "\n";
  for (const routing::ProcExit& exit : exits) {
    const routing::LaunchedProc* p = host.find_proc(exit.name);
    if (p != nullptr) out << "dead " << p->addr.to_string() << " " << exit.to_string() << "\n";
  }
  // A fresh file (O_EXCL, never through a link), then an atomic rename over the old one.
  const std::string path = state_file(host.spec().name);
  const std::string tmp = absl::StrCat(path, ".", ::getpid(), ".tmp");
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  std::string text = out.str();
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  ChannelKey::wipe(text);
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const routing::ChannelKey>> channel_key(const TopologyState& state) {
  if (state.secret.empty()) return nullptr;
  return routing::ChannelKey::derive(state.secret);
}

void remove_topology_state(const std::string& topology) {
  if (check_private_dir(state_dir()).ok()) ::unlink(state_file(topology).c_str());
}

std::vector<TopologyState> read_topology_states(const std::string& name) {
  std::vector<TopologyState> states;
  if (absl::Status s = check_private_dir(state_dir()); !s.ok()) {
    if (!absl::IsNotFound(s)) log().warn(absl::StrCat("ignoring the state folder: ", s.message()));
    return states;
  }
  if (!name.empty()) {
    if (std::optional<TopologyState> state = read_state(name)) states.push_back(*std::move(state));
    return states;
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(state_dir(), ec)) {
    if (e.path().extension() != ".state") continue;
    if (std::optional<TopologyState> state = read_state(e.path().stem())) {
      states.push_back(*std::move(state));
    }
  }
  return states;
}

}  // namespace postal::tools
