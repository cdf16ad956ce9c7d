#include "local_nats.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "socket_util.h"

namespace postal::routing::internal {
namespace {

std::string find_binary() {
  if (const char* env = std::getenv("POSTAL_NATS_SERVER"); env != nullptr && *env != '\0') {
    return env;
  }
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) dirs = absl::StrSplit(path, ':');
  dirs.push_back("/usr/sbin");
  for (const std::string& d : dirs) {
    const std::string candidate = d + "/nats-server";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

bool accepts(const std::string& host, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  const bool ok = ::inet_pton(AF_INET, host.c_str(), &a.sin_addr) == 1 &&
                  ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalNats>> LocalNats::start(const std::string& host, uint16_t port,
                                                            const std::string& authorization,
                                                            const std::string& log_file,
                                                            absl::Duration timeout) {
  const std::string binary = find_binary();
  if (binary.empty()) {
    return absl::FailedPreconditionError(
        "the topology asks for start_nats but there is no nats-server on PATH or in /usr/sbin; "
        "install it (Debian: apt-get install nats-server) or set POSTAL_NATS_SERVER");
  }
  absl::StatusOr<nats_tunnel::PrivateDir> dir = nats_tunnel::PrivateDir::make();
  if (!dir.ok()) return dir.status();
  const std::string config = dir->path() + "/nats-server.conf";
  {
    const int fd = ::open(config.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    std::string text = absl::StrCat("listen: \"", host, ":", port, "\"\n");
    absl::StrAppend(&text, authorization);
    const bool written =
        fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    if (fd >= 0) ::close(fd);
    if (!written) {
      return absl::InternalError(absl::StrCat("cannot write ", config, ": ", os_error(errno)));
    }
  }
  std::vector<std::string> args = {binary, "-c", config};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // O_NOFOLLOW: the log is in /tmp, where a symlink planted by someone else must not be followed.
    const int fd =
        ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", os_error(errno)));
  std::unique_ptr<LocalNats> nats(new LocalNats(pid, *std::move(dir)));
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout));
  while (!accepts(host, port)) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      nats->pid_ = -1;
      return absl::UnavailableError(
          absl::StrCat("nats-server on ", host, ":", port, " exited at once; its log: ", log_file));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::UnavailableError(
          absl::StrCat("nats-server on ", host, ":", port,
                       " did not accept connections in time; its log: ", log_file));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return nats;
}

LocalNats::~LocalNats() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 500; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

}  // namespace postal::routing::internal
