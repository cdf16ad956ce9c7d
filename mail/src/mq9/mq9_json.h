// mq9_json.h — the JSON bodies of the mq9 bridge: CREATE's request, and the replies and events
// it sends (docs/mq9.md lists them field by field).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/mail_store.h"
#include "postal/mail/retained_mailboxes.h"

namespace postal::mail::mq9 {

// {"ttl": s, "public": b, "name": "...", "max_messages": n, "max_message_bytes": n,
//  "durable_all": b}; every field optional but `name` for a public mailbox. InvalidArgument
// naming the field and what it should hold.
absl::StatusOr<MailboxSpec> parse_create(std::string_view body, absl::Duration default_ttl);

// {"mail_id": "...", "public": b, "created_at": s, "expires_at": s|null, "ttl": s|0}, plus
// "created" when `created` is given.
std::string mailbox_json(const MailboxInfo& info, const bool* created = nullptr);
// {"mailboxes": [mailbox_json...]}
std::string listing_json(const std::vector<MailboxInfo>& mailboxes);
// {"event": "listed"|"created"|"expired"|"removed", "mailbox": mailbox_json}
std::string event_json(std::string_view event, const MailboxInfo& info);
// {"error": {"code": "MailboxNotFound", "message": "..."}}
std::string error_json(const absl::Status& status);
// The error's mail-layer name (MailboxNotFound, BudgetExhausted, ...) or its absl code name.
std::string error_code(const absl::Status& status);

// The headers block pushed with a stored message (for clients that announced headers).
std::string message_headers(const RetainedMessage& m);

}  // namespace postal::mail::mq9
