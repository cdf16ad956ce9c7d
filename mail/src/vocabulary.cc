// The names of the mail layer's enums, and the retry policy's arithmetic.
#include <algorithm>
#include <cmath>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "postal/mail/capability.h"
#include "postal/mail/deliver_policy.h"
#include "postal/mail/disposition.h"
#include "postal/mail/mail_admin.h"
#include "postal/mail/mail_provider.h"
#include "postal/mail/mailbox_policy.h"
#include "postal/mail/mail_status.h"
#include "postal/mail/priority.h"
#include "postal/mail/retry_policy.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {

std::string_view to_string(Disposition disposition) {
  switch (disposition) {
    case Disposition::kHandled:
      return "handled";
    case Disposition::kDiscard:
      return "discard";
    case Disposition::kUnhandled:
      return "unhandled";
    case Disposition::kTerminate:
      return "terminate";
  }
  return "handled";
}

std::optional<Disposition> parse_disposition(std::string_view name) {
  for (Disposition d : {Disposition::kHandled, Disposition::kDiscard, Disposition::kUnhandled,
                        Disposition::kTerminate}) {
    if (to_string(d) == name) return d;
  }
  return std::nullopt;
}

std::string_view to_string(DeliverPolicy policy) {
  switch (policy) {
    case DeliverPolicy::kAll:
      return "all";
    case DeliverPolicy::kNew:
      return "new";
    case DeliverPolicy::kLast:
      return "last";
  }
  return "all";
}

std::optional<DeliverPolicy> parse_deliver_policy(std::string_view name) {
  for (DeliverPolicy p : {DeliverPolicy::kAll, DeliverPolicy::kNew, DeliverPolicy::kLast}) {
    if (to_string(p) == name) return p;
  }
  return std::nullopt;
}

std::string_view to_string(Capability capability) {
  switch (capability) {
    case Capability::kPost:
      return "post";
    case Capability::kSubscribe:
      return "subscribe";
    case Capability::kFetch:
      return "fetch";
    case Capability::kManualAck:
      return "manual-ack";
    case Capability::kPeek:
      return "peek";
    case Capability::kStatus:
      return "status";
    case Capability::kEnumerate:
      return "enumerate";
    case Capability::kRecover:
      return "recover";
    case Capability::kClear:
      return "clear";
    case Capability::kLocate:
      return "locate";
    case Capability::kSettleByKey:
      return "settle-by-key";
    case Capability::kDeadLetter:
      return "dead-letter";
    case Capability::kParked:
      return "parked";
    case Capability::kWaitIdle:
      return "wait-idle";
    case Capability::kRetained:
      return "retained";
    case Capability::kPolicy:
      return "policy";
  }
  return "?";
}

std::string_view to_string(MailboxState state) {
  switch (state) {
    case MailboxState::kOnline:
      return "online";
    case MailboxState::kUnknown:
      return "unknown";
    case MailboxState::kDegraded:
      return "degraded";
    case MailboxState::kOffline:
      return "offline";
  }
  return "unknown";
}

std::string_view to_string(CopyState state) {
  switch (state) {
    case CopyState::kQueued:
      return "queued";
    case CopyState::kInFlight:
      return "in-flight";
    case CopyState::kParked:
      return "parked";
  }
  return "queued";
}

absl::Status RetryPolicy::validate() const {
  if (max_attempts < 1) {
    return absl::InvalidArgumentError(
        "RetryPolicy.max_attempts is 0; it counts the first try, so use 1 (no retry) or more");
  }
  if (base_delay < absl::ZeroDuration() || max_delay < base_delay) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RetryPolicy delays are base_delay=", sv(absl::FormatDuration(base_delay)),
        ", max_delay=", sv(absl::FormatDuration(max_delay)), "; use 0 <= base_delay <= max_delay"));
  }
  if (!(factor >= 1.0) || !std::isfinite(factor) || !(jitter >= 0.0 && jitter <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("RetryPolicy factor=", factor, ", jitter=",
                                                   jitter, "; use factor >= 1 and 0 <= jitter <= 1"));
  }
  return absl::OkStatus();
}

absl::Status MailboxPolicy::validate() const {
  if (retry.has_value()) {
    if (absl::Status s = retry->validate(); !s.ok()) return s;
  }
  if (settle_timeout.has_value() &&
      (*settle_timeout < absl::ZeroDuration() || *settle_timeout == absl::InfiniteDuration())) {
    return absl::InvalidArgumentError(
        absl::StrCat("MailboxPolicy.settle_timeout is ", sv(absl::FormatDuration(*settle_timeout)),
                     "; use a finite timeout, or 0 for no watchdog"));
  }
  return absl::OkStatus();
}

absl::Duration next_retry_delay(const RetryPolicy& policy, uint32_t failed_attempt) {
  const double exponent = failed_attempt == 0 ? 0 : std::min<uint32_t>(failed_attempt - 1, 1024);
  const double scale = std::pow(policy.factor, exponent);  // may be inf: the cap below holds
  absl::Duration delay = std::isfinite(scale) && scale < 1e12 ? policy.base_delay * scale
                                                              : policy.max_delay;
  delay = std::min(delay, policy.max_delay);
  if (policy.jitter > 0) {
    thread_local absl::BitGen gen;
    delay -= delay * (policy.jitter * absl::Uniform(gen, 0.0, 1.0));
  }
  return delay;
}

std::string_view to_string(Priority priority) {
  switch (priority) {
    case Priority::kCritical:
      return "critical";
    case Priority::kUrgent:
      return "urgent";
    case Priority::kNormal:
      break;
  }
  return "normal";
}

std::optional<Priority> parse_priority(std::string_view text) {
  for (Priority p : kPrioritiesHighFirst) {
    if (text == to_string(p)) return p;
  }
  return std::nullopt;
}

}  // namespace postal::mail
