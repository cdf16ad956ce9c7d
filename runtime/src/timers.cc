#include "postal/runtime/timers.h"
#include "postal/runtime/thread_name.h"

#include <algorithm>
#include <vector>

#include "postal/runtime/mailbox_bound.h"

namespace postal::runtime {

Timers::Timers(Clock clock, bool threaded)
    : clock_(clock ? std::move(clock) : Clock(&absl::Now)), threaded_(threaded) {}

Timers::~Timers() { stop(); }

bool Timers::live(const Key& key) const {
  auto it = entries_.find(key.second);
  return it != entries_.end() && it->second.due == key.first;
}

void Timers::push(const Key& key) {
  // Stale keys are dropped only at the top; past twice the live timers (plus slack, so small
  // sets never rebuild), start over from the live ones: O(live), amortized over the cancels.
  if (heap_.size() >= 2 * entries_.size() + 64) {
    heap_.clear();
    for (const auto& [id, entry] : entries_) heap_.emplace_back(entry.due, id);
    std::make_heap(heap_.begin(), heap_.end(), Later());
  }
  heap_.push_back(key);
  std::push_heap(heap_.begin(), heap_.end(), Later());
}

void Timers::drop_stale_top() {
  while (!heap_.empty() && !live(heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end(), Later());
    heap_.pop_back();
  }
}

uint64_t Timers::schedule(absl::Time due, std::function<void()> fn, absl::Duration period) {
  absl::MutexLock lock(&mu_);
  if (stopped_) return 0;
  const uint64_t id = next_id_++;
  entries_.emplace(id, Entry{std::move(fn), std::max(period, absl::ZeroDuration()), due});
  push(Key{due, id});
  if (due < nap_until_) {  // the thread naps past `due`
    earlier_ = true;
    wake_.Signal();
  }
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
  return entries_.erase(id) > 0;  // its heap key goes stale
}

bool Timers::pending(uint64_t id) const {
  absl::MutexLock lock(&mu_);
  return entries_.contains(id) || (id != 0 && id == firing_ && !firing_cancelled_);
}

size_t Timers::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

size_t Timers::fire_due() {
  absl::MutexLock fire_lock(&fire_mu_);
  const absl::Time now = clock_();
  // Only what is due now, in due order: a periodic timer re-armed below fires again on the
  // next call.
  std::vector<Key> due;
  {
    absl::MutexLock lock(&mu_);
    while (!heap_.empty() && heap_.front().first <= now) {
      std::pop_heap(heap_.begin(), heap_.end(), Later());
      if (live(heap_.back())) due.push_back(heap_.back());
      heap_.pop_back();
    }
  }
  size_t fired = 0;
  for (const Key& key : due) {
    Entry entry;
    {
      absl::MutexLock lock(&mu_);
      auto it = entries_.find(key.second);
      if (it == entries_.end()) continue;  // cancelled by an earlier callback
      entry = std::move(it->second);
      entries_.erase(it);
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
      entry.due = next;
      entries_.emplace(key.second, std::move(entry));
      push(Key{next, key.second});
    }
  }
  return fired;
}

void Timers::run() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      drop_stale_top();
      const absl::Time now = clock_();
      if (!stopped_ && !earlier_ && (heap_.empty() || heap_.front().first > now)) {
        absl::Duration nap = kMaxNap;
        if (!heap_.empty()) nap = std::min(nap, heap_.front().first - now);
        nap_until_ = now + nap;
        // A timeout or a signal (an earlier timer, stop) ends the nap; either way fire_due()
        // below re-reads the clock, which is what an injected clock needs every kMaxNap.
        wake_.WaitWithTimeout(&mu_, nap);
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
    entries_.clear();
    heap_.clear();
    wake_.Signal();
  }
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // stopped from a callback: the loop returns on its own
  } else {
    thread_.join();
  }
}

}  // namespace postal::runtime
