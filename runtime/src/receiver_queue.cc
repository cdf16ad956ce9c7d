#include "postal/runtime/receiver_queue.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace postal::runtime {
namespace {

// absl::Mutex as the BasicLockable that condition_variable_any unlocks around a fiber's wait.
struct FiberLock {
  absl::Mutex& mu;
  void lock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu.Lock(); }
  void unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu.Unlock(); }
};

}  // namespace

void ReceiverQueue::deliver(EnvelopePtr env) {
  bool fibers, threads;
  {
    absl::MutexLock lock(&mu_);
    items_.push_back(std::move(env));
    fibers = fiber_waiters_ > 0;
    threads = thread_waiters_ > 0;
  }
  notify(false, fibers, threads);
}

void ReceiverQueue::fail(const DeliveryFailure& f) {
  bool fibers, threads;
  {
    absl::MutexLock lock(&mu_);
    failure_ = f;
    fibers = fiber_waiters_ > 0;
    threads = thread_waiters_ > 0;
  }
  notify(true, fibers, threads);
}

void ReceiverQueue::notify(bool all, bool fibers, bool threads) {
  if (fibers) all ? fibers_cv_.notify_all() : fibers_cv_.notify_one();
  if (threads) all ? threads_cv_.SignalAll() : threads_cv_.Signal();
}

absl::Status ReceiverQueue::wait_as_fiber(absl::Duration timeout) {
  FiberLock lock{mu_};
  auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return ready_locked(); };
  const auto now = std::chrono::steady_clock::now();
  const auto max_wait = std::chrono::steady_clock::time_point::max() - now;
  ++fiber_waiters_;
  bool woke = true;
  if (timeout == absl::InfiniteDuration() || absl::ToChronoNanoseconds(timeout) >= max_wait) {
    fibers_cv_.wait(lock, ready);
  } else {
    woke = fibers_cv_.wait_until(lock, now + absl::ToChronoNanoseconds(timeout), ready);
  }
  --fiber_waiters_;
  if (woke) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("no message within ", absl::FormatDuration(timeout)));
}

absl::StatusOr<EnvelopePtr> ReceiverQueue::wait(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (!ready_locked()) {
    if (sched_.stopping()) return absl::CancelledError("the proc is stopping");
    Scheduler::BlockingScope blocking(sched_, this);
    if (Scheduler::current() != nullptr || sched_.options().manual) {
      if (absl::Status s = wait_as_fiber(timeout); !s.ok()) return s;
    } else {
      ++thread_waiters_;
      const absl::Time deadline = timeout == absl::InfiniteDuration()
                                      ? absl::InfiniteFuture()
                                      : absl::Now() + timeout;
      while (!ready_locked()) {
        if (threads_cv_.WaitWithDeadline(&mu_, deadline) && !ready_locked()) break;
      }
      --thread_waiters_;
      if (!ready_locked()) {
        return absl::DeadlineExceededError(
            absl::StrCat("no message within ", absl::FormatDuration(timeout)));
      }
    }
  }
  if (!items_.empty()) {
    EnvelopePtr env = std::move(items_.front());
    items_.pop_front();
    return env;
  }
  return absl::UnavailableError(failure_->to_string());
}

bool ReceiverQueue::ready() {
  absl::MutexLock lock(&mu_);
  return ready_locked();
}

std::optional<EnvelopePtr> ReceiverQueue::try_pop() {
  absl::MutexLock lock(&mu_);
  if (items_.empty()) return std::nullopt;
  EnvelopePtr env = std::move(items_.front());
  items_.pop_front();
  return env;
}

}  // namespace postal::runtime
