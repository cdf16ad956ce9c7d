#include "postal/mail/system_headers.h"

#include <vector>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
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

// Both run once per post: written out by hand, as a format string costs more than the rest of
// minting the headers.
std::string mint_send_id() {
  thread_local absl::BitGen gen;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (int half = 0; half < 2; ++half) {
    uint64_t v = absl::Uniform<uint64_t>(gen);
    for (int i = 15; i >= 0; --i, v >>= 4) id[half * 16 + i] = kHex[v & 0xf];
  }
  return id;
}

std::string format_iso8601(absl::Time t) {
  const absl::TimeZone::CivilInfo at = absl::UTCTimeZone().At(t);
  const int64_t year = at.cs.year();
  if (year < 0 || year > 9999) return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
  std::string out = "0000-00-00T00:00:00.000Z";
  auto put = [&out](size_t at_end, int64_t value, int digits) {
    for (int i = 0; i < digits; ++i, value /= 10) out[at_end - i] = static_cast<char>('0' + value % 10);
  };
  put(3, year, 4);
  put(6, at.cs.month(), 2);
  put(9, at.cs.day(), 2);
  put(12, at.cs.hour(), 2);
  put(15, at.cs.minute(), 2);
  put(18, at.cs.second(), 2);
  put(22, absl::ToInt64Milliseconds(at.subsecond), 3);
  return out;
}

}  // namespace postal::mail
