// mailbox_policy.h — `MailboxPolicy`, the redelivery settings of one queue mailbox (M-RETRY-6).
//
// A provider delivers with its own settings (MemOptions: retry, max_delivery_rounds,
// dead_letter, delivery_settle_timeout). A mailbox may override any of them; a subscription may
// override retry and the settle watchdog again (SubscribeOptions, M-RETRY-5). Precedence, field
// by field: subscription > mailbox > provider. An unset field inherits.
//
//   office.set_policy("mem:orders@shop.example/inbox",
//                     {.retry = RetryPolicy{.max_attempts = 5, .base_delay = absl::Seconds(2)},
//                      .max_delivery_rounds = 10, .dead_letter = true});
//
// Where each field applies: `retry` to every push attempt's retry decision and backoff (the one
// after a failure, decided when it fails); `settle_timeout` to the watchdog of every push attempt
// started after it was set; `max_delivery_rounds` when a copy is requeued (a failed broadcast,
// `unhandled`, an expired lease); `dead_letter` when a copy is given up: false drops it (counted
// in `<scheme>.droppedCount`) even when the provider dead-letters, true dead-letters it (with the
// provider's DeadLetterOptions, or the defaults when the provider has none). The dead-letter
// suffix and nesting cap stay the provider's.
//
// A policy belongs to the address, not to a subscription or the mailbox's content: it survives
// the mailbox having no subscribers, being empty or cleared, and the provider's stop/start; an
// empty policy clears it. Setting one does not make the mailbox known to status (M-STAT-1).
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "postal/mail/retry_policy.h"

namespace postal::mail {

struct MailboxPolicy {
  std::optional<RetryPolicy> retry = std::nullopt;
  std::optional<uint64_t> max_delivery_rounds = std::nullopt;  // 0: unlimited
  std::optional<bool> dead_letter = std::nullopt;
  std::optional<absl::Duration> settle_timeout = std::nullopt;  // 0: no watchdog

  bool empty() const {
    return !retry && !max_delivery_rounds && !dead_letter && !settle_timeout;
  }
  // InvalidArgument for a bad retry policy (RetryPolicy::validate) or a negative or infinite
  // settle timeout.
  absl::Status validate() const;
  bool operator==(const MailboxPolicy&) const = default;
};

}  // namespace postal::mail
