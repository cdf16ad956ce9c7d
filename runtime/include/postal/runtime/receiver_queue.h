// ReceiverQueue: the sink behind PortReceiver and OnceReceiver (runtime internal).
//
// `deliver` never blocks. `wait` suspends only the calling fiber when it runs on a worker (inside
// a Scheduler::BlockingScope, so its worker keeps running other actors) or on a deterministic
// proc; any other thread (a Client's, a test's) sleeps on a futex-backed condition variable.
// Boost.Fiber's primitives used from plain threads spin on their spinlocks: with more waiting
// threads than cores, a preempted holder made the others spin out their time slices (eight
// Client threads spent a third of both CPUs there).
#pragma once

#include <deque>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "boost/fiber/condition_variable.hpp"
#include "postal/runtime/port_sink.h"
#include "postal/runtime/scheduler.h"

namespace postal::runtime {

class ReceiverQueue final : public PortSink {
 public:
  explicit ReceiverQueue(Scheduler& sched) : sched_(sched) {}

  void deliver(EnvelopePtr env) override;
  void fail(const DeliveryFailure& f) override;

  // The next envelope; DeadlineExceeded after `timeout`; Unavailable with the failure line when
  // the request behind this port came back undeliverable.
  absl::StatusOr<EnvelopePtr> wait(absl::Duration timeout);

  // Whether `wait` would return at once (an envelope or a failure is there).
  bool ready();
  std::optional<EnvelopePtr> try_pop();

 private:
  bool ready_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !items_.empty() || failure_.has_value();
  }
  // Wakes a waiter of each kind that waits (after a change, with mu_ released).
  void notify(bool all, bool fibers, bool threads);
  absl::Status wait_as_fiber(absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Scheduler& sched_;
  absl::Mutex mu_;
  absl::CondVar threads_cv_;                        // plain threads
  boost::fibers::condition_variable_any fibers_cv_;  // fibers (workers, deterministic procs)
  int thread_waiters_ ABSL_GUARDED_BY(mu_) = 0;
  int fiber_waiters_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<EnvelopePtr> items_ ABSL_GUARDED_BY(mu_);
  std::optional<DeliveryFailure> failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace postal::runtime
