// mail_errors.h — the error vocabulary of the mail layer, and what makes a consumer error
// retriable (M-ACK-4).
//
// Every mail error is an `absl::Status`. Its message starts with the error's name and a colon
// (`InvalidMailboxAddress: …`), names the input and what is wrong, and says what to write
// instead. The name is also attached as a status payload, so `IsInvalidMailboxAddress(s)` and
// friends do not parse messages.
//
//   name                   code               raised when
//   InvalidMailboxAddress  InvalidArgument    an address does not parse (M-ADDR-1, M-ADDR-2)
//   UnknownScheme          NotFound           no provider is registered for the address's scheme
//   UnsupportedCapability  Unimplemented      the provider did not declare the operation or
//                                             disposition; raised before anything changes
//   MailboxNotFound        NotFound           a store has no such mailbox (never created,
//                                             deleted, or its TTL ended)
//   MailboxConflict        FailedPrecondition create of an existing mailbox with other bounds
//                                             (M-BOX-1)
//   BudgetExhausted        ResourceExhausted  a bound would be passed: the mailbox cap, a
//                                             message's bytes or a mailbox's message count
//                                             (M-BOX-5, M-BOX-6); nothing was published
//   IoFailed               Unavailable        the store cannot be used: admission contention
//                                             (M-BOX-7), a refused or unreadable store file
//                                             (M-STORE-1), a failed write; nothing changed
//
// Push consumers (subscription callbacks) report with a status too (M-ACK-4):
//   OK                        → handled
//   a retriable error         → unhandled (back to the queue, or retried under a RetryPolicy)
//   any other error           → discard (given up; dead-lettered when enabled)
// An error is retriable when it says so (`RetriableError(...)`, `MarkRetriable(s)`), or its code
// is 503 / 504 / ECONNRESET / ETIMEDOUT: either attached with `WithErrorCode(s, "ECONNRESET")`,
// or the canonical absl codes for them — `kUnavailable` (503, ECONNRESET) and
// `kDeadlineExceeded` (504, ETIMEDOUT), which is what `absl::ErrnoToStatus` produces.
// `MarkRetriable(s, false)` overrides the code and makes an error fatal.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace postal::mail {

// `InvalidMailboxAddress: <problem> in '<input>'; <fix>`.
absl::Status InvalidMailboxAddressError(std::string_view input, std::string_view problem,
                                        std::string_view fix);
bool IsInvalidMailboxAddress(const absl::Status& status);

// `UnknownScheme: no provider is registered for scheme '<scheme>' ...`.
absl::Status UnknownSchemeError(std::string_view scheme, std::string_view address);
bool IsUnknownScheme(const absl::Status& status);

// `UnsupportedCapability: provider '<scheme>' does not declare '<capability>' ...`.
absl::Status UnsupportedCapabilityError(std::string_view scheme, std::string_view capability,
                                        std::string_view detail);
bool IsUnsupportedCapability(const absl::Status& status);

// `MailboxNotFound: no mailbox '<id>' in <where>; <fix>`.
absl::Status MailboxNotFoundError(std::string_view id, std::string_view where);
bool IsMailboxNotFound(const absl::Status& status);

// `MailboxConflict: <detail>`.
absl::Status MailboxConflictError(std::string_view detail);
bool IsMailboxConflict(const absl::Status& status);

// `BudgetExhausted: <detail>`.
absl::Status BudgetExhaustedError(std::string_view detail);
bool IsBudgetExhausted(const absl::Status& status);

// `IoFailed: <detail>`.
absl::Status IoFailedError(std::string_view detail);
bool IsIoFailed(const absl::Status& status);

// A retriable consumer error: code Unavailable, explicitly marked retriable.
absl::Status RetriableError(std::string_view message);
// `status` marked as retriable (or, with `retriable = false`, as fatal whatever its code).
absl::Status MarkRetriable(absl::Status status, bool retriable = true);
// `status` carrying a transport error code such as "503", "ECONNRESET".
absl::Status WithErrorCode(absl::Status status, std::string_view code);
// M-ACK-4: whether a consumer's error asks for the message back. OK is never retriable.
bool IsRetriable(const absl::Status& status);

}  // namespace postal::mail
