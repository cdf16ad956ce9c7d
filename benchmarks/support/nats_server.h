// nats_server.h — a nats-server child process for the length of a benchmark run (the broker peer
// of `postal bench` and of mail_publish_bench), and the process helpers it stands on.
//
// `NatsServer::start` runs Debian's nats-server on a free 127.0.0.1 port with a generated config
// (optionally JetStream with a file store in a fresh folder), waits until it accepts connections
// (at most 5 s) and stops it (SIGTERM, then waits) on destruction; the folder and the config go
// with it. A child started here gets SIGTERM when this process dies (PR_SET_PDEATHSIG), so an
// interrupted run leaves no server behind.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace postal::bench {

// nats-server on PATH or in the sbin folders Debian installs it to; empty when not found.
std::string find_nats_server();

// Starts `args` (argv[0] a path) with stdout to `out_fd` (/dev/null when -1) and stderr to
// /dev/null when `quiet`; the child dies with this process. Returns its pid.
absl::StatusOr<pid_t> spawn_child(const std::vector<std::string>& args, int out_fd, bool quiet);

// A free loopback TCP port (bound, then released for the caller to bind).
int free_loopback_port();

struct NatsServerOptions {
  std::string binary{};               // empty: find_nats_server()
  bool jetstream = false;             // `jetstream { store_dir: … }`, file store
  uint64_t max_payload = 8ull << 20;  // 1 MiB messages need more than the 1 MB default
};

class NatsServer {
 public:
  static absl::StatusOr<std::unique_ptr<NatsServer>> start(NatsServerOptions options = {});
  ~NatsServer();
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  const std::string& url() const { return url_; }              // nats://127.0.0.1:PORT
  const std::string& store_dir() const { return store_dir_; }  // JetStream's folder, or empty

 private:
  NatsServer() = default;
  pid_t pid_ = -1;
  std::string url_;
  std::string dir_;
  std::string store_dir_;
};

}  // namespace postal::bench
