// inbox_errors.h — the inbox's error vocabulary (M-INBOX-1…3), named like the mail layer's
// (mail_errors.h): the message starts with the name, and the name is a status payload, so
// `IsIdentityConflict(s)` does not parse messages.
//
//   name              code                raised when
//   InvalidPayload    InvalidArgument     a payload is not canonicalizable JSON (canonical_json.h)
//                                         or an identity field is empty; nothing was stored
//   IdentityConflict  AlreadyExists       accept of a retained identity with another fingerprint;
//                                         the existing record is unchanged (M-INBOX-2)
//   InboxPermanent    FailedPrecondition  returned by a handler: do not retry, the record goes
//                                         DEAD at once (M-INBOX-3)
//   StaleClaim        Aborted             a claim's completion was refused: its lease ended, or
//                                         another worker holds the record now (M-INBOX-3)
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace postal::mail {

absl::Status InvalidPayloadError(std::string_view detail);
bool IsInvalidPayload(const absl::Status& status);

absl::Status IdentityConflictError(std::string_view detail);
bool IsIdentityConflict(const absl::Status& status);

absl::Status InboxPermanentError(std::string_view detail);
bool IsInboxPermanent(const absl::Status& status);

absl::Status StaleClaimError(std::string_view detail);
bool IsStaleClaim(const absl::Status& status);

// The name of an inbox error ("" for any other status), and a status given that name back —
// for carrying a named error across a process (inbox_port.h), where the payload does not go.
std::string inbox_error_name(const absl::Status& status);
absl::Status named_inbox_error(absl::StatusCode code, std::string_view name,
                               std::string_view message);

}  // namespace postal::mail
