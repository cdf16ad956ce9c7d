// Conformance: per-mailbox redelivery policy (M-RETRY-6) — retry and backoff, the round cap,
// dead-lettering and the settle watchdog per mailbox, between the subscription's own (M-RETRY-5)
// and the provider's.
#include "mail_conformance.h"

namespace postal::mail::testing {
namespace {

Recorder::Respond always(absl::Status status) {
  return [status](const Letter&, size_t) { return status; };
}

TEST_P(MailConformance, M_RETRY_6_RetriesFollowTheMailboxsPolicyNotTheProviders) {
  open(ConformanceConfig{.retry = RetryPolicy{.max_attempts = 5, .base_delay = absl::Seconds(1)}});
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  if (!can(Capability::kPolicy)) GTEST_SKIP() << "provider has no mailbox policies";
  Recorder flaky([](const Letter&, size_t call) {
    return call < 3 ? RetriableError("not yet") : absl::OkStatus();
  });
  Subscription sub = subscribe(addr("inbox"), flaky);
  // Set while the subscription exists: it governs the next attempt.
  ASSERT_TRUE(office_
                  ->set_policy(addr("inbox"),
                               {.retry = RetryPolicy{.max_attempts = 3,
                                                     .base_delay = absl::Seconds(10),
                                                     .factor = 1.0}})
                  .ok());
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(flaky.wait_for(1));
  idle();
  clock_->advance(absl::Seconds(1));  // the provider's backoff: not this mailbox's
  idle();
  EXPECT_EQ(flaky.count(), 1u);
  clock_->advance(absl::Seconds(9));  // the mailbox's 10 s
  ASSERT_TRUE(flaky.wait_for(2));
  idle();
  clock_->advance(absl::Seconds(10));
  ASSERT_TRUE(flaky.wait_for(3));
  idle();
  for (const Letter& l : flaky.seen()) EXPECT_EQ(l.headers.get(kMaxAttempts), 3u);
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
}

TEST_P(MailConformance, M_RETRY_6_ASubscriptionsOwnPolicyBeatsTheMailboxs) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  if (!can(Capability::kPolicy)) GTEST_SKIP() << "provider has no mailbox policies";
  ASSERT_TRUE(office_
                  ->set_policy(addr("inbox"),
                               {.retry = RetryPolicy{.max_attempts = 4,
                                                     .base_delay = absl::Seconds(1),
                                                     .factor = 1.0}})
                  .ok());
  Recorder failing(always(RetriableError("down")));
  SubscribeOptions own;
  own.retry = RetryPolicy{.max_attempts = 2, .base_delay = absl::Seconds(5), .factor = 1.0};
  absl::StatusOr<Subscription> sub = office_->subscribe(addr("inbox"), failing.handler(), own);
  ASSERT_TRUE(sub.ok()) << sub.status();
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(failing.wait_for(1));
  idle();
  clock_->advance(absl::Seconds(1));  // the mailbox's backoff: not this subscription's
  idle();
  EXPECT_EQ(failing.count(), 1u);
  clock_->advance(absl::Seconds(4));
  ASSERT_TRUE(failing.wait_for(2));
  idle();
  clock_->advance(absl::Hours(1));
  idle();
  EXPECT_EQ(failing.count(), 2u);  // its own budget of 2, not the mailbox's 4
  EXPECT_EQ(failing.seen()[1].headers.get(kMaxAttempts), 2u);
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);  // exhausted: back to the queue
}

TEST_P(MailConformance, M_RETRY_6_TheMailboxsRoundCapGivesUp) {
  open(ConformanceConfig{.dead_letter = DeadLetterOptions{}});
  if (!can(Capability::kPolicy)) GTEST_SKIP() << "provider has no mailbox policies";
  ASSERT_TRUE(office_->set_policy(addr("capped"), {.max_delivery_rounds = 2}).ok());
  std::vector<Delivery> held;  // a dropped Delivery would settle unhandled: its lease runs out
  for (const char* path : {"capped", "free"}) {
    post_text(addr(path), path);
    std::optional<Delivery> first = fetch_manual(addr(path));
    ASSERT_TRUE(first.has_value());
    EXPECT_TRUE(first->ack(Disposition::kUnhandled));  // round 1: back to the queue
    // Round 2 ends in an expired lease, reclaimed by recover().
    std::optional<Delivery> second = fetch_manual(addr(path), absl::Seconds(1));
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(second->letter().headers.get(kRound), 2u);
    held.push_back(*std::move(second));
  }
  clock_->advance(absl::Seconds(2));
  EXPECT_EQ(office_->recover(addr("capped"))->reclaimed, 1u);
  EXPECT_EQ(office_->recover(addr("free"))->reclaimed, 1u);
  EXPECT_EQ(status(addr("capped")).unread_count, 0u) << "given up at the mailbox's cap of 2";
  std::optional<Delivery> dead = fetch(addr("capped_dlq"));
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->letter().headers.get(kDeadLetterReason), "expired-lease");
  EXPECT_EQ(status(addr("free")).unread_count, 1u) << "the provider has no cap";
}

TEST_P(MailConformance, M_RETRY_6_DeadLetteringIsChosenPerMailbox) {
  open(ConformanceConfig{.dead_letter = DeadLetterOptions{}});
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  if (!can(Capability::kPolicy)) GTEST_SKIP() << "provider has no mailbox policies";
  ASSERT_TRUE(office_->set_policy(addr("off"), {.dead_letter = false}).ok());
  Recorder off(always(absl::InternalError("bad payload")));
  Recorder on(always(absl::InternalError("bad payload")));
  Subscription a = subscribe(addr("off"), off);
  Subscription b = subscribe(addr("on"), on);
  post_text(addr("off"), "x");
  post_text(addr("on"), "y");
  ASSERT_TRUE(off.wait_for(1) && on.wait_for(1));
  idle();
  EXPECT_EQ(status(addr("off_dlq")).exists, false) << "dropped, though the provider dead-letters";
  EXPECT_EQ(status(addr("off")).extension_int(ext("droppedCount")).value_or(-1), 1);
  EXPECT_EQ(status(addr("on_dlq")).unread_count, 1u);
}

TEST_P(MailConformance, M_RETRY_6_AMailboxDeadLettersOnAProviderThatDoesNot) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  if (!can(Capability::kPolicy)) GTEST_SKIP() << "provider has no mailbox policies";
  ASSERT_TRUE(office_->set_policy(addr("kept"), {.dead_letter = true}).ok());
  Recorder kept(always(absl::InternalError("bad payload")));
  Recorder plain(always(absl::InternalError("bad payload")));
  Subscription a = subscribe(addr("kept"), kept);
  Subscription b = subscribe(addr("plain"), plain);
  post_text(addr("kept"), "x");
  post_text(addr("plain"), "y");
  ASSERT_TRUE(kept.wait_for(1) && plain.wait_for(1));
  idle();
  std::optional<Delivery> dead = fetch(addr("kept_dlq"));  // the default suffix
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->letter().headers.get(kDeadLetterReason), "fatal");
  EXPECT_EQ(status(addr("plain_dlq")).exists, false);
  EXPECT_EQ(status(addr("plain")).extension_int(ext("droppedCount")).value_or(-1), 1);
}

TEST_P(MailConformance, M_RETRY_6_TheMailboxsWatchdogCancelsAHungCallback) {
  open();  // the provider's watchdog: 30 s
  if (!can(Capability::kPolicy)) GTEST_SKIP() << "provider has no mailbox policies";
  ASSERT_TRUE(office_->set_policy(addr("inbox"), {.settle_timeout = absl::Seconds(5)}).ok());
  Gate gate;
  Recorder r(gate.respond());
  Subscription sub = subscribe(addr("inbox"), r);
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(gate.wait_entered());
  clock_->advance(absl::Seconds(4));
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
  clock_->advance(absl::Seconds(1));  // the mailbox's 5 s watchdog fires here
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);
  EXPECT_EQ(status(addr("inbox")).extension_int(ext("watchdogCancelledCount")).value_or(-1), 1);
  gate.release();  // the late return changes nothing
  idle();
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);
}

TEST_P(MailConformance, M_RETRY_6_ABadPolicyIsRefusedAndChangesNothing) {
  open();
  if (!can(Capability::kPolicy)) GTEST_SKIP() << "provider has no mailbox policies";
  const MailboxPolicy good{.max_delivery_rounds = 3};
  ASSERT_TRUE(office_->set_policy(addr("inbox"), good).ok());
  const MailboxPolicy bad[] = {
      {.retry = RetryPolicy{.factor = 0.5}},
      {.retry = RetryPolicy{.max_attempts = 0}},
      {.retry = RetryPolicy{.base_delay = absl::Seconds(10), .max_delay = absl::Seconds(1)}},
      {.settle_timeout = absl::Seconds(-1)},
  };
  for (const MailboxPolicy& p : bad) {
    absl::Status s = office_->set_policy(addr("inbox"), p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    absl::StatusOr<MailboxPolicy> now = office_->policy(addr("inbox"));
    ASSERT_TRUE(now.ok()) << now.status();
    EXPECT_EQ(*now, good);
  }
  EXPECT_TRUE(IsInvalidMailboxAddress(office_->set_policy("mem:no address", good)));
  EXPECT_EQ(status(addr("inbox")).exists, false) << "setting a policy does not make the mailbox";
}

TEST_P(MailConformance, M_RETRY_6_APolicyBelongsToTheAddressAndAnEmptyOneClearsIt) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  if (!can(Capability::kPolicy)) GTEST_SKIP() << "provider has no mailbox policies";
  EXPECT_TRUE(office_->policy(addr("inbox"))->empty());
  const MailboxPolicy policy{
      .retry = RetryPolicy{.max_attempts = 7,
                           .base_delay = absl::Milliseconds(250),
                           .max_delay = absl::Seconds(40),
                           .factor = 3.0,
                           .jitter = 0.25},
      .max_delivery_rounds = 9,
      .dead_letter = false,
      .settle_timeout = absl::Milliseconds(1500)};
  ASSERT_TRUE(office_->set_policy(addr("inbox"), policy).ok());
  // No subscriber, no content: the policy is the address's.
  Recorder r;
  Subscription sub = subscribe(addr("inbox"), r);
  sub.unsubscribe();
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(office_->clear().ok());
  EXPECT_EQ(*office_->policy(addr("inbox")), policy);
  office_->stop();
  EXPECT_EQ(*office_->policy(addr("inbox")), policy) << "readable while stopped";
  EXPECT_EQ(office_->set_policy(addr("inbox"), {}).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(office_->start().ok());
  EXPECT_EQ(*office_->policy(addr("inbox")), policy) << "kept across stop and start";
  ASSERT_TRUE(office_->set_policy(addr("inbox"), {}).ok());
  EXPECT_TRUE(office_->policy(addr("inbox"))->empty());
  EXPECT_TRUE(office_->policy(addr("other"))->empty());
}

}  // namespace
}  // namespace postal::mail::testing
