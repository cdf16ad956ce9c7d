#include "postal/mail/system_headers.h"

#include <vector>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {

std::string_view to_string(DeadLetterReason reason) {
  switch (reason) {
    case DeadLetterReason::kFatal:
      return "fatal";
    case DeadLetterReason::kRetriable:
      return "retriable";
    case DeadLetterReason::kConsumerNack:
      return "consumer-nack";
    case DeadLetterReason::kExpiredLease:
      return "expired-lease";
  }
  return "fatal";
}

bool is_system_header(std::string_view name) {
  static constexpr std::string_view kExact[] = {"mbx-send-id", "mbx-sent-at", "mbx-round",
                                                "mbx-attempt", "mbx-max-attempts", "mbx-seq"};
  for (std::string_view exact : kExact) {
    if (absl::EqualsIgnoreCase(sv(name), sv(exact))) return true;
  }
  return absl::StartsWithIgnoreCase(sv(name), "mbx-dead-letter");
}

size_t strip_system_headers(wire::Headers& headers) {
  std::vector<std::string> doomed;
  for (const auto& [name, value] : headers) {
    if (is_system_header(name)) doomed.push_back(name);
  }
  for (const std::string& name : doomed) headers.erase(name);
  return doomed.size();
}

std::string mint_send_id() {
  thread_local absl::BitGen gen;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

std::string format_iso8601(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

}  // namespace postal::mail
