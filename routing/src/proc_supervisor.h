// ProcSupervisor: the OS side of a host — it spawns child procs, reaps them and tears them down
// (routing internal; Host owns one).
//
// `spawn` starts a program in its own process group, so a Ctrl-C at the terminal reaches the host
// alone, which then tears the children down in order (PR_SET_PDEATHSIG, set by proc_main, covers
// a host that dies). The child gets the write end of a pipe at kChildReadyFd for the ready
// protocol (ready_protocol.h); the caller reads the read end.
//
// A reaper thread polls one pidfd per child and turns each exit into a ProcExit, handed out by
// `next_exit` in reaping order. `terminate` sends SIGTERM, waits for the reaper, and sends
// SIGKILL to a child still there after the grace period (and again after each further one).
//
// Thread safety: spawn, terminate and stop are called by the owner's thread; next_exit and
// running from any thread.
#pragma once

#include <sys/types.h>

#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "postal/routing/proc_exit.h"

namespace postal::routing::internal {

class ProcSupervisor {
 public:
  // A started child and the read end of its ready pipe, closed when this is destroyed.
  class Child {
   public:
    Child(pid_t pid, int ready_fd) : pid_(pid), ready_fd_(ready_fd) {}
    Child(Child&& other) noexcept;
    Child& operator=(Child&&) = delete;
    ~Child();

    pid_t pid() const { return pid_; }
    int ready_fd() const { return ready_fd_; }

   private:
    pid_t pid_;
    int ready_fd_;
  };

  // Starts the reaper thread. `teardown_grace`: how long `terminate` waits before SIGKILL.
  explicit ProcSupervisor(absl::Duration teardown_grace);
  ProcSupervisor(const ProcSupervisor&) = delete;
  ProcSupervisor& operator=(const ProcSupervisor&) = delete;
  ~ProcSupervisor();  // stop(); children still running are left to `terminate` or PDEATHSIG

  // Starts `args[0]` (searched in PATH when it has no '/') with `args` as its argv; `name` labels
  // its ProcExit. InternalError when no pipe can be made; Unavailable (the OS's reason) when the
  // program cannot be started. A non-empty `secret` (R-SEC-1) is written into a fresh pipe whose
  // read end the child inherits at kChildSecretFd (its argv names it with --secret-fd): never
  // in argv or the environment, and the pipe is closed in the host once the child has it.
  absl::StatusOr<Child> spawn(std::string name, std::vector<std::string> args,
                              std::string_view secret = {});

  // The next child exit, or nullopt after `timeout`.
  std::optional<ProcExit> next_exit(absl::Duration timeout);

  // Whether `pid` is a child that is alive and not yet reaped.
  bool running(pid_t pid) const;

  // SIGTERM to each of `pids`, then waits until the reaper has reaped each, sending SIGKILL to
  // one that outlives the grace period.
  void terminate(const std::vector<pid_t>& pids);

  // Stops and joins the reaper once every tracked child is reaped. Idempotent.
  void stop();

 private:
  struct Tracked {
    pid_t pid;
    int pidfd;
    std::string name;
  };

  void reap_loop();
  void wake();
  bool tracked(pid_t pid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration teardown_grace_;
  mutable absl::Mutex mu_;
  std::deque<ProcExit> exits_ ABSL_GUARDED_BY(mu_);
  std::vector<Tracked> children_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int wake_fd_ = -1;  // eventfd: wakes the reaper when the pid set changes
  std::thread reaper_;
};

}  // namespace postal::routing::internal
