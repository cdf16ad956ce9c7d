// Timers: callbacks due at a time on the proc's clock (R-SUP-3, and R-SUP-1's restart backoff).
//
// A proc owns one `Timers` (`Proc::timers()`). `schedule(due, fn, period)` returns an id;
// `cancel(id)` removes it (true when it was still pending; a periodic timer cancelled from its
// own callback does not fire again). Callbacks run outside the lock, one at a time, and must
// not block: they post envelopes.
//
// Time is the proc's clock (`ProcOptions::clock`). With threads, one background thread —
// started by the first `schedule`, so a proc that never sets a timer has none — fires callbacks
// when they are due; it re-reads the clock at least every `kMaxNap`, so an injected clock works
// too. Deterministic procs have no thread: a callback fires only when `fire_due()` runs, which
// `Scheduler::step()` does before each step, so a test moves virtual time by advancing its clock
// and stepping (nothing ever sleeps).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace postal::runtime {

class Timers {
 public:
  using Clock = std::function<absl::Time()>;
  static constexpr absl::Duration kMaxNap = absl::Milliseconds(100);

  // `threaded`: a background thread fires due callbacks; otherwise only `fire_due()` does.
  Timers(Clock clock, bool threaded);
  ~Timers();
  Timers(const Timers&) = delete;
  Timers& operator=(const Timers&) = delete;

  // Fires `fn` at `due`, then every `period` after that when `period` is positive. Ids start at
  // 1 and are never reused.
  uint64_t schedule(absl::Time due, std::function<void()> fn,
                    absl::Duration period = absl::ZeroDuration());
  bool cancel(uint64_t id);
  bool pending(uint64_t id) const;
  size_t size() const;
  absl::Time now() const { return clock_(); }

  // Fires every callback due by now (periodic ones once each); returns how many fired.
  size_t fire_due();
  // Stops the thread and drops every pending callback; later schedules are ignored (id 0).
  void stop();

 private:
  struct Entry {
    std::function<void()> fn;
    absl::Duration period;
  };
  using Key = std::pair<absl::Time, uint64_t>;

  void run();

  const Clock clock_;
  const bool threaded_;
  absl::Mutex fire_mu_;  // one fire_due at a time
  mutable absl::Mutex mu_;
  std::map<Key, Entry> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, absl::Time> due_of_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t firing_ ABSL_GUARDED_BY(mu_) = 0;  // the id whose callback runs now
  bool firing_cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool earlier_ ABSL_GUARDED_BY(mu_) = false;  // a timer went ahead of the one the thread naps for
  // When the thread's nap ends (its clock); InfinitePast while it does not nap. A timer due at or
  // after it needs no wake-up: a request's timeout, set and cancelled per request, would
  // otherwise wake the thread on every request.
  absl::Time nap_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::thread thread_;
};

}  // namespace postal::runtime
