// inbox_fingerprint.h — the content fingerprint of an inbox message (M-INBOX-2).
//
// SHA-256 over the event type, the schema version and the canonical JSON of the payload
// (canonical_json.h), framed so that no two different triples share an input: a version tag,
// the event type's length and bytes, the schema version in decimal, then the canonical payload.
// Metadata (trace, correlation, causation ids) is not part of it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "postal/mail/canonical_json.h"

namespace postal::mail {

// 64 lowercase hex digits, from an already canonical payload.
std::string fingerprint_canonical(std::string_view event_type, int64_t schema_version,
                                  std::string_view canonical_payload);

// Canonicalizes `payload` first; InvalidPayload when it cannot be.
absl::StatusOr<std::string> inbox_fingerprint(std::string_view event_type, int64_t schema_version,
                                              std::string_view payload,
                                              const JsonLimits& limits = {});

}  // namespace postal::mail
