// ActorCell's timers (R-SUP-3): each is a proc timer whose callback posts a fresh envelope as
// this actor; the cell remembers their ids so that a stop, the end or a restart cancels them.
#include <algorithm>

#include "actor_cell.h"

namespace postal::actors::internal {

TimerHandle ActorCell::start_timer(absl::Duration delay, absl::Duration period,
                                   EnvelopeMaker make) {
  absl::MutexLock lock(&mu_);
  if (stop_requested_.load() || is_terminal(state_.load())) return TimerHandle();
  runtime::Timers& timers = proc_.timers();
  if (timers_.size() >= timers_prune_at_) {  // fired one-shots
    std::erase_if(timers_, [&](uint64_t id) { return !timers.pending(id); });
    timers_prune_at_ = std::max<size_t>(16, 2 * timers_.size());
  }
  runtime::Proc& proc = proc_;  // outlives its timers (~Proc stops them first)
  const uint64_t id = timers.schedule(
      proc_.now() + std::max(delay, absl::ZeroDuration()),
      [&proc, make = std::move(make)] { proc.send(make()); }, period);
  if (id == 0) return TimerHandle();  // the proc is going away
  timers_.push_back(id);
  return TimerHandle(id);
}

bool ActorCell::cancel(TimerHandle timer) {
  absl::MutexLock lock(&mu_);
  auto it = std::find(timers_.begin(), timers_.end(), timer.id());
  if (it == timers_.end()) return false;  // not one of ours, or cancelled already
  timers_.erase(it);
  return proc_.timers().cancel(timer.id());
}

void ActorCell::cancel_timers() {
  absl::MutexLock lock(&mu_);
  for (uint64_t id : timers_) proc_.timers().cancel(id);
  timers_.clear();
}

}  // namespace postal::actors::internal
