// libFuzzer target for the inbox's canonical JSON (M-INBOX-2): any input either is refused with
// InvalidPayload or canonicalizes to a form that re-parses and re-canonicalizes to itself.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "postal/mail/canonical_json.h"
#include "postal/mail/inbox_errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const postal::mail::JsonLimits limits{.max_bytes = 1 << 16, .max_depth = 32};
  absl::StatusOr<std::string> once = postal::mail::canonical_json(input, limits);
  if (!once.ok()) {
    if (!postal::mail::IsInvalidPayload(once.status())) std::abort();  // only InvalidPayload
    return 0;
  }
  // The canonical form may be longer than the input (1e20 → 21 digits): no size limit on it.
  absl::StatusOr<std::string> twice =
      postal::mail::canonical_json(*once, {.max_bytes = SIZE_MAX, .max_depth = 32});
  if (!twice.ok() || *twice != *once) std::abort();
  return 0;
}
