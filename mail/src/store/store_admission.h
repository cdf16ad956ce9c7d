// store_admission.h — the checks both MailStores make before they change anything (M-BOX-1,
// M-BOX-4…6), so the two stores answer alike by construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/mail_store.h"

namespace postal::mail::store {

// InvalidArgument for a malformed spec (a public name that is empty, over 255 bytes or holds a
// NUL; a private spec with a name; a negative TTL).
absl::Status validate_spec(const MailboxSpec& spec);

// The id a create of `spec` uses: the validated public name, or a new private id (M-BOX-4).
absl::StatusOr<std::string> mailbox_id(const MailboxSpec& spec);

// The MailboxInfo a create of `spec` stores at `now` under `id`.
MailboxInfo new_mailbox(const MailboxSpec& spec, std::string id, absl::Time now);

// M-BOX-1: OK when `existing` may answer a create of `spec`, else MailboxConflict.
absl::Status check_same_bounds(const MailboxInfo& existing, const MailboxSpec& spec);

// M-BOX-5: BudgetExhausted when a store holding `count` mailboxes is full.
absl::Status check_mailbox_cap(size_t count, size_t max_mailboxes);

// M-BOX-6: BudgetExhausted when a body of `bytes` does not fit a mailbox holding `count`.
absl::Status check_message_fits(const MailboxInfo& mailbox, uint64_t count, size_t bytes);

// M-BOX-4: 128 bits from the OS CSPRNG (getrandom), as 32 lowercase hex digits.
absl::StatusOr<std::string> new_private_id();

// Whether a message of `priority` in `mailbox` is durable (M-PRIO-2).
inline bool is_durable(const MailboxInfo& mailbox, Priority priority) {
  return priority != Priority::kNormal || mailbox.durable_all;
}

}  // namespace postal::mail::store
