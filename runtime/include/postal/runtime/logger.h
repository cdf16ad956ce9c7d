// Logger: postal's one logging facade (spdlog behind it, kept out of this header).
//
// Library code never writes to stdout/stderr; it logs through a named `Logger`, one per layer:
// `postal.runtime`, `postal.actors`, `postal.routing`, `postal.mail`, `postal.tools`. Each record
// carries a timestamp, the logger's name and a level.
//
// Configuration is process-wide (like the type registry, a documented process-wide table):
//   - the environment variable `POSTAL_LOG`, read on first use, e.g.
//     `POSTAL_LOG=info,postal.routing=debug` (a bare level sets the default, `name=level` one
//     logger; a name also covers the loggers below it: `postal=debug` is every postal logger);
//   - `configure_logging(spec)` with the same syntax (the `postal` command's `--log-level`, a
//     topology file's `log`), which replaces the previous configuration;
//   - `set_log_sink(sink)`: a program that embeds postal installs its own sink and receives every
//     record that passes its logger's level; `nullptr` restores the default (stderr).
// The default level is `info`. `enabled()` is one relaxed atomic load, so a disabled debug line
// costs nothing but the check: build the message only behind it.
//
//   const Logger& log = Logger::routing();
//   if (log.enabled(LogLevel::kDebug)) log.debug(absl::StrCat("dialed ", addr));
//
// Lines that input can repeat go through a `LogRateLimit` (log_rate_limit.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace postal::runtime {

enum class LogLevel : uint8_t { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };

// "trace" | "debug" | "info" | "warn" (or "warning") | "error" | "critical" | "off".
absl::StatusOr<LogLevel> parse_log_level(std::string_view text);
std::string_view to_string(LogLevel level);

// One record as a sink receives it.
struct LogRecord {
  std::string_view logger;  // e.g. "postal.routing"
  LogLevel level;
  absl::Time time;
  std::string_view message;  // one line, no trailing newline
};

// Where records go. `write` may be called from any thread, concurrently.
class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void write(const LogRecord& record) = 0;
  virtual void flush() {}
};

class Logger {
 public:
  // The layers' loggers.
  static const Logger& runtime();
  static const Logger& actors();
  static const Logger& routing();
  static const Logger& mail();
  static const Logger& tools();
  // Any other named logger (created on first use, lives for the process). Names are dotted,
  // `[a-z0-9_.-]`; programs that embed postal may use their own.
  static const Logger& get(std::string_view name);

  std::string_view name() const { return name_; }
  bool enabled(LogLevel level) const {
    return static_cast<uint8_t>(level) >= level_.load(std::memory_order_relaxed) &&
           level != LogLevel::kOff;
  }
  LogLevel level() const { return static_cast<LogLevel>(level_.load(std::memory_order_relaxed)); }

  // Writes `message` when `level` is enabled.
  void log(LogLevel level, std::string_view message) const;
  void trace(std::string_view message) const { log(LogLevel::kTrace, message); }
  void debug(std::string_view message) const { log(LogLevel::kDebug, message); }
  void info(std::string_view message) const { log(LogLevel::kInfo, message); }
  void warn(std::string_view message) const { log(LogLevel::kWarn, message); }
  void error(std::string_view message) const { log(LogLevel::kError, message); }
  void critical(std::string_view message) const { log(LogLevel::kCritical, message); }

  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

 private:
  friend class LoggerRegistry;
  explicit Logger(std::string name) : name_(std::move(name)) {}

  const std::string name_;
  mutable std::atomic<uint8_t> level_{static_cast<uint8_t>(LogLevel::kInfo)};
};

// Replaces the configuration: "info,postal.routing=debug". InvalidArgument names the part that
// does not parse and changes nothing.
absl::Status configure_logging(std::string_view spec);

// Whether `spec` parses, without applying it (a topology file's `log`).
absl::Status check_logging_spec(std::string_view spec);

// The current configuration in the same syntax (for handing on to child procs).
std::string logging_spec();

// Installs `sink` for every logger; nullptr restores the default stderr sink.
void set_log_sink(std::shared_ptr<LogSink> sink);

// Flushes the current sink.
void flush_logs();

}  // namespace postal::runtime
