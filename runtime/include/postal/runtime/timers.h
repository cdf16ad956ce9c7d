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
//
// Cost: a request sets a timeout and nearly always cancels it (R-REQ-*, R-ACT-10), so schedule
// and cancel are the hot path, both O(1) amortized: the live timers are a hash map by id, and a
// binary heap of (due, id) orders them; cancel only erases from the map, and a heap key whose
// timer is gone (or was re-armed) is dropped when it reaches the top, or by a rebuild once stale
// keys outnumber live ones. The thread sleeps on a CondVar that only a timer due before its wake
// time (or stop) signals, so an ordinary schedule/cancel never wakes it or makes it re-check.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>
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
    absl::Time due;  // the heap key that is live for this timer
  };
  using Key = std::pair<absl::Time, uint64_t>;
  // Orders std::*_heap as a min-heap on (due, id).
  struct Later {
    bool operator()(const Key& a, const Key& b) const { return a > b; }
  };

  void run();
  // The heap key is still the live one of its timer.
  bool live(const Key& key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void push(const Key& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pops stale keys off the top, so heap_.front() (if any) is a live timer.
  void drop_stale_top() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock clock_;
  const bool threaded_;
  absl::Mutex fire_mu_;  // one fire_due at a time
  mutable absl::Mutex mu_;
  absl::CondVar wake_;  // signalled only when the thread must wake before its nap ends
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);  // the live timers
  std::vector<Key> heap_ ABSL_GUARDED_BY(mu_);  // may hold stale keys (see the header)
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
