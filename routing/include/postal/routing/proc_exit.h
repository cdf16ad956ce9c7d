// ProcExit: a child proc that ended, as the host reports it (a supervision event).
//
// `Host::next_exit` hands these out in the order the children were reaped. `wait_status` is what
// waitpid gave, so callers can tell an exit status from a signal; `to_string` says it in words.
#pragma once

#include <sys/types.h>

#include <string>

namespace postal::routing {

struct ProcExit {
  std::string name;
  pid_t pid = -1;
  int wait_status = 0;            // as from waitpid
  std::string to_string() const;  // "alpha (pid 123) exited with status 0" / "killed by SIGKILL"
};

}  // namespace postal::routing
