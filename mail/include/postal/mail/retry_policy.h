// retry_policy.h — opt-in redelivery of a failing subscriber (M-RETRY-2).
//
// Without a policy a retriable failure only sends the message back to the queue (M-ACK-4), and
// a fetch consumer decides what happens next. With one, the provider re-invokes the failing
// subscriber — only that one: the others of the broadcast already ran their side effects — with
// exponential backoff, up to `max_attempts` attempts in total (the first included):
//
//   delay after failed attempt n = min(base_delay · factor^(n-1), max_delay)
//
// drawn uniformly from [delay · (1 − jitter), delay] when `jitter` > 0, so subscribers that
// failed together do not all come back at the same instant. A policy applies to the whole
// provider (MemOptions::retry) or to one subscription (SubscribeOptions::retry).
//
// A fatal (non-retriable) error ends the chain at once. An exhausted budget is not a give-up:
// the delivery counts as a retriable failure, so the message goes back to the queue when no
// delivery of the broadcast succeeded (M-RETRY-1). The backoff wait is not an attempt: the
// settle watchdog (M-RETRY-4) never counts it.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace postal::mail {

struct RetryPolicy {
  uint32_t max_attempts = 3;
  absl::Duration base_delay = absl::Seconds(1);
  absl::Duration max_delay = absl::Minutes(5);
  double factor = 2.0;  // >= 1: each wait is this many times the one before, up to max_delay
  double jitter = 0.0;  // 0…1: the share of each wait drawn at random (0: exact)

  // InvalidArgument unless max_attempts >= 1, 0 <= base_delay <= max_delay, factor >= 1 and
  // 0 <= jitter <= 1.
  absl::Status validate() const;
  bool operator==(const RetryPolicy&) const = default;
};

// The wait before the attempt after `failed_attempt` (1-based).
absl::Duration next_retry_delay(const RetryPolicy& policy, uint32_t failed_attempt);

}  // namespace postal::mail
