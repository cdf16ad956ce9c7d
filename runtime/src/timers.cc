#include "postal/runtime/timers.h"
#include "postal/runtime/thread_name.h"

#include <vector>

#include "postal/runtime/mailbox_bound.h"

namespace postal::runtime {

Timers::Timers(Clock clock, bool threaded)
    : clock_(clock ? std::move(clock) : Clock(&absl::Now)), threaded_(threaded) {}

Timers::~Timers() { stop(); }

uint64_t Timers::schedule(absl::Time due, std::function<void()> fn, absl::Duration period) {
  absl::MutexLock lock(&mu_);
  if (stopped_) return 0;
  const uint64_t id = next_id_++;
  auto [it, inserted] =
      queue_.emplace(Key{due, id}, Entry{std::move(fn), std::max(period, absl::ZeroDuration())});
  due_of_.emplace(id, due);
  if (it == queue_.begin() && due < nap_until_) earlier_ = true;  // it naps past `due`
  if (threaded_ && !thread_.joinable()) thread_ = std::thread([this] {
    name_this_thread("postal-timers");
    NoBlockScope no_block;  // R-FLOW-1: a timer thread never waits for a full mailbox
    run();
  });
  return id;
}

bool Timers::cancel(uint64_t id) {
  absl::MutexLock lock(&mu_);
  if (id != 0 && id == firing_) {
    firing_cancelled_ = true;
    return true;
  }
  auto it = due_of_.find(id);
  if (it == due_of_.end()) return false;
  queue_.erase(Key{it->second, id});
  due_of_.erase(it);
  return true;
}

bool Timers::pending(uint64_t id) const {
  absl::MutexLock lock(&mu_);
  return due_of_.contains(id) || (id != 0 && id == firing_ && !firing_cancelled_);
}

size_t Timers::size() const {
  absl::MutexLock lock(&mu_);
  return due_of_.size();
}

size_t Timers::fire_due() {
  absl::MutexLock fire_lock(&fire_mu_);
  const absl::Time now = clock_();
  // Only what is due now: a periodic timer re-armed below fires again on the next call.
  std::vector<Key> due;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = queue_.begin(); it != queue_.end() && it->first.first <= now; ++it) {
      due.push_back(it->first);
    }
  }
  size_t fired = 0;
  for (const Key& key : due) {
    Entry entry;
    {
      absl::MutexLock lock(&mu_);
      auto it = queue_.find(key);
      if (it == queue_.end()) continue;  // cancelled by an earlier callback
      entry = std::move(it->second);
      queue_.erase(it);
      due_of_.erase(key.second);
      firing_ = key.second;
      firing_cancelled_ = false;
    }
    entry.fn();
    ++fired;
    absl::MutexLock lock(&mu_);
    firing_ = 0;
    if (entry.period > absl::ZeroDuration() && !firing_cancelled_ && !stopped_) {
      // The next due time follows the schedule, not the firing, so a late tick does not drift.
      absl::Time next = key.first + entry.period;
      if (next <= now) next = now + entry.period;
      queue_.emplace(Key{next, key.second}, std::move(entry));
      due_of_.emplace(key.second, next);
    }
  }
  return fired;
}

void Timers::run() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopped_ || earlier_ || (!queue_.empty() && queue_.begin()->first.first <= clock_());
      };
      const absl::Time now = clock_();
      absl::Duration nap = kMaxNap;
      if (!queue_.empty()) nap = std::min(nap, queue_.begin()->first.first - now);
      if (!ready()) {
        nap_until_ = now + nap;
        mu_.AwaitWithTimeout(absl::Condition(&ready), nap);
        nap_until_ = absl::InfinitePast();
      }
      if (stopped_) return;
      earlier_ = false;
    }
    fire_due();
  }
}

void Timers::stop() {
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    queue_.clear();
    due_of_.clear();
  }
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // stopped from a callback: the loop returns on its own
  } else {
    thread_.join();
  }
}

}  // namespace postal::runtime
