// Conformance: push consumers' dispositions (M-ACK-4), broadcast settlement (M-RETRY-1), opt-in
// retry (M-RETRY-2), system headers (M-RETRY-3), the settle watchdog and cancellation
// (M-RETRY-4).
#include <atomic>
#include <stdexcept>
#include <thread>

#include "mail_conformance.h"

namespace postal::mail::testing {
namespace {

Recorder::Respond always(absl::Status status) {
  return [status](const Letter&, size_t) { return status; };
}

ConformanceConfig with_dead_letters(ConformanceConfig config = {}) {
  config.dead_letter = DeadLetterOptions{};
  return config;
}

TEST_P(MailConformance, M_ACK_4_NormalReturnIsHandled) {
  open(with_dead_letters());
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  if (!can(Capability::kDeadLetter)) GTEST_SKIP() << "provider has no dead-letter queue";
  Recorder r;
  Subscription sub = subscribe(addr("inbox"), r);
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(r.wait_for(1));
  idle();
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
  EXPECT_EQ(status(addr("inbox_dlq")).exists, false);
}

TEST_P(MailConformance, M_ACK_4_PlainErrorIsDiscard) {
  open(with_dead_letters());
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  if (!can(Capability::kDeadLetter)) GTEST_SKIP() << "provider has no dead-letter queue";
  Recorder r(always(absl::InternalError("bad payload")));
  Subscription sub = subscribe(addr("inbox"), r);
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(r.wait_for(1));
  idle();
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
  std::optional<Delivery> dead = fetch(addr("inbox_dlq"));
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->letter().headers.get(kDeadLetterReason), "fatal");
  EXPECT_NE(dead->letter().headers.get(kDeadLetterError)->find("bad payload"), std::string::npos);
}

TEST_P(MailConformance, M_ACK_4_RetriableErrorIsUnhandled) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Recorder r(always(RetriableError("upstream down")));
  Subscription sub = subscribe(addr("inbox"), r);
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(r.wait_for(1));
  idle();
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);
  std::optional<Delivery> back = fetch(addr("inbox"));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(text_of(back->letter()), "x");
}

TEST_P(MailConformance, M_ACK_4_RetriableMeansSaysSoOr503Or504OrEconnresetOrEtimedout) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  struct Case {
    const char* path;
    absl::Status error;
    bool requeued;
  };
  const Case cases[] = {
      {"says-so", MarkRetriable(absl::InternalError("try later")), true},
      {"503", absl::UnavailableError("503 service unavailable"), true},
      {"504", absl::DeadlineExceededError("504 gateway timeout"), true},
      {"econnreset", WithErrorCode(absl::InternalError("reset"), "ECONNRESET"), true},
      {"etimedout", WithErrorCode(absl::InternalError("timed out"), "ETIMEDOUT"), true},
      {"plain", absl::InvalidArgumentError("bad payload"), false},
      {"overridden", MarkRetriable(absl::UnavailableError("no"), false), false},
  };
  std::vector<Recorder> recorders;
  std::vector<Subscription> subs;
  for (const Case& c : cases) {
    recorders.emplace_back(always(c.error));
    subs.push_back(subscribe(addr(c.path), recorders.back()));
    post_text(addr(c.path), c.path);
  }
  for (const Recorder& r : recorders) ASSERT_TRUE(r.wait_for(1));
  idle();
  for (const Case& c : cases) {
    EXPECT_EQ(status(addr(c.path)).unread_count, c.requeued ? 1u : 0u) << c.path;
  }
}

TEST_P(MailConformance, M_ACK_4_ThrowingCallbackIsAPlainError) {
  open(with_dead_letters());
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  if (!can(Capability::kDeadLetter)) GTEST_SKIP() << "provider has no dead-letter queue";
  Recorder r([](const Letter&, size_t) -> absl::Status { throw std::runtime_error("boom"); });
  Subscription sub = subscribe(addr("inbox"), r);
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(r.wait_for(1));
  idle();
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
  std::optional<Delivery> dead = fetch(addr("inbox_dlq"));
  ASSERT_TRUE(dead.has_value());
  EXPECT_NE(dead->letter().headers.get(kDeadLetterError)->find("boom"), std::string::npos);
}

TEST_P(MailConformance, M_RETRY_1_SomeSucceededIsNotRequeuedTheFailedAreDeadLettered) {
  open(with_dead_letters());
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  if (!can(Capability::kDeadLetter)) GTEST_SKIP() << "provider has no dead-letter queue";
  Recorder ok;
  Recorder failing(always(RetriableError("upstream down")));
  Subscription a = subscribe(addr("inbox"), ok);
  Subscription b = subscribe(addr("inbox"), failing);
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(ok.wait_for(1));
  ASSERT_TRUE(failing.wait_for(1));
  idle();
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
  EXPECT_EQ(status(addr("inbox_dlq")).unread_count, 1u);
  std::optional<Delivery> dead = fetch(addr("inbox_dlq"));
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->letter().headers.get(kDeadLetterReason), "retriable");
}

TEST_P(MailConformance, M_RETRY_1_AllFailedRetriablyLeaveOneCopyAtTheHead) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  post_text(addr("inbox"), "older");  // queued: no subscriber yet
  Recorder a(always(RetriableError("a down")));
  Recorder b(always(RetriableError("b down")));
  Subscription sa = subscribe(addr("inbox"), a);
  Subscription sb = subscribe(addr("inbox"), b);
  post_text(addr("inbox"), "newer");
  ASSERT_TRUE(a.wait_for(1));
  ASSERT_TRUE(b.wait_for(1));
  idle();
  EXPECT_EQ(status(addr("inbox")).unread_count, 2u);  // one copy of "newer", not two
  std::optional<Delivery> head = fetch(addr("inbox"));
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(text_of(head->letter()), "newer");
  EXPECT_EQ(head->letter().headers.get(kRound), 2u);  // round 1 was the broadcast
}

TEST_P(MailConformance, M_RETRY_1_AllFailedFatallyIsDiscardedWithOneRecord) {
  open(with_dead_letters());
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  if (!can(Capability::kDeadLetter)) GTEST_SKIP() << "provider has no dead-letter queue";
  Recorder a(always(absl::InternalError("a rejects")));
  Recorder b(always(absl::InternalError("b rejects")));
  Subscription sa = subscribe(addr("inbox"), a);
  Subscription sb = subscribe(addr("inbox"), b);
  post_text(addr("inbox"), "poison");
  ASSERT_TRUE(a.wait_for(1));
  ASSERT_TRUE(b.wait_for(1));
  idle();
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
  EXPECT_EQ(status(addr("inbox_dlq")).unread_count, 1u);
}

TEST_P(MailConformance, M_RETRY_2_RetryReinvokesOnlyTheFailingSubscriberWithBackoff) {
  open(ConformanceConfig{.retry = RetryPolicy{.max_attempts = 3, .base_delay = absl::Seconds(1)}});
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Recorder ok;
  Recorder flaky([](const Letter&, size_t call) {
    return call < 3 ? RetriableError("not yet") : absl::OkStatus();
  });
  Subscription a = subscribe(addr("inbox"), ok);
  Subscription b = subscribe(addr("inbox"), flaky);
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(flaky.wait_for(1));
  idle();
  clock_->advance(absl::Milliseconds(999));
  idle();
  EXPECT_EQ(flaky.count(), 1u);
  clock_->advance(absl::Milliseconds(1));  // 1 s: attempt 2
  ASSERT_TRUE(flaky.wait_for(2));
  idle();
  clock_->advance(absl::Milliseconds(1999));
  idle();
  EXPECT_EQ(flaky.count(), 2u);
  clock_->advance(absl::Milliseconds(1));  // 2 s more: attempt 3
  ASSERT_TRUE(flaky.wait_for(3));
  idle();
  EXPECT_EQ(ok.count(), 1u);  // the subscriber that succeeded is never re-invoked
  std::vector<Letter> seen = flaky.seen();
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(seen[i].headers.get(kAttempt), i + 1);
    EXPECT_EQ(seen[i].headers.get(kMaxAttempts), 3u);
    EXPECT_EQ(seen[i].headers.get(kRound), 1u);
  }
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
}

TEST_P(MailConformance, M_RETRY_2_ExhaustedBudgetRequeuesExactlyOnce) {
  open(ConformanceConfig{.retry = RetryPolicy{.max_attempts = 2, .base_delay = absl::Seconds(1)}});
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Recorder a(always(RetriableError("a down")));
  Recorder b(always(RetriableError("b down")));
  Subscription sa = subscribe(addr("inbox"), a);
  Subscription sb = subscribe(addr("inbox"), b);
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(a.wait_for(1) && b.wait_for(1));
  idle();
  clock_->advance(absl::Seconds(1));
  ASSERT_TRUE(a.wait_for(2) && b.wait_for(2));
  idle();
  clock_->advance(absl::Minutes(10));
  idle();
  EXPECT_EQ(a.count(), 2u);
  EXPECT_EQ(b.count(), 2u);
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);
}

TEST_P(MailConformance, M_RETRY_2_AttemptCounterIsPerCopyNotPerMessageId) {
  open(ConformanceConfig{.retry = RetryPolicy{.max_attempts = 2, .base_delay = absl::Seconds(1)}});
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Recorder r(always(RetriableError("down")));
  Subscription sub = subscribe(addr("inbox"), r);
  PostReceipt one = post_text(addr("inbox"), "one", "dup");
  PostReceipt two = post_text(addr("inbox"), "two", "dup");
  ASSERT_TRUE(r.wait_for(2));
  idle();
  clock_->advance(absl::Seconds(1));
  ASSERT_TRUE(r.wait_for(4));
  idle();
  clock_->advance(absl::Minutes(10));
  idle();
  std::map<std::string, std::vector<uint64_t>> attempts;
  for (const Letter& l : r.seen()) {
    attempts[*l.headers.get(kSendId)].push_back(*l.headers.get(kAttempt));
    EXPECT_LE(*l.headers.get(kAttempt), *l.headers.get(kMaxAttempts));
  }
  EXPECT_EQ(attempts[one.send_id], (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(attempts[two.send_id], (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(status(addr("inbox")).unread_count, 2u);  // each copy requeued on its own
}

TEST_P(MailConformance, M_RETRY_3_SystemHeadersAreMintedNeverTakenFromTheSender) {
  open();
  Letter forged = Letter::text("x");
  forged.headers.set(kSendId, std::string("forged"));
  forged.headers.set(kAttempt, uint64_t{99});
  forged.headers.set(kMaxAttempts, uint64_t{1000});
  forged.headers.set_value("MBX-Round", uint64_t{7});
  forged.headers.set(kSentAt, std::string("1999-01-01T00:00:00.000Z"));
  forged.headers.set(kDeadLetterReason, std::string("fatal"));
  forged.headers.set(kDeadLetterTerminal, true);
  forged.headers.set_value("x-trace", std::string("kept"));
  forged.to = "mem://elsewhere@forged.test/";
  PostReceipt r = post(addr("inbox"), std::move(forged));
  EXPECT_NE(r.send_id, "forged");
  std::optional<Delivery> d = fetch(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  const wire::Headers& h = d->letter().headers;
  EXPECT_EQ(h.get(kSendId), r.send_id);
  EXPECT_EQ(h.get(kAttempt), 1u);
  EXPECT_EQ(h.get(kRound), 1u);
  EXPECT_FALSE(h.contains("MBX-Round"));
  EXPECT_FALSE(h.contains(kMaxAttempts.name));
  EXPECT_EQ(h.get(kSentAt), format_iso8601(clock_->now()));
  EXPECT_FALSE(h.contains(kDeadLetterReason.name));
  EXPECT_FALSE(h.contains(kDeadLetterTerminal.name));
  EXPECT_EQ(h.get(wire::HeaderKey<std::string>{"x-trace"}), "kept");
  EXPECT_EQ(d->letter().to, addr("inbox"));
}

TEST_P(MailConformance, M_RETRY_3_OneSendIdPerCopyRoundGrowsAttemptRestarts) {
  open(ConformanceConfig{.retry = RetryPolicy{.max_attempts = 2, .base_delay = absl::Seconds(1)}});
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Recorder a(always(RetriableError("down")));
  Recorder b(always(RetriableError("down")));
  Subscription sa = subscribe(addr("inbox"), a);
  Subscription sb = subscribe(addr("inbox"), b);
  PostReceipt r = post_text(addr("inbox"), "x");
  ASSERT_TRUE(a.wait_for(1) && b.wait_for(1));
  idle();
  clock_->advance(absl::Seconds(1));
  ASSERT_TRUE(a.wait_for(2) && b.wait_for(2));
  idle();
  // One copy, N deliveries: both subscribers saw the same send id, round 1, attempts 1 and 2.
  EXPECT_EQ(a.seen()[0].headers.get(kSendId), r.send_id);
  EXPECT_EQ(b.seen()[1].headers.get(kSendId), r.send_id);
  EXPECT_EQ(a.seen()[1].headers.get(kRound), 1u);
  EXPECT_EQ(a.seen()[1].headers.get(kAttempt), 2u);
  sa.unsubscribe();
  sb.unsubscribe();
  std::optional<Delivery> d = fetch_manual(addr("inbox"));  // round 2, attempt back to 1
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->letter().headers.get(kSendId), r.send_id);
  EXPECT_EQ(d->letter().headers.get(kRound), 2u);
  EXPECT_EQ(d->letter().headers.get(kAttempt), 1u);
  EXPECT_TRUE(d->ack(Disposition::kUnhandled));
  std::optional<Delivery> again = fetch(addr("inbox"));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->letter().headers.get(kRound), 3u);
  PostReceipt other = post_text(addr("inbox"), "x");
  EXPECT_NE(other.send_id, r.send_id);
}

TEST_P(MailConformance, M_RETRY_4_WatchdogReturnsAStuckDeliveryToTheQueue) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Gate gate;
  Recorder r(gate.respond());
  Subscription sub = subscribe(addr("inbox"), r);
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(gate.wait_entered());
  clock_->advance(absl::Seconds(29));
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
  clock_->advance(absl::Seconds(1));  // the 30 s watchdog fires here
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);
  gate.release();  // the late return changes nothing
  idle();
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);
  std::optional<Delivery> d = fetch(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(text_of(d->letter()), "x");
}

TEST_P(MailConformance, M_RETRY_4_ZeroSettleTimeoutOptsOutOfTheWatchdog) {
  open(ConformanceConfig{.settle_timeout = absl::ZeroDuration()});
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Gate gate;
  Recorder r(gate.respond());
  Subscription sub = subscribe(addr("inbox"), r);
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(gate.wait_entered());
  clock_->advance(absl::Hours(1));
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
  gate.release();
  idle();
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);  // it returned OK: handled
}

TEST_P(MailConformance, M_RETRY_4_UnsubscribeCancelsABackoffNeverARunningCallback) {
  open(ConformanceConfig{.retry = RetryPolicy{.max_attempts = 3, .base_delay = absl::Seconds(1)}});
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  // In a backoff: cancelled at once, and the letter falls back to the queue.
  Recorder failing(always(RetriableError("down")));
  Subscription waiting = subscribe(addr("backoff"), failing);
  post_text(addr("backoff"), "x");
  ASSERT_TRUE(failing.wait_for(1));
  idle();
  EXPECT_EQ(status(addr("backoff")).unread_count, 0u);  // waiting for its retry
  waiting.unsubscribe();
  EXPECT_EQ(status(addr("backoff")).unread_count, 1u);
  clock_->advance(absl::Minutes(1));
  idle();
  EXPECT_EQ(failing.count(), 1u);

  // Running: unsubscribe waits for it, and its result settles the delivery.
  Gate gate;
  Recorder running(gate.respond());
  Subscription busy = subscribe(addr("running"), running);
  post_text(addr("running"), "y");
  ASSERT_TRUE(gate.wait_entered());
  std::atomic<bool> returned{false};
  std::thread unsubscriber([&] {
    busy.unsubscribe();
    returned = true;
  });
  EXPECT_FALSE(returned.load());
  gate.release();
  unsubscriber.join();
  EXPECT_TRUE(returned.load());
  EXPECT_EQ(status(addr("running")).unread_count, 0u);  // handled, not requeued
}

TEST_P(MailConformance, M_RETRY_4_StopCancelsOnlyDeliveriesWaitingInABackoff) {
  open(ConformanceConfig{.retry = RetryPolicy{.max_attempts = 3, .base_delay = absl::Seconds(1)}});
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Recorder failing(always(RetriableError("down")));
  Subscription sub = subscribe(addr("inbox"), failing);
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(failing.wait_for(1));
  idle();
  office_->stop();
  EXPECT_FALSE(sub.active());
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);
  clock_->advance(absl::Minutes(1));
  EXPECT_EQ(failing.count(), 1u);
  ASSERT_TRUE(office_->start().ok());
  std::optional<Delivery> d = fetch(addr("inbox"));
  ASSERT_TRUE(d.has_value());
}

}  // namespace
}  // namespace postal::mail::testing

namespace postal::mail::testing {
namespace {

// M-RETRY-5: a subscription's own retry policy replaces the provider's (here: none).
TEST_P(MailConformance, M_RETRY_5_ASubscriptionsOwnRetryPolicyReplacesTheProviders) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Recorder flaky([](const Letter&, size_t call) {
    return call < 2 ? RetriableError("not yet") : absl::OkStatus();
  });
  SubscribeOptions own;
  own.retry = RetryPolicy{.max_attempts = 2, .base_delay = absl::Seconds(3), .factor = 1.0};
  absl::StatusOr<Subscription> sub = office_->subscribe(addr("inbox"), flaky.handler(), own);
  ASSERT_TRUE(sub.ok()) << sub.status();
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(flaky.wait_for(1));
  idle();
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u) << "retried, not requeued";
  clock_->advance(absl::Seconds(3));
  ASSERT_TRUE(flaky.wait_for(2));
  idle();
  EXPECT_EQ(flaky.seen()[1].headers.get(kMaxAttempts), 2u);
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
}

TEST_P(MailConformance, M_RETRY_5_ASubscriptionsOwnSettleTimeoutCancelsAStuckDelivery) {
  open();  // the provider's settle timeout: 30 s
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Gate gate;
  Recorder stuck(gate.respond());
  SubscribeOptions own;
  own.settle_timeout = absl::Seconds(2);
  absl::StatusOr<Subscription> sub = office_->subscribe(addr("inbox"), stuck.handler(), own);
  ASSERT_TRUE(sub.ok()) << sub.status();
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(gate.wait_entered());
  clock_->advance(absl::Seconds(2));
  const absl::Time deadline = absl::Now() + kWait;
  while (status(addr("inbox")).extension_int(ext("watchdogCancelledCount")) != 1 &&
         absl::Now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(status(addr("inbox")).extension_int(ext("watchdogCancelledCount")), 1);
  gate.release();
  idle();
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u) << "cancelled, so back in the queue";
}

TEST_P(MailConformance, M_RETRY_5_ABadPolicyIsRefusedAtSubscribe) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Recorder r;
  SubscribeOptions bad;
  bad.retry = RetryPolicy{.max_attempts = 0};
  absl::StatusOr<Subscription> sub = office_->subscribe(addr("inbox"), r.handler(), bad);
  EXPECT_EQ(sub.status().code(), absl::StatusCode::kInvalidArgument) << sub.status();
  EXPECT_EQ(status(addr("inbox")).extension_int(ext("subscriberCount")).value_or(0), 0);
}

}  // namespace
}  // namespace postal::mail::testing
