// The logging facade over spdlog. This is the only translation unit that includes spdlog; it is
// compiled header-only (with fmt header-only), so neither appears in postal's public headers or
// its exported link interface.
#include "postal/runtime/logger.h"

#include <cstdlib>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "postal/wire/absl_compat.h"
#include "spdlog/details/log_msg.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace postal::runtime {
namespace {

constexpr std::string_view kLevelNames[] = {"trace", "debug",    "info", "warn",
                                            "error", "critical", "off"};

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return spdlog::level::trace;
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kCritical: return spdlog::level::critical;
    case LogLevel::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

std::string_view strip(std::string_view s) {
  absl::string_view t = absl::StripAsciiWhitespace(sv(s));
  return std::string_view(t.data(), t.size());
}

bool valid_logger_name(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' || c == '.' || c == '-')) {
      return false;
    }
  }
  return true;
}

// A parsed configuration: a default level and per-name levels.
struct LogSpec {
  LogLevel default_level = LogLevel::kInfo;
  std::vector<std::pair<std::string, LogLevel>> by_name;

  // The most specific entry naming `name` or a dotted prefix of it.
  LogLevel level_for(std::string_view name) const {
    LogLevel level = default_level;
    size_t best = 0;
    for (const auto& [prefix, l] : by_name) {
      bool match = name == prefix ||
                   (name.size() > prefix.size() && name.substr(0, prefix.size()) == prefix &&
                    name[prefix.size()] == '.');
      if (match && prefix.size() >= best) {
        best = prefix.size();
        level = l;
      }
    }
    return level;
  }

  std::string to_string() const {
    std::string out(kLevelNames[static_cast<size_t>(default_level)]);
    for (const auto& [name, l] : by_name) {
      absl::StrAppend(&out, ",", name, "=", sv(kLevelNames[static_cast<size_t>(l)]));
    }
    return out;
  }
};

absl::StatusOr<LogSpec> parse_spec(std::string_view text) {
  LogSpec spec;
  for (absl::string_view piece : absl::StrSplit(sv(text), ',', absl::SkipWhitespace())) {
    piece = absl::StripAsciiWhitespace(piece);
    std::string_view part(piece.data(), piece.size());
    size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      absl::StatusOr<LogLevel> level = parse_log_level(part);
      if (!level.ok()) return level.status();
      spec.default_level = *level;
      continue;
    }
    std::string_view name = strip(part.substr(0, eq));
    if (!valid_logger_name(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "log level spec: \"", sv(name), "\" is not a logger name; use e.g. postal.routing=debug"));
    }
    absl::StatusOr<LogLevel> level = parse_log_level(strip(part.substr(eq + 1)));
    if (!level.ok()) return level.status();
    spec.by_name.emplace_back(std::string(name), *level);
  }
  return spec;
}

}  // namespace

// The process-wide table of loggers and their configuration.
class LoggerRegistry {
 public:
  static LoggerRegistry& instance() {
    static LoggerRegistry* registry = new LoggerRegistry();  // never destroyed: logs at exit work
    return *registry;
  }

  const Logger& get(std::string_view name) {
    absl::MutexLock lock(&mu_);
    auto it = loggers_.find(sv(name));
    if (it != loggers_.end()) return *it->second;
    auto logger = std::unique_ptr<Logger>(new Logger(std::string(name)));
    logger->level_.store(static_cast<uint8_t>(spec_.level_for(name)), std::memory_order_relaxed);
    const Logger& ref = *logger;
    loggers_.emplace(std::string(name), std::move(logger));
    return ref;
  }

  absl::Status configure(std::string_view text) {
    absl::StatusOr<LogSpec> spec = parse_spec(text);
    if (!spec.ok()) return spec.status();
    absl::MutexLock lock(&mu_);
    spec_ = *std::move(spec);
    for (auto& [name, logger] : loggers_) {
      logger->level_.store(static_cast<uint8_t>(spec_.level_for(name)), std::memory_order_relaxed);
    }
    return absl::OkStatus();
  }

  std::string spec() {
    absl::MutexLock lock(&mu_);
    return spec_.to_string();
  }

  void set_sink(std::shared_ptr<LogSink> sink) {
    absl::MutexLock lock(&sink_mu_);
    user_sink_ = std::move(sink);
  }

  void write(const Logger& logger, LogLevel level, std::string_view message) {
    std::shared_ptr<LogSink> user;
    {
      absl::MutexLock lock(&sink_mu_);
      user = user_sink_;
    }
    if (user) {
      user->write(LogRecord{logger.name(), level, absl::Now(), message});
      return;
    }
    spdlog::details::log_msg msg(spdlog::source_loc{},
                                 spdlog::string_view_t(logger.name().data(), logger.name().size()),
                                 to_spdlog(level),
                                 spdlog::string_view_t(message.data(), message.size()));
    stderr_sink_->log(msg);
  }

  void flush() {
    std::shared_ptr<LogSink> user;
    {
      absl::MutexLock lock(&sink_mu_);
      user = user_sink_;
    }
    if (user) {
      user->flush();
    } else {
      stderr_sink_->flush();
    }
  }

 private:
  LoggerRegistry() : stderr_sink_(std::make_shared<spdlog::sinks::stderr_sink_mt>()) {
    stderr_sink_->set_formatter(
        std::make_unique<spdlog::pattern_formatter>("%Y-%m-%d %H:%M:%S.%e %l %n [%P]: %v"));
    if (const char* env = std::getenv("POSTAL_LOG"); env != nullptr && *env != '\0') {
      absl::StatusOr<LogSpec> spec = parse_spec(env);
      if (spec.ok()) {
        spec_ = *std::move(spec);
      } else {
        env_error_ = absl::StrCat("POSTAL_LOG ignored: ", spec.status().message());
      }
    }
  }

  absl::Mutex mu_;
  LogSpec spec_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<Logger>> loggers_ ABSL_GUARDED_BY(mu_);
  absl::Mutex sink_mu_;
  std::shared_ptr<LogSink> user_sink_ ABSL_GUARDED_BY(sink_mu_);
  const std::shared_ptr<spdlog::sinks::stderr_sink_mt> stderr_sink_;
  std::string env_error_;  // reported once, on the first logger's creation
  std::once_flag env_reported_;

 public:
  void report_env_error(const Logger& logger) {
    std::call_once(env_reported_, [&] {
      if (!env_error_.empty()) write(logger, LogLevel::kWarn, env_error_);
    });
  }
};

absl::StatusOr<LogLevel> parse_log_level(std::string_view text) {
  std::string lower = absl::AsciiStrToLower(sv(text));
  if (lower == "warning") return LogLevel::kWarn;
  if (lower == "err") return LogLevel::kError;
  for (size_t i = 0; i < std::size(kLevelNames); ++i) {
    if (lower == kLevelNames[i]) return static_cast<LogLevel>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("log level \"", sv(text),
                   "\" is not one of trace, debug, info, warn, error, critical, off"));
}

std::string_view to_string(LogLevel level) { return kLevelNames[static_cast<size_t>(level)]; }

const Logger& Logger::get(std::string_view name) {
  LoggerRegistry& registry = LoggerRegistry::instance();
  const Logger& logger = registry.get(name);
  registry.report_env_error(logger);
  return logger;
}

const Logger& Logger::runtime() {
  static const Logger& logger = get("postal.runtime");
  return logger;
}
const Logger& Logger::actors() {
  static const Logger& logger = get("postal.actors");
  return logger;
}
const Logger& Logger::routing() {
  static const Logger& logger = get("postal.routing");
  return logger;
}
const Logger& Logger::mail() {
  static const Logger& logger = get("postal.mail");
  return logger;
}
const Logger& Logger::tools() {
  static const Logger& logger = get("postal.tools");
  return logger;
}

void Logger::log(LogLevel level, std::string_view message) const {
  if (!enabled(level)) return;
  LoggerRegistry::instance().write(*this, level, message);
}

absl::Status configure_logging(std::string_view spec) {
  return LoggerRegistry::instance().configure(spec);
}

absl::Status check_logging_spec(std::string_view spec) { return parse_spec(spec).status(); }

std::string logging_spec() { return LoggerRegistry::instance().spec(); }

void set_log_sink(std::shared_ptr<LogSink> sink) {
  LoggerRegistry::instance().set_sink(std::move(sink));
}

void flush_logs() { LoggerRegistry::instance().flush(); }

}  // namespace postal::runtime
