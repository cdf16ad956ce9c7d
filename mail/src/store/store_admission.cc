#include "store_admission.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::store {

absl::Status validate_spec(const MailboxSpec& spec) {
  if (spec.ttl < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("a mailbox TTL cannot be negative; use zero for none");
  }
  if (!spec.is_public) {
    if (!spec.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a private mailbox gets its id from the store (M-BOX-4); leave the name empty, not '",
          spec.name, "'"));
    }
    return absl::OkStatus();
  }
  if (spec.name.empty() || spec.name.size() > 255 || spec.name.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        "a public mailbox needs a name of 1 to 255 bytes without NUL, e.g. 'task.queue'");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> mailbox_id(const MailboxSpec& spec) {
  if (absl::Status s = validate_spec(spec); !s.ok()) return s;
  if (spec.is_public) return spec.name;
  return new_private_id();
}

MailboxInfo new_mailbox(const MailboxSpec& spec, std::string id, absl::Time now) {
  return MailboxInfo{
      .id = std::move(id),
      .is_public = spec.is_public,
      .created_at = now,
      .expires_at = spec.ttl == absl::ZeroDuration() ? absl::InfiniteFuture() : now + spec.ttl,
      .max_messages = spec.max_messages,
      .max_message_bytes = spec.max_message_bytes,
      .durable_all = spec.durable_all,
  };
}

absl::Status check_same_bounds(const MailboxInfo& existing, const MailboxSpec& spec) {
  if (existing.max_messages == spec.max_messages &&
      existing.max_message_bytes == spec.max_message_bytes) {
    return absl::OkStatus();
  }
  return MailboxConflictError(absl::StrCat(
      "mailbox '", existing.id, "' exists with maxMessages=", existing.max_messages,
      " and maxMessageBytes=", existing.max_message_bytes, "; this create asked for ",
      spec.max_messages, " and ", spec.max_message_bytes,
      ". Bounds must match exactly (TTL is not a bound); create it with the stored bounds or "
      "use another name"));
}

absl::Status check_mailbox_cap(size_t count, size_t max_mailboxes) {
  if (count < max_mailboxes) return absl::OkStatus();
  return BudgetExhaustedError(absl::StrCat(
      "the store holds ", count, " mailboxes, its limit (StoreLimits::max_mailboxes = ",
      max_mailboxes, "); nothing was created. Delete mailboxes or let their TTL end"));
}

absl::Status check_message_fits(const MailboxInfo& mailbox, uint64_t count, size_t bytes) {
  if (mailbox.max_message_bytes != 0 && bytes > mailbox.max_message_bytes) {
    return BudgetExhaustedError(absl::StrCat("a message of ", bytes, " bytes exceeds mailbox '",
                                             mailbox.id, "' (maxMessageBytes ",
                                             mailbox.max_message_bytes, "); nothing was stored"));
  }
  if (mailbox.max_messages != 0 && count >= mailbox.max_messages) {
    return BudgetExhaustedError(absl::StrCat("mailbox '", mailbox.id, "' holds ", count,
                                             " messages, its maxMessages; nothing was stored. "
                                             "Consume or delete messages first"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> new_private_id() {
  std::array<char, 16> bytes{};
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoFailedError(absl::StrCat("getrandom failed: ", std::strerror(errno),
                                        "; no private mailbox id can be generated"));
    }
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(absl::string_view(bytes.data(), bytes.size()));
}

}  // namespace postal::mail::store
