// LogRateLimit: at most one line per window for a line that input can repeat (R-FAIL-4).
//
// The first line is written at once; later ones within `window` of the last written line are
// counted, not written; the next written line says how many were suppressed. Thread-safe and
// lock-free. Time comes from the clock handed in, so tests step it by hand.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string_view>

#include "absl/time/time.h"
#include "postal/runtime/logger.h"

namespace postal::runtime {

class LogRateLimit {
 public:
  using Clock = std::function<absl::Time()>;

  explicit LogRateLimit(absl::Duration window, Clock clock = &absl::Now);

  // Logs `message` on `logger` at `level` when the window allows it; returns whether it did.
  bool log(const Logger& logger, LogLevel level, std::string_view message);

  // Lines suppressed since construction.
  uint64_t suppressed_total() const { return suppressed_total_.load(std::memory_order_relaxed); }

 private:
  const int64_t window_ns_;
  const Clock clock_;
  std::atomic<int64_t> last_ns_{INT64_MIN};
  std::atomic<uint64_t> suppressed_since_{0};
  std::atomic<uint64_t> suppressed_total_{0};
};

}  // namespace postal::runtime
