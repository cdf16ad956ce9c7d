// local_nats.h — `LocalNats`: the nats-server a Host starts for a topology that asks for one
// (`[topology] start_nats = "host:port"`, routing internal). Core NATS only: nats:// channels
// need no JetStream.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nats_tunnel.h"

namespace postal::routing::internal {

class LocalNats {
 public:
  // Starts nats-server ($POSTAL_NATS_SERVER, else on PATH or in /usr/sbin) listening on
  // host:port, and returns once it accepts connections; FailedPrecondition when there is no
  // nats-server, Unavailable when it did not come up within `timeout` (its log is named).
  // `authorization` (nats_permissions.h; empty: none) goes into a configuration file in a private
  // folder (0700, the file 0600), never into argv.
  static absl::StatusOr<std::unique_ptr<LocalNats>> start(const std::string& host, uint16_t port,
                                                          const std::string& authorization,
                                                          const std::string& log_file,
                                                          absl::Duration timeout);
  ~LocalNats();  // SIGTERM, then SIGKILL after 5 s; reaped
  LocalNats(const LocalNats&) = delete;
  LocalNats& operator=(const LocalNats&) = delete;

  pid_t pid() const { return pid_; }

 private:
  LocalNats(pid_t pid, nats_tunnel::PrivateDir dir) : pid_(pid), dir_(std::move(dir)) {}
  pid_t pid_;
  nats_tunnel::PrivateDir dir_;  // the configuration file
};

}  // namespace postal::routing::internal
