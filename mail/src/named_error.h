// Named errors (internal): an absl::Status whose message starts with its name and whose payload at
// `payload_url` holds the name, so `IsX(status)` is a payload check, never a string match. Shared
// by mail_errors.cc and inbox/inbox_errors.cc, each with its own payload url.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::error_internal {

inline absl::Status named(std::string_view payload_url, absl::StatusCode code,
                          std::string_view name, std::string_view message) {
  absl::Status s(code, absl::StrCat(sv(name), ": ", sv(message)));
  s.SetPayload(sv(payload_url), absl::Cord(sv(name)));
  return s;
}

inline bool is_named(std::string_view payload_url, const absl::Status& status,
                     std::string_view name) {
  absl::optional<absl::Cord> p = status.GetPayload(sv(payload_url));
  return p.has_value() && *p == sv(name);
}

}  // namespace postal::mail::error_internal
