#include "postal/runtime/log_rate_limit.h"

#include "absl/strings/str_cat.h"
#include "postal/wire/absl_compat.h"

namespace postal::runtime {

LogRateLimit::LogRateLimit(absl::Duration window, Clock clock)
    : window_ns_(absl::ToInt64Nanoseconds(window)), clock_(std::move(clock)) {}

bool LogRateLimit::log(const Logger& logger, LogLevel level, std::string_view message) {
  if (!logger.enabled(level)) return false;
  const int64_t now = absl::ToUnixNanos(clock_());
  int64_t last = last_ns_.load(std::memory_order_relaxed);
  // The first caller past the window wins the line; the others count it as suppressed.
  if ((last != INT64_MIN && now - last < window_ns_) ||
      !last_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
    suppressed_since_.fetch_add(1, std::memory_order_relaxed);
    suppressed_total_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const uint64_t suppressed = suppressed_since_.exchange(0, std::memory_order_relaxed);
  if (suppressed == 0) {
    logger.log(level, message);
  } else {
    logger.log(level, absl::StrCat(sv(message), " (", suppressed, " similar line",
                                   suppressed == 1 ? "" : "s", " suppressed)"));
  }
  return true;
}

}  // namespace postal::runtime
