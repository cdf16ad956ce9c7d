// local_nats.h — `LocalNats`: the nats-server a Host starts for a topology that asks for one
// (`[topology] start_nats = "host:port"`, routing internal). Core NATS only: nats:// channels
// need no JetStream.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace postal::routing::internal {

class LocalNats {
 public:
  // Starts nats-server ($POSTAL_NATS_SERVER, else on PATH or in /usr/sbin) listening on
  // host:port, and returns once it accepts connections; FailedPrecondition when there is no
  // nats-server, Unavailable when it did not come up within `timeout` (its log is named).
  static absl::StatusOr<std::unique_ptr<LocalNats>> start(const std::string& host, uint16_t port,
                                                          const std::string& log_file,
                                                          absl::Duration timeout);
  ~LocalNats();  // SIGTERM, then SIGKILL after 5 s; reaped
  LocalNats(const LocalNats&) = delete;
  LocalNats& operator=(const LocalNats&) = delete;

  pid_t pid() const { return pid_; }

 private:
  explicit LocalNats(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

}  // namespace postal::routing::internal
