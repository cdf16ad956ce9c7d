#include "postal/mail/clock.h"

#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace postal::mail {
namespace {

// Pending timers ordered by (due time, id): equal due times run in scheduling order.
class TimerQueue {
 public:
  Clock::TimerId add(absl::Time when, Clock::TimerFn fn) {
    Clock::TimerId id = next_++;
    by_time_.emplace(std::make_pair(when, id), std::move(fn));
    due_.emplace(id, when);
    return id;
  }
  // Moves the cancelled timer's function to `doomed`, so the caller destroys it unlocked.
  bool cancel(Clock::TimerId id, Clock::TimerFn& doomed) {
    auto it = due_.find(id);
    if (it == due_.end()) return false;
    auto timer = by_time_.find(std::make_pair(it->second, id));
    doomed = std::move(timer->second);
    by_time_.erase(timer);
    due_.erase(it);
    return true;
  }
  bool empty() const { return by_time_.empty(); }
  size_t size() const { return by_time_.size(); }
  absl::Time earliest() const { return by_time_.begin()->first.first; }
  // Removes and returns the earliest timer.
  std::pair<absl::Time, Clock::TimerFn> pop() {
    auto it = by_time_.begin();
    std::pair<absl::Time, Clock::TimerFn> out(it->first.first, std::move(it->second));
    due_.erase(it->first.second);
    by_time_.erase(it);
    return out;
  }
  void clear(std::vector<Clock::TimerFn>& out) {
    for (auto& [key, fn] : by_time_) out.push_back(std::move(fn));
    by_time_.clear();
    due_.clear();
  }

 private:
  Clock::TimerId next_ = 1;
  std::map<std::pair<absl::Time, Clock::TimerId>, Clock::TimerFn> by_time_;
  absl::flat_hash_map<Clock::TimerId, absl::Time> due_;
};

}  // namespace

// ---- SystemClock -----------------------------------------------------------------------------

struct SystemClock::State {
  absl::Mutex mu;
  absl::CondVar changed;
  TimerQueue timers ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::thread thread ABSL_GUARDED_BY(mu);

  static void run(std::shared_ptr<State> self) {
    absl::MutexLock lock(&self->mu);
    while (!self->stopping) {
      if (self->timers.empty()) {
        self->changed.Wait(&self->mu);
        continue;
      }
      absl::Time due = self->timers.earliest();
      if (due > absl::Now()) {
        self->changed.WaitWithDeadline(&self->mu, due);
        continue;
      }
      TimerFn fn = self->timers.pop().second;
      self->mu.Unlock();
      std::move(fn)();
      fn = nullptr;  // destroy captures without the lock
      self->mu.Lock();
    }
  }
};

SystemClock::SystemClock() : state_(std::make_shared<State>()) {}

SystemClock::~SystemClock() {
  std::thread thread;
  std::vector<TimerFn> dropped;
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopping = true;
    state_->timers.clear(dropped);
    thread = std::move(state_->thread);
    state_->changed.SignalAll();
  }
  dropped.clear();
  if (!thread.joinable()) return;
  // A timer that drops the last reference to its own clock must not join itself.
  if (thread.get_id() == std::this_thread::get_id()) {
    thread.detach();
  } else {
    thread.join();
  }
}

Clock::TimerId SystemClock::schedule_at(absl::Time when, TimerFn fn) {
  absl::MutexLock lock(&state_->mu);
  if (!state_->thread.joinable() && !state_->stopping) {
    state_->thread = std::thread(&State::run, state_);
  }
  TimerId id = state_->timers.add(when, std::move(fn));
  state_->changed.SignalAll();
  return id;
}

bool SystemClock::cancel(TimerId id) {
  TimerFn doomed;
  absl::MutexLock lock(&state_->mu);
  return state_->timers.cancel(id, doomed);
}

// ---- ManualClock -----------------------------------------------------------------------------

struct ManualClock::State {
  mutable absl::Mutex mu;
  absl::Time now ABSL_GUARDED_BY(mu);
  TimerQueue timers ABSL_GUARDED_BY(mu);
};

ManualClock::ManualClock(absl::Time start) : state_(std::make_unique<State>()) {
  absl::MutexLock lock(&state_->mu);
  state_->now = start;
}

ManualClock::~ManualClock() {
  std::vector<TimerFn> dropped;
  absl::MutexLock lock(&state_->mu);
  state_->timers.clear(dropped);
}

absl::Time ManualClock::now() const {
  absl::MutexLock lock(&state_->mu);
  return state_->now;
}

Clock::TimerId ManualClock::schedule_at(absl::Time when, TimerFn fn) {
  absl::MutexLock lock(&state_->mu);
  return state_->timers.add(when, std::move(fn));
}

bool ManualClock::cancel(TimerId id) {
  TimerFn doomed;
  absl::MutexLock lock(&state_->mu);
  return state_->timers.cancel(id, doomed);
}

void ManualClock::advance(absl::Duration d) {
  absl::Time target;
  {
    absl::MutexLock lock(&state_->mu);
    target = state_->now + d;
  }
  while (true) {
    TimerFn fn;
    {
      absl::MutexLock lock(&state_->mu);
      if (state_->timers.empty() || state_->timers.earliest() > target) {
        if (state_->now < target) state_->now = target;
        return;
      }
      auto [due, popped] = state_->timers.pop();
      if (due > state_->now) state_->now = due;
      fn = std::move(popped);
    }
    std::move(fn)();
  }
}

size_t ManualClock::pending() const {
  absl::MutexLock lock(&state_->mu);
  return state_->timers.size();
}

}  // namespace postal::mail
