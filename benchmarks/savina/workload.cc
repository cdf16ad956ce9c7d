#include "workload.h"

#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "postal/runtime/client.h"
#include "postal/runtime/logger.h"
#include "postal/runtime/proc.h"

namespace postal::savina {

const std::vector<Workload>& workloads() {
  static const std::vector<Workload> kAll = {
      {"pingpong", "caf_01_pingpong", "", &run_ping_pong},
      {"count", "caf_02_count", "", &run_count},
      {"fjthrput", "caf_03_fjthrput", "", &run_fork_join_throughput},
      {"fjcreate", "caf_04_fjcreate", "", &run_fork_join_create},
      {"threadring", "caf_05_threadring", "", &run_thread_ring},
      {"chameneos", "caf_06_chameneos", "", &run_chameneos},
      {"big", "caf_07_big", "", &run_big},
      {"concdict", "caf_08_concdict", "", &run_concurrent_dictionary},
      {"banking-blocking", "caf_15_banking_request_await_high_timeout",
       "blocking request (ref.request in the handler)", &run_banking_blocking},
      {"banking-then", "caf_15_banking_request_then_high_timeout",
       "event-based request (cx.request(...).then(...))", &run_banking_then},
      {"banking-become", "caf_15_banking_become_unbecome_fast",
       "plain reply port, only the answer received while waiting (cx.receive_only)",
       &run_banking_become},
      {"banking-stash", "caf_15_banking_become_unbecome_fast",
       "plain reply port, messages stashed while waiting", &run_banking_stash},
      {"fib", "caf_29_fib", "", &run_fibonacci},
  };
  return kAll;
}

const Workload* find_workload(std::string_view name) {
  for (const Workload& w : workloads()) {
    if (w.name == name) return &w;
  }
  return nullptr;
}

absl::Status Completion::wait(absl::Duration timeout, std::string_view what) const {
  if (finished_.WaitForNotificationWithTimeout(timeout)) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat(std::string(what), " did not finish within ", absl::FormatDuration(timeout)));
}

absl::Status run_iteration(
    const RunOptions& options, std::string_view what, const Completion& done,
    absl::FunctionRef<absl::Status(runtime::Proc&, runtime::Client&)> start) {
  {
    runtime::Proc proc(runtime::ProcOptions::threads(options.threads));
    absl::StatusOr<std::unique_ptr<runtime::Client>> client = runtime::Client::attach(proc, "main");
    if (!client.ok()) return annotate(client.status(), "attach the main client");
    if (absl::Status started = start(proc, **client); !started.ok()) return started;
    if (absl::Status finished = done.wait(options.timeout, what); !finished.ok()) return finished;
    const runtime::SchedulerStats st = proc.scheduler().stats();
    runtime::Logger::get("postal.savina")
        .info(absl::StrFormat("%s: scheduler: %d slices, %d steals, %d sleeps, %d wake-ups, "
                              "%d extra runners",
                              std::string(what), st.slices, st.steals, st.sleeps, st.wakeups,
                              st.runners));
  }
  const double teardown_ms = std::chrono::duration<double, std::milli>(
                                 std::chrono::steady_clock::now() - done.finished_at())
                                 .count();
  runtime::Logger::get("postal.savina")
      .info(absl::StrFormat("%s: %.1f ms from the workload's end to the proc destroyed",
                            std::string(what), teardown_ms));
  return absl::OkStatus();
}

absl::Status annotate(const absl::Status& status, std::string_view step) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(std::string(step), ": ", status.message()));
}

}  // namespace postal::savina
