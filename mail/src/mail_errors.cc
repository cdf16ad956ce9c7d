#include "postal/mail/mail_errors.h"

#include <optional>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "named_error.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

constexpr std::string_view kErrorPayload = "type.postal.dev/mail.error";
constexpr std::string_view kRetriablePayload = "type.postal.dev/mail.retriable";
constexpr std::string_view kCodePayload = "type.postal.dev/mail.code";

absl::Status named(absl::StatusCode code, std::string_view name, std::string_view message) {
  return error_internal::named(kErrorPayload, code, name, message);
}
bool is_named(const absl::Status& status, std::string_view name) {
  return error_internal::is_named(kErrorPayload, status, name);
}

std::optional<std::string> payload(const absl::Status& status, std::string_view url) {
  absl::optional<absl::Cord> p = status.GetPayload(sv(url));
  if (!p.has_value()) return std::nullopt;
  return std::string(*p);
}

}  // namespace

absl::Status InvalidMailboxAddressError(std::string_view input, std::string_view problem,
                                        std::string_view fix) {
  return named(absl::StatusCode::kInvalidArgument, "InvalidMailboxAddress",
               absl::StrCat(sv(problem), " in '", sv(input), "'; ", sv(fix)));
}
bool IsInvalidMailboxAddress(const absl::Status& status) {
  return is_named(status, "InvalidMailboxAddress");
}

absl::Status UnknownSchemeError(std::string_view scheme, std::string_view address) {
  return named(absl::StatusCode::kNotFound, "UnknownScheme",
               absl::StrCat("no provider is registered for scheme '", sv(scheme), "' (address '",
                            sv(address),
                            "'); register one with PostOffice::register_provider() before "
                            "start(), or use a registered scheme such as mem:"));
}
bool IsUnknownScheme(const absl::Status& status) { return is_named(status, "UnknownScheme"); }

absl::Status UnsupportedCapabilityError(std::string_view scheme, std::string_view capability,
                                        std::string_view detail) {
  return named(absl::StatusCode::kUnimplemented, "UnsupportedCapability",
               absl::StrCat("provider '", sv(scheme), "' does not declare '", sv(capability), "'",
                            detail.empty() ? "" : " (", sv(detail), detail.empty() ? "" : ")",
                            "; nothing was changed. Ask MailProvider::can() first, or use a "
                            "provider that declares it"));
}
bool IsUnsupportedCapability(const absl::Status& status) {
  return is_named(status, "UnsupportedCapability");
}

absl::Status MailboxNotFoundError(std::string_view id, std::string_view where) {
  return named(absl::StatusCode::kNotFound, "MailboxNotFound",
               absl::StrCat("no mailbox '", sv(id), "' in ", sv(where),
                            " (never created, deleted, or its TTL ended); create it first"));
}
bool IsMailboxNotFound(const absl::Status& status) { return is_named(status, "MailboxNotFound"); }

absl::Status MailboxConflictError(std::string_view detail) {
  return named(absl::StatusCode::kFailedPrecondition, "MailboxConflict", detail);
}
bool IsMailboxConflict(const absl::Status& status) { return is_named(status, "MailboxConflict"); }

absl::Status BudgetExhaustedError(std::string_view detail) {
  return named(absl::StatusCode::kResourceExhausted, "BudgetExhausted", detail);
}
bool IsBudgetExhausted(const absl::Status& status) { return is_named(status, "BudgetExhausted"); }

absl::Status IoFailedError(std::string_view detail) {
  return named(absl::StatusCode::kUnavailable, "IoFailed", detail);
}
bool IsIoFailed(const absl::Status& status) { return is_named(status, "IoFailed"); }

absl::Status RetriableError(std::string_view message) {
  return MarkRetriable(absl::UnavailableError(sv(message)));
}

absl::Status MarkRetriable(absl::Status status, bool retriable) {
  if (status.ok()) return status;
  status.SetPayload(sv(kRetriablePayload), absl::Cord(retriable ? "true" : "false"));
  return status;
}

absl::Status WithErrorCode(absl::Status status, std::string_view code) {
  if (status.ok()) return status;
  status.SetPayload(sv(kCodePayload), absl::Cord(sv(code)));
  return status;
}

bool IsRetriable(const absl::Status& status) {
  if (status.ok()) return false;
  if (std::optional<std::string> r = payload(status, kRetriablePayload)) return *r == "true";
  if (std::optional<std::string> code = payload(status, kCodePayload)) {
    return *code == "503" || *code == "504" || *code == "ECONNRESET" || *code == "ETIMEDOUT";
  }
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

}  // namespace postal::mail
