// The mail layer's small parts: clocks, the retry policy, retriable errors, system headers,
// letters and bodies, status rendering.
#include <cerrno>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "postal/mail/clock.h"
#include "postal/mail/letter.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/mail_status.h"
#include "postal/mail/retry_policy.h"
#include "postal/mail/system_headers.h"

namespace postal::mail {
namespace {

TEST(ManualClock, RunsDueTimersInOrderOnlyWhenAdvanced) {
  ManualClock clock;
  absl::Time start = clock.now();
  std::vector<int> ran;
  clock.schedule_after(absl::Seconds(2), [&] { ran.push_back(2); });
  clock.schedule_after(absl::Seconds(1), [&] {
    ran.push_back(1);
    EXPECT_EQ(clock.now(), start + absl::Seconds(1));  // now() is the timer's due time
    clock.schedule_after(absl::Milliseconds(500), [&] { ran.push_back(15); });
  });
  Clock::TimerId cancelled = clock.schedule_after(absl::Seconds(1), [&] { ran.push_back(-1); });
  EXPECT_TRUE(clock.cancel(cancelled));
  EXPECT_FALSE(clock.cancel(cancelled));
  clock.advance(absl::Milliseconds(999));
  EXPECT_TRUE(ran.empty());
  clock.advance(absl::Seconds(5));
  EXPECT_EQ(ran, (std::vector<int>{1, 15, 2}));
  EXPECT_EQ(clock.now(), start + absl::Milliseconds(5999));
  EXPECT_EQ(clock.pending(), 0u);
}

TEST(SystemClock, FiresTimersAndCancels) {
  SystemClock clock;
  absl::Notification fired;
  bool cancelled_ran = false;
  Clock::TimerId id = clock.schedule_after(absl::Hours(1), [&] { cancelled_ran = true; });
  clock.schedule_after(absl::Milliseconds(1), [&] { fired.Notify(); });
  EXPECT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_TRUE(clock.cancel(id));
  EXPECT_FALSE(cancelled_ran);
}

TEST(RetryPolicy, M_RETRY_2_ExponentialBackoffCapped) {
  RetryPolicy p{.max_attempts = 10, .base_delay = absl::Seconds(1), .max_delay = absl::Seconds(5)};
  EXPECT_EQ(next_retry_delay(p, 1), absl::Seconds(1));
  EXPECT_EQ(next_retry_delay(p, 2), absl::Seconds(2));
  EXPECT_EQ(next_retry_delay(p, 3), absl::Seconds(4));
  EXPECT_EQ(next_retry_delay(p, 4), absl::Seconds(5));
  EXPECT_EQ(next_retry_delay(p, 200), absl::Seconds(5));
  EXPECT_TRUE(p.validate().ok());
  EXPECT_FALSE(RetryPolicy{.max_attempts = 0}.validate().ok());
}

TEST(RetryPolicy, M_RETRY_2_FactorAndJitterShapeTheWait) {
  RetryPolicy p{.max_attempts = 10,
                .base_delay = absl::Seconds(1),
                .max_delay = absl::Seconds(100),
                .factor = 3.0};
  EXPECT_EQ(next_retry_delay(p, 1), absl::Seconds(1));
  EXPECT_EQ(next_retry_delay(p, 2), absl::Seconds(3));
  EXPECT_EQ(next_retry_delay(p, 3), absl::Seconds(9));
  EXPECT_EQ(next_retry_delay(p, 6), absl::Seconds(100));  // 243 s, capped
  EXPECT_EQ(next_retry_delay(p, 100000), absl::Seconds(100)) << "no overflow past the cap";
  p.jitter = 0.5;
  bool varied = false;
  for (int i = 0; i < 200; ++i) {
    const absl::Duration d = next_retry_delay(p, 3);
    EXPECT_GE(d, absl::Seconds(4.5));
    EXPECT_LE(d, absl::Seconds(9));
    varied = varied || d != next_retry_delay(p, 3);
  }
  EXPECT_TRUE(varied) << "jitter 0.5 drew the same wait 400 times";
  EXPECT_TRUE(p.validate().ok());
  EXPECT_FALSE(RetryPolicy{.factor = 0.5}.validate().ok());
  EXPECT_FALSE(RetryPolicy{.jitter = 1.5}.validate().ok());
  EXPECT_FALSE(RetryPolicy{.jitter = -0.1}.validate().ok());
}

TEST(MailErrors, M_ACK_4_RetriableMeansItSaysSoOrItsCodeIs503_504_ECONNRESET_ETIMEDOUT) {
  EXPECT_FALSE(IsRetriable(absl::OkStatus()));
  EXPECT_TRUE(IsRetriable(RetriableError("later")));
  EXPECT_TRUE(IsRetriable(MarkRetriable(absl::InternalError("x"))));
  EXPECT_FALSE(IsRetriable(MarkRetriable(absl::UnavailableError("x"), false)));
  EXPECT_TRUE(IsRetriable(absl::UnavailableError("503")));
  EXPECT_TRUE(IsRetriable(absl::DeadlineExceededError("504")));
  EXPECT_TRUE(IsRetriable(absl::ErrnoToStatus(ECONNRESET, "read")));
  EXPECT_TRUE(IsRetriable(absl::ErrnoToStatus(ETIMEDOUT, "connect")));
  for (const char* code : {"503", "504", "ECONNRESET", "ETIMEDOUT"}) {
    EXPECT_TRUE(IsRetriable(WithErrorCode(absl::InternalError("x"), code))) << code;
  }
  EXPECT_FALSE(IsRetriable(WithErrorCode(absl::UnavailableError("x"), "500")));
  EXPECT_FALSE(IsRetriable(absl::InvalidArgumentError("bad payload")));
  EXPECT_FALSE(IsRetriable(absl::InternalError("bug")));
}

TEST(SystemHeaders, M_RETRY_3_StrippedCaseInsensitively) {
  wire::Headers h;
  h.set_value("MBX-SEND-ID", std::string("x"));
  h.set_value("mbx-attempt", uint64_t{1});
  h.set_value("mbx-dead-letter-anything", true);
  h.set_value("Mbx-Dead-Letter", true);
  h.set_value("mbx-custom", std::string("user's own"));
  h.set_value("x-trace", std::string("kept"));
  EXPECT_EQ(strip_system_headers(h), 4u);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_TRUE(h.contains("mbx-custom"));
  EXPECT_TRUE(h.contains("x-trace"));
  std::string a = mint_send_id(), b = mint_send_id();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_EQ(format_iso8601(absl::FromUnixMillis(1'700'000'000'123)), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(format_iso8601(absl::UnixEpoch()), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(format_iso8601(absl::FromUnixMillis(-1)), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(format_iso8601(absl::FromCivil(absl::CivilSecond(9999, 12, 31, 23, 59, 59),
                                           absl::UTCTimeZone()) +
                           absl::Milliseconds(7)),
            "9999-12-31T23:59:59.007Z");
  EXPECT_EQ(format_iso8601(absl::FromCivil(absl::CivilSecond(10000, 1, 1, 0, 0, 0),
                                           absl::UTCTimeZone())),
            "10000-01-01T00:00:00.000Z");
}

TEST(Letter, BodiesAreSharedImmutableAndDecodeFromBytes) {
  Letter l = Letter::text("hello", "id-1");
  EXPECT_EQ(l.id, "id-1");
  EXPECT_TRUE(l.body.is<Text>());
  ASSERT_NE(l.body.get<Text>(), nullptr);
  Letter copy = l;
  EXPECT_EQ(copy.body.get<Text>(), l.body.get<Text>());  // shared, not copied
  absl::StatusOr<std::string> bytes = l.body.bytes();
  ASSERT_TRUE(bytes.ok());
  Body remote = Body::from_bytes(l.body.type_hash(), *bytes);
  EXPECT_EQ(remote.get<Text>(), nullptr);  // bytes only ...
  EXPECT_EQ(remote.text(), "hello");       // ... decoded on use
  EXPECT_EQ(Body().text(), std::nullopt);
  EXPECT_FALSE(Body().as<Text>().ok());
}

TEST(MailStatus, M_STAT_1_JsonRendersNullActivityAndExtensions) {
  MailboxStatus s;
  s.address = "mem://a@b/x";
  s.state = MailboxState::kOnline;
  s.exists = true;
  s.unread_count = 2;
  s.extensions["mem.parkedCount"] = int64_t{1};
  EXPECT_EQ(s.to_json(),
            "{\"address\":\"mem://a@b/x\",\"state\":\"online\",\"exists\":true,\"unreadCount\":2,"
            "\"inFlightCount\":0,\"lastActivityTime\":null,\"mem.parkedCount\":1}");
  s.last_activity_time = absl::FromUnixSeconds(1'700'000'000);
  EXPECT_EQ(s.last_activity_iso(), "2023-11-14T22:13:20.000Z");
}

}  // namespace
}  // namespace postal::mail
