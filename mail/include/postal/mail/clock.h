// clock.h — `Clock`: the time source and timer facility of the mail layer.
//
// Everything in the mail layer that depends on time — lease expiry (M-ACK-1), the retry backoff
// (M-RETRY-2), the delivery-settle watchdog (M-RETRY-4), the lease sweeper (M-ACK-3),
// `lastActivityTime` (M-STAT-1) — reads one injected Clock, so tests drive time instead of
// sleeping:
//
//   auto clock = std::make_shared<ManualClock>();
//   ... post, let a subscriber fail retriably ...
//   clock->advance(absl::Seconds(1));   // the backoff timer fires here, on this thread
//
// Contract
//   * `schedule_at(when, fn)` runs `fn` once, at or after `when`, with no clock lock held, so
//     `fn` may schedule or cancel timers. Timers due at the same time run in scheduling order.
//   * `cancel(id)` returns true when `fn` will not run (it was still pending), false when it
//     already ran, is running, or `id` is unknown. Cancel never waits for a running `fn`;
//     callers that race with a firing timer must check their own state inside `fn`.
//   * A clock's destruction drops the timers still pending, without running them.
//
// SystemClock runs timers on one thread it starts on first use. ManualClock runs them inside
// `advance()`, on the calling thread, each with `now()` set to its due time.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace postal::mail {

class Clock {
 public:
  using TimerId = uint64_t;  // 0 is never a valid id
  using TimerFn = absl::AnyInvocable<void() &&>;

  virtual ~Clock() = default;
  virtual absl::Time now() const = 0;
  virtual TimerId schedule_at(absl::Time when, TimerFn fn) = 0;
  virtual bool cancel(TimerId id) = 0;

  TimerId schedule_after(absl::Duration delay, TimerFn fn) {
    return schedule_at(now() + delay, std::move(fn));
  }
};

// Wall-clock time; timers on a thread of its own.
class SystemClock final : public Clock {
 public:
  SystemClock();
  ~SystemClock() override;
  SystemClock(const SystemClock&) = delete;
  SystemClock& operator=(const SystemClock&) = delete;

  absl::Time now() const override { return absl::Now(); }
  TimerId schedule_at(absl::Time when, TimerFn fn) override;
  bool cancel(TimerId id) override;

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the timer thread
};

// Time that moves only when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  // Starts at 2023-11-14T22:13:20Z, a fixed, round instant.
  explicit ManualClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000));
  ~ManualClock() override;
  ManualClock(const ManualClock&) = delete;
  ManualClock& operator=(const ManualClock&) = delete;

  absl::Time now() const override;
  TimerId schedule_at(absl::Time when, TimerFn fn) override;
  bool cancel(TimerId id) override;

  // Moves time forward by `d`, running every timer that falls due, in due-time order.
  void advance(absl::Duration d);
  // Timers still waiting.
  size_t pending() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace postal::mail
