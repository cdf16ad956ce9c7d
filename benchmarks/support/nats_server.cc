#include "nats_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace postal::bench {
namespace {

namespace fs = std::filesystem;

bool can_connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

}  // namespace

std::string find_nats_server() {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) dirs = absl::StrSplit(path, ':');
  for (const char* d : {"/usr/sbin", "/usr/local/sbin", "/usr/local/bin", "/usr/bin"})
    dirs.push_back(d);
  for (const auto& d : dirs) {
    std::error_code ec;
    const fs::path p = fs::path(d) / "nats-server";
    if (!d.empty() && fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0)
      return p.string();
  }
  return "";
}

// Between fork and exec the child makes only async-signal-safe calls.
absl::StatusOr<pid_t> spawn_child(const std::vector<std::string>& args, int out_fd, bool quiet) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    return absl::UnavailableError(absl::StrCat("cannot start ", args[0], ": fork failed"));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) _exit(127);  // the parent died before prctl
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(out_fd >= 0 ? out_fd : null, 1);
    if (quiet) ::dup2(null, 2);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port;
}

absl::StatusOr<std::unique_ptr<NatsServer>> NatsServer::start(NatsServerOptions options) {
  if (options.binary.empty()) options.binary = find_nats_server();
  if (options.binary.empty()) {
    return absl::NotFoundError(
        "nats-server not found on PATH or in /usr/sbin: apt-get install nats-server");
  }
  const int port = free_loopback_port();
  if (port <= 0) return absl::UnavailableError("no free loopback port for nats-server");
  auto server = std::unique_ptr<NatsServer>(new NatsServer());
  server->dir_ = absl::StrCat("/tmp/postal-bench-nats-", ::getpid(), "-", port);
  std::error_code ec;
  fs::remove_all(server->dir_, ec);
  if (!fs::create_directories(server->dir_, ec)) {
    return absl::UnavailableError(absl::StrCat("cannot create ", server->dir_, ": ", ec.message()));
  }
  const std::string config = server->dir_ + "/nats.conf";
  {
    std::ofstream out(config);
    out << "max_payload: " << options.max_payload << "\n";
    if (options.jetstream) {
      server->store_dir_ = server->dir_ + "/js";
      out << "jetstream {\n  store_dir: \"" << server->store_dir_ << "\"\n}\n";
    }
  }
  absl::StatusOr<pid_t> pid = spawn_child(
      {options.binary, "-a", "127.0.0.1", "-p", std::to_string(port), "-c", config}, -1, true);
  if (!pid.ok()) return pid.status();
  server->pid_ = *pid;
  server->url_ = absl::StrCat("nats://127.0.0.1:", port);
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!can_connect(port)) {
    if (absl::Now() > deadline || ::waitpid(server->pid_, nullptr, WNOHANG) == server->pid_) {
      server->pid_ = -1;
      return absl::UnavailableError(absl::StrCat(
          options.binary, " did not accept connections on port ", port, " within 5 s"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return server;
}

NatsServer::~NatsServer() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  std::error_code ignored;
  if (!dir_.empty()) fs::remove_all(dir_, ignored);
}

}  // namespace postal::bench
