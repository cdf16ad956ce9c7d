// wait_for: polls a condition until it holds or a deadline passes — the tests' way to wait on
// an event another thread causes, without a fixed sleep.
#pragma once

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace postal::test_support {

// Polls `done` every millisecond until it holds or `deadline` passes; whether it held.
inline bool wait_for(const std::function<bool()>& done, absl::Duration deadline = absl::Seconds(20)) {
  const absl::Time give_up = absl::Now() + deadline;
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

}  // namespace postal::test_support
