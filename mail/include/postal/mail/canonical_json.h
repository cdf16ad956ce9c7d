// canonical_json.h — the canonical form of a JSON payload, the basis of the inbox fingerprint
// (M-INBOX-2).
//
// `canonical_json(text)` parses `text` strictly and writes it back in one canonical form, so two
// payloads that mean the same JSON value get the same bytes and two that differ never do:
//   * objects: members sorted by their keys' UTF-16 code units (RFC 8785 §3.2.3, not UTF-8
//     bytes), no whitespace; arrays keep their order.
//   * strings: escapes decoded, then written with RFC 8785's escaping (`\"`, `\\`, `\b \f \n \r
//     \t`, other controls as `\u00xx`, everything else as literal UTF-8), so `"\u00e9"` and
//     `"é"` are one string.
//   * numbers: kept as exact decimals, never rounded through a double — RFC 8785 writes numbers
//     as doubles, so 2^53 and 2^53+1 would collide there; here they stay distinct. Equal
//     decimals are one number: `1`, `1.0`, `10e-1` → `1`; `-0` → `0`. The form follows
//     ECMAScript's Number-to-string layout on the exact digits: plain below 10^21 (`100`,
//     `0.5`, `0.000001`), scientific otherwise (`1e+21`, `1.5e-7`).
// Rejected, with `InvalidPayload` and never truncated or repaired:
//   * anything that is not strict RFC 8259 JSON (trailing commas, comments, single quotes,
//     leading zeros, a byte-order mark, trailing data, invalid UTF-8, raw control characters);
//   * `NaN`, `Infinity` and numbers outside a finite double's range (decimal exponent in
//     scientific notation above 308 or below -324) — non-finite values;
//   * duplicate object keys (compared after decoding escapes: `{"a":1,"\u0061":2}`), which a
//     lenient parser would silently resolve to one of them;
//   * lone surrogates (`"\ud800"`), which name no character;
//   * nesting deeper than `JsonLimits::max_depth` and input longer than `max_bytes`.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace postal::mail {

struct JsonLimits {
  size_t max_bytes = size_t{1} << 20;  // 1 MiB of payload text
  int max_depth = 64;                  // arrays and objects nested at most this deep
};

// The canonical form of `json`, or InvalidPayload naming the problem and its byte offset.
absl::StatusOr<std::string> canonical_json(std::string_view json, const JsonLimits& limits = {});

}  // namespace postal::mail
