// The logging facade: levels per named logger, the POSTAL_LOG syntax, user sinks, and rate
// limiting of lines that input can repeat (R-FAIL-4).
#include "postal/runtime/logger.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "postal/runtime/log_rate_limit.h"

namespace postal::runtime {
namespace {

// A sink that keeps every record; installed for one test, the default restored after it.
class CapturingSink : public LogSink {
 public:
  struct Line {
    std::string logger;
    LogLevel level;
    std::string message;
  };
  void write(const LogRecord& r) override {
    absl::MutexLock lock(&mu_);
    lines_.push_back({std::string(r.logger), r.level, std::string(r.message)});
  }
  std::vector<Line> lines() {
    absl::MutexLock lock(&mu_);
    return lines_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Line> lines_;
};

class LoggerTest : public testing::Test {
 protected:
  void SetUp() override {
    saved_ = logging_spec();
    set_log_sink(sink_);
  }
  void TearDown() override {
    set_log_sink(nullptr);
    ASSERT_TRUE(configure_logging(saved_).ok());
  }
  std::shared_ptr<CapturingSink> sink_ = std::make_shared<CapturingSink>();
  std::string saved_;
};

TEST_F(LoggerTest, LevelsPerNamedLoggerFromTheSpec) {
  ASSERT_TRUE(configure_logging("warn,postal.routing=debug").ok());
  EXPECT_TRUE(Logger::routing().enabled(LogLevel::kDebug));
  EXPECT_FALSE(Logger::routing().enabled(LogLevel::kTrace));
  EXPECT_FALSE(Logger::mail().enabled(LogLevel::kInfo));
  EXPECT_TRUE(Logger::mail().enabled(LogLevel::kWarn));

  Logger::routing().debug("routing debug");
  Logger::mail().info("mail info (filtered)");
  Logger::mail().error("mail error");
  auto lines = sink_->lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].logger, "postal.routing");
  EXPECT_EQ(lines[0].level, LogLevel::kDebug);
  EXPECT_EQ(lines[0].message, "routing debug");
  EXPECT_EQ(lines[1].logger, "postal.mail");
  EXPECT_EQ(lines[1].level, LogLevel::kError);
}

TEST_F(LoggerTest, ANameCoversTheLoggersBelowItAndTheMostSpecificWins) {
  ASSERT_TRUE(configure_logging("error,postal=debug,postal.mail=warn").ok());
  EXPECT_TRUE(Logger::runtime().enabled(LogLevel::kDebug));
  EXPECT_FALSE(Logger::mail().enabled(LogLevel::kInfo));
  EXPECT_FALSE(Logger::get("postalx.other").enabled(LogLevel::kWarn)) << "a prefix is dotted";
  EXPECT_EQ(logging_spec(), "error,postal=debug,postal.mail=warn");
}

TEST_F(LoggerTest, ABadSpecIsRefusedByNameAndChangesNothing) {
  ASSERT_TRUE(configure_logging("info").ok());
  absl::Status s = configure_logging("debug,postal.routing=loud");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("loud"), std::string_view::npos) << s;
  EXPECT_FALSE(configure_logging("Postal Routing=debug").ok());
  EXPECT_EQ(logging_spec(), "info");
  EXPECT_FALSE(Logger::routing().enabled(LogLevel::kDebug));
}

TEST_F(LoggerTest, OffSilencesEverything) {
  ASSERT_TRUE(configure_logging("off").ok());
  Logger::runtime().critical("not written");
  EXPECT_TRUE(sink_->lines().empty());
  EXPECT_FALSE(Logger::runtime().enabled(LogLevel::kOff));
}

TEST_F(LoggerTest, R_FAIL_4_ARateLimitedLineAppearsOncePerWindow) {
  ASSERT_TRUE(configure_logging("info").ok());
  absl::Time now = absl::FromUnixSeconds(1000);
  LogRateLimit limit(absl::Seconds(1), [&] { return now; });
  for (int i = 0; i < 50; ++i) limit.log(Logger::runtime(), LogLevel::kWarn, "peer refused");
  ASSERT_EQ(sink_->lines().size(), 1u) << "one line in the first window";
  EXPECT_EQ(sink_->lines()[0].message, "peer refused");

  now += absl::Milliseconds(999);
  EXPECT_FALSE(limit.log(Logger::runtime(), LogLevel::kWarn, "peer refused"));
  EXPECT_EQ(sink_->lines().size(), 1u) << "still inside the window";

  now += absl::Milliseconds(1001);
  EXPECT_TRUE(limit.log(Logger::runtime(), LogLevel::kWarn, "peer refused"));
  auto lines = sink_->lines();
  ASSERT_EQ(lines.size(), 2u) << "one line per window";
  EXPECT_EQ(lines[1].message, "peer refused (50 similar lines suppressed)");
  EXPECT_EQ(limit.suppressed_total(), 50u);
}

TEST_F(LoggerTest, R_FAIL_4_ALineBelowTheLevelDoesNotUseTheWindow) {
  ASSERT_TRUE(configure_logging("error").ok());
  absl::Time now = absl::FromUnixSeconds(1000);
  LogRateLimit limit(absl::Seconds(1), [&] { return now; });
  EXPECT_FALSE(limit.log(Logger::runtime(), LogLevel::kWarn, "filtered"));
  EXPECT_TRUE(limit.log(Logger::runtime(), LogLevel::kError, "written"));
  ASSERT_EQ(sink_->lines().size(), 1u);
  EXPECT_EQ(sink_->lines()[0].message, "written");
}

TEST(LogLevel, ParsesEveryNameAndRefusesOthers) {
  for (LogLevel l : {LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn,
                     LogLevel::kError, LogLevel::kCritical, LogLevel::kOff}) {
    absl::StatusOr<LogLevel> parsed = parse_log_level(to_string(l));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, l);
  }
  EXPECT_EQ(*parse_log_level("WARNING"), LogLevel::kWarn);
  EXPECT_FALSE(parse_log_level("verbose").ok());
}

}  // namespace
}  // namespace postal::runtime
