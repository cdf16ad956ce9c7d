// Conformance: counts that add up (M-STAT-3) — totals of what came in and how copies left, and
// push deliveries waiting in a retry backoff counted apart from queued and running.
#include "mail_conformance.h"

namespace postal::mail::testing {
namespace {

TEST_P(MailConformance, M_STAT_3_TotalsAddUpOverTheWaysACopyLeaves) {
  ConformanceConfig config;
  config.dead_letter = DeadLetterOptions{};
  open(config);
  if (!can(Capability::kDeadLetter)) GTEST_SKIP() << "provider has no dead-letter queue";
  for (const char* t : {"handled", "auto", "discarded", "terminated", "waiting"}) {
    post_text(addr("inbox"), t);
  }
  std::optional<Delivery> handled = fetch_manual(addr("inbox"));
  ASSERT_TRUE(handled.has_value());
  EXPECT_TRUE(handled->ack());
  ASSERT_TRUE(fetch(addr("inbox")).has_value());  // auto: handled at hand-out
  std::optional<Delivery> discarded = fetch_manual(addr("inbox"));
  ASSERT_TRUE(discarded.has_value());
  EXPECT_TRUE(discarded->ack(Disposition::kDiscard));
  std::optional<Delivery> terminated = fetch_manual(addr("inbox"));
  ASSERT_TRUE(terminated.has_value());
  EXPECT_TRUE(terminated->terminate());

  const MailboxStatus s = status(addr("inbox"));
  const int64_t accepted = *s.extension_int(ext("acceptedCount"));
  const int64_t settled = *s.extension_int(ext("settledCount"));
  const int64_t dead = *s.extension_int(ext("deadLetteredCount"));
  const int64_t term = *s.extension_int(ext("terminatedCount"));
  EXPECT_EQ(accepted, 5);
  EXPECT_EQ(settled, 2);
  EXPECT_EQ(dead, 1);
  EXPECT_EQ(term, 1);
  EXPECT_EQ(accepted, settled + dead + term + static_cast<int64_t>(s.unread_count + s.in_flight_count));
  EXPECT_EQ(status(addr("inbox_dlq")).extension_int(ext("acceptedCount")), 1)
      << "the dead-letter record is accepted where it lands";
}

TEST_P(MailConformance, M_STAT_3_ADeliveryInItsRetryBackoffIsCountedApart) {
  open(ConformanceConfig{.retry = RetryPolicy{.max_attempts = 2, .base_delay = absl::Seconds(1)}});
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Recorder flaky([](const Letter&, size_t call) {
    return call < 2 ? RetriableError("not yet") : absl::OkStatus();
  });
  Subscription sub = subscribe(addr("inbox"), flaky);
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(flaky.wait_for(1));
  idle();
  MailboxStatus waiting = status(addr("inbox"));
  EXPECT_EQ(waiting.extension_int(ext("retryWaitingCount")), 1);
  EXPECT_EQ(waiting.unread_count, 0u);
  EXPECT_EQ(waiting.extension_int(ext("settledCount")), 0);
  clock_->advance(absl::Seconds(1));
  ASSERT_TRUE(flaky.wait_for(2));
  idle();
  MailboxStatus done = status(addr("inbox"));
  EXPECT_EQ(done.extension_int(ext("retryWaitingCount")), 0);
  EXPECT_EQ(done.extension_int(ext("settledCount")), 1);
  EXPECT_EQ(done.extension_int(ext("acceptedCount")), 1);
}

}  // namespace
}  // namespace postal::mail::testing
