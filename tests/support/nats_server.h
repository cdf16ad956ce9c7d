// nats_server: a real nats-server (Debian's package) as a child process for the tests of what
// postal runs on NATS — JetStream on, its store in a folder of the test's, on a free loopback port.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "support/child_process.h"
#include "support/wait_for.h"

namespace postal::test_support {

class NatsServer {
 public:
  // The nats-server binary ($POSTAL_NATS_SERVER, else Debian's), or "" when there is none.
  static std::string binary() {
    if (const char* env = std::getenv("POSTAL_NATS_SERVER"); env != nullptr && *env != '\0') {
      return env;
    }
    for (const char* p : {"/usr/sbin/nats-server", "/usr/bin/nats-server"}) {
      if (std::filesystem::exists(p)) return p;
    }
    return "";
  }
  // What a test says when binary() is "".
  static constexpr const char* kMissing =
      "nats-server is not installed: run scripts/install-deps.sh (Debian package nats-server)";

  // Starts a server storing JetStream under `dir` (created); `extra` are more arguments.
  explicit NatsServer(std::filesystem::path dir, std::vector<std::string> extra = {})
      : dir_(std::move(dir)), extra_(std::move(extra)) {
    std::filesystem::create_directories(dir_);
    start();
  }
  ~NatsServer() { kill9(); }
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  // Whether it accepts connections (it says INFO) — false when it did not start in time.
  bool ready() const { return ready_; }
  int port() const { return port_; }
  std::string url() const { return absl::StrCat("nats://127.0.0.1:", port_); }
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path log() const { return dir_ / "nats-server.log"; }

  void kill9() {
    if (process_) process_->kill();
    process_.reset();
    ready_ = false;
  }
  // SIGSTOP / SIGCONT: a server that stops reading its sockets, then reads them again.
  void pause() {
    if (process_) process_->signal(SIGSTOP);
  }
  void resume() {
    if (process_) process_->signal(SIGCONT);
  }
  // kill -9, then the same server again: same port, same store folder.
  bool restart() {
    kill9();
    start();
    return ready_;
  }

 private:
  static bool says_info(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    if (ok) {
      char buf[4] = {};
      ok = ::recv(fd, buf, sizeof(buf), MSG_WAITALL) == 4 && std::string(buf, 4) == "INFO";
    }
    ::close(fd);
    return ok;
  }
  // The first start lets the server pick a free port (-p -1) and reads it from the log, so tests
  // running side by side never race for one; a restart asks for the same port again.
  void start() {
    std::vector<std::string> args{"-a", "127.0.0.1", "-p", port_ == 0 ? "-1" : std::to_string(port_),
                                  "-js", "-sd", dir_.string()};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::filesystem::remove(log());
    process_ = std::make_unique<ChildProcess>(binary(), args, log());
    ready_ = wait_for([&] { return (port_ != 0 || read_port()) && says_info(port_); },
                      absl::Seconds(20));
  }
  bool read_port() {
    constexpr std::string_view kListening = "Listening for client connections on ";
    for (const std::string& line : log_lines(log())) {
      const size_t at = line.find(kListening);
      if (at == std::string::npos) continue;
      const size_t colon = line.rfind(':');
      port_ = std::atoi(line.c_str() + colon + 1);
      return port_ != 0;
    }
    return false;
  }

  std::filesystem::path dir_;
  std::vector<std::string> extra_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
  bool ready_ = false;
};

}  // namespace postal::test_support
