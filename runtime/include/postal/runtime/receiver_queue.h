// ReceiverQueue: the sink behind PortReceiver and OnceReceiver (runtime internal).
//
// A fiber-aware queue: `deliver` never blocks; `wait` suspends only the calling fiber (inside a
// Scheduler::BlockingScope, so its worker keeps running other actors) until an envelope, a
// failure or the deadline.
#pragma once

#include <chrono>
#include <deque>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "boost/fiber/condition_variable.hpp"
#include "boost/fiber/mutex.hpp"
#include "postal/runtime/port_sink.h"
#include "postal/runtime/scheduler.h"

namespace postal::runtime {

class ReceiverQueue final : public PortSink {
 public:
  explicit ReceiverQueue(Scheduler& sched) : sched_(sched) {}

  void deliver(EnvelopePtr env) override {
    std::unique_lock<boost::fibers::mutex> lock(mu_);
    items_.push_back(std::move(env));
    cv_.notify_one();
  }

  void fail(const DeliveryFailure& f) override {
    std::unique_lock<boost::fibers::mutex> lock(mu_);
    failure_ = f;
    cv_.notify_all();
  }

  // The next envelope; DeadlineExceeded after `timeout`; Unavailable with the failure line when
  // the request behind this port came back undeliverable.
  absl::StatusOr<EnvelopePtr> wait(absl::Duration timeout) {
    std::unique_lock<boost::fibers::mutex> lock(mu_);
    auto ready = [&] { return !items_.empty() || failure_.has_value(); };
    if (!ready()) {
      if (sched_.stopping()) return absl::CancelledError("the proc is stopping");
      Scheduler::BlockingScope blocking(sched_, this);
      const auto now = std::chrono::steady_clock::now();
      const auto max_wait = std::chrono::steady_clock::time_point::max() - now;
      if (timeout == absl::InfiniteDuration() || absl::ToChronoNanoseconds(timeout) >= max_wait) {
        cv_.wait(lock, ready);
      } else if (!cv_.wait_until(lock, now + absl::ToChronoNanoseconds(timeout), ready)) {
        return absl::DeadlineExceededError(
            absl::StrCat("no message within ", absl::FormatDuration(timeout)));
      }
    }
    if (!items_.empty()) {
      EnvelopePtr env = std::move(items_.front());
      items_.pop_front();
      return env;
    }
    return absl::UnavailableError(failure_->to_string());
  }

  // Whether `wait` would return at once (an envelope or a failure is there).
  bool ready() {
    std::unique_lock<boost::fibers::mutex> lock(mu_);
    return !items_.empty() || failure_.has_value();
  }

  std::optional<EnvelopePtr> try_pop() {
    std::unique_lock<boost::fibers::mutex> lock(mu_);
    if (items_.empty()) return std::nullopt;
    EnvelopePtr env = std::move(items_.front());
    items_.pop_front();
    return env;
  }

 private:
  Scheduler& sched_;
  boost::fibers::mutex mu_;
  boost::fibers::condition_variable cv_;
  std::deque<EnvelopePtr> items_;
  std::optional<DeliveryFailure> failure_;
};

}  // namespace postal::runtime
