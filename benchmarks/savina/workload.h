// The Savina actor benchmark suite on postal (Imam & Sarkar, AGERE 2014), beside CAF's port
// (github.com/woelke/savina, branch caf_integration): one workload per file, this header the
// table that names them.
//
// A workload is one Savina program. `run` performs one iteration the way the CAF port's
// `run_iteration` does — build the runtime (a `Proc` with `RunOptions::threads` workers), spawn,
// drive it to the end, tear it all down — and checks what the workload computed (a Fibonacci
// number, a count, a conserved balance, …): a wrong result is an error, never a time. What it
// checked comes back as one line for the log.
//
// Parameters: `Size::kDefault` is Savina's published defaults, as the CAF port's `config`
// classes set them; `Size::kSmall` is what the ctest runs (the same code, a few milliseconds).
#pragma once

#include <chrono>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace postal::runtime {
class Client;
class Proc;
}  // namespace postal::runtime

namespace postal::savina {

enum class Size { kDefault, kSmall };

struct RunOptions {
  int threads = 2;
  Size size = Size::kDefault;
  // How long one iteration may take before it is reported as hung.
  absl::Duration timeout = absl::Seconds(120);
};

// One iteration: OK with what was checked ("fib(25) = 75025"), or why the run or its check failed.
using RunFn = absl::StatusOr<std::string> (*)(const RunOptions&);

struct Workload {
  std::string_view name;     // the --workload name: "pingpong", "banking-then", …
  std::string_view caf;      // the CAF port's program it is measured against
  std::string_view variant;  // how it is written, where Savina's port has variants ("" if not)
  RunFn run;
};

// Every workload, in the Savina numbering order.
const std::vector<Workload>& workloads();
// nullptr when no workload has that name.
const Workload* find_workload(std::string_view name);

// The end of one iteration: the actor that sees the workload finish calls `done()` (once); the
// iteration waits for it before tearing the proc down.
class Completion {
 public:
  void done() {
    finished_at_ = std::chrono::steady_clock::now();
    finished_.Notify();
  }
  // DeadlineExceeded naming `what` when `done()` was not called within `timeout`.
  absl::Status wait(absl::Duration timeout, std::string_view what) const;
  // When `done()` was called; valid once `wait` returned OK.
  std::chrono::steady_clock::time_point finished_at() const { return finished_at_; }

 private:
  std::chrono::steady_clock::time_point finished_at_;
  absl::Notification finished_;
};

// The work both fork-join workloads do per message (Savina's `performComputation`): false when
// the result is impossible (the port throws then). Inline, as in the port's translation units.
inline bool perform_computation(double theta) {
  const double sint = std::sin(theta);
  return sint * sint > 0;
}

// One iteration's frame, what every workload shares: a proc with `options.threads` workers and a
// client for the main thread (CAF's `anon_send`); `start` spawns and kicks the workload; then the
// iteration waits for `done` and tears the client and the proc down (timed: the port's
// iteration builds and destroys its `actor_system`, which waits for every actor). How long the
// teardown took after the workload's end is logged on `postal.savina`.
absl::Status run_iteration(const RunOptions& options, std::string_view what, const Completion& done,
                           absl::FunctionRef<absl::Status(runtime::Proc&, runtime::Client&)> start);

// Prefixes a failed status with the step that failed ("spawn ping: …").
absl::Status annotate(const absl::Status& status, std::string_view step);

// The workloads (one file each).
absl::StatusOr<std::string> run_ping_pong(const RunOptions& options);
absl::StatusOr<std::string> run_count(const RunOptions& options);
absl::StatusOr<std::string> run_fork_join_throughput(const RunOptions& options);
absl::StatusOr<std::string> run_fork_join_create(const RunOptions& options);
absl::StatusOr<std::string> run_thread_ring(const RunOptions& options);
absl::StatusOr<std::string> run_chameneos(const RunOptions& options);
absl::StatusOr<std::string> run_big(const RunOptions& options);
absl::StatusOr<std::string> run_concurrent_dictionary(const RunOptions& options);
absl::StatusOr<std::string> run_banking_blocking(const RunOptions& options);
absl::StatusOr<std::string> run_banking_then(const RunOptions& options);
absl::StatusOr<std::string> run_banking_become(const RunOptions& options);
absl::StatusOr<std::string> run_banking_stash(const RunOptions& options);
absl::StatusOr<std::string> run_fibonacci(const RunOptions& options);

}  // namespace postal::savina
