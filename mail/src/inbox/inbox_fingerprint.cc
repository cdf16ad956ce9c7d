#include "postal/mail/inbox_fingerprint.h"

#include "absl/strings/str_cat.h"
#include "sha256.h"

namespace postal::mail {

std::string fingerprint_canonical(std::string_view event_type, int64_t schema_version,
                                  std::string_view canonical_payload) {
  inbox::Sha256 h;
  h.update(absl::StrCat("postal.inbox.fingerprint.v1\n", event_type.size(), ":"));
  h.update(event_type);
  h.update(absl::StrCat("\n", schema_version, "\n"));
  h.update(canonical_payload);
  return inbox::to_hex(h.finish());
}

absl::StatusOr<std::string> inbox_fingerprint(std::string_view event_type, int64_t schema_version,
                                              std::string_view payload, const JsonLimits& limits) {
  absl::StatusOr<std::string> canonical = canonical_json(payload, limits);
  if (!canonical.ok()) return canonical.status();
  return fingerprint_canonical(event_type, schema_version, *canonical);
}

}  // namespace postal::mail
