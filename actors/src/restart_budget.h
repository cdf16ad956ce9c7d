// RestartBudget: R-SUP-1's "at most N restarts in a window, exponential backoff" (actors
// internal). Times are the proc's clock, so deterministic tests move them by hand.
#pragma once

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "postal/actors/supervision.h"

namespace postal::actors::internal {

class RestartBudget {
 public:
  explicit RestartBudget(const Supervision& s) : s_(s) {}

  // A failure at `now`: the backoff before the restart, or nullopt when the policy escalates or
  // the budget is spent (max_restarts already within the window).
  std::optional<absl::Duration> on_failure(absl::Time now) {
    if (!s_.restarts()) return std::nullopt;
    std::erase_if(recent_, [&](absl::Time t) { return now - t >= s_.window; });
    if (static_cast<int>(recent_.size()) >= s_.max_restarts) return std::nullopt;
    recent_.push_back(now);
    absl::Duration wait = s_.backoff;
    for (size_t i = 1; i < recent_.size() && wait < s_.max_backoff; ++i) wait *= 2;
    return std::min(wait, s_.max_backoff);
  }
  size_t recent() const { return recent_.size(); }

 private:
  Supervision s_;
  std::vector<absl::Time> recent_;  // empty (no allocation) until a failure
};

}  // namespace postal::actors::internal
