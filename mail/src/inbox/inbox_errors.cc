#include "postal/mail/inbox_errors.h"

#include "../named_error.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

constexpr std::string_view kErrorPayload = "type.postal.dev/mail.inbox.error";

absl::Status named(absl::StatusCode code, std::string_view name, std::string_view message) {
  return error_internal::named(kErrorPayload, code, name, message);
}
bool is_named(const absl::Status& status, std::string_view name) {
  return error_internal::is_named(kErrorPayload, status, name);
}

}  // namespace

absl::Status InvalidPayloadError(std::string_view detail) {
  return named(absl::StatusCode::kInvalidArgument, "InvalidPayload", detail);
}
bool IsInvalidPayload(const absl::Status& status) { return is_named(status, "InvalidPayload"); }

absl::Status IdentityConflictError(std::string_view detail) {
  return named(absl::StatusCode::kAlreadyExists, "IdentityConflict", detail);
}
bool IsIdentityConflict(const absl::Status& status) { return is_named(status, "IdentityConflict"); }

absl::Status InboxPermanentError(std::string_view detail) {
  return named(absl::StatusCode::kFailedPrecondition, "InboxPermanent", detail);
}
bool IsInboxPermanent(const absl::Status& status) { return is_named(status, "InboxPermanent"); }

absl::Status StaleClaimError(std::string_view detail) {
  return named(absl::StatusCode::kAborted, "StaleClaim", detail);
}
bool IsStaleClaim(const absl::Status& status) { return is_named(status, "StaleClaim"); }

std::string inbox_error_name(const absl::Status& status) {
  absl::optional<absl::Cord> p = status.GetPayload(sv(kErrorPayload));
  return p.has_value() ? std::string(*p) : std::string();
}

absl::Status named_inbox_error(absl::StatusCode code, std::string_view name,
                               std::string_view message) {
  absl::Status s(code, sv(message));
  if (!name.empty()) s.SetPayload(sv(kErrorPayload), absl::Cord(sv(name)));
  return s;
}

}  // namespace postal::mail
