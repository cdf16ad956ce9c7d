// Conformance: dead-letter records, the nesting cap and parking, where a give-up lands
// (M-DLQ-1, M-DLQ-2, M-DLQ-3).
#include "mail_conformance.h"

namespace postal::mail::testing {
namespace {

ConformanceConfig dead_letters(size_t max_nesting = 1) {
  return ConformanceConfig{.dead_letter = DeadLetterOptions{.max_nesting = max_nesting}};
}

TEST_P(MailConformance, M_DLQ_1_OneGiveUpLeavesExactlyOneRecordWithItsHeaders) {
  open(dead_letters());
  if (!can(Capability::kDeadLetter)) GTEST_SKIP() << "provider has no dead-letter queue";
  Letter poison = Letter::text("poison", "p-1");
  poison.from = "mem://sender@conformance.test";
  poison.headers.set_value("x-trace", std::string("t-9"));
  post(addr("inbox"), std::move(poison));
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->ack(Disposition::kDiscard));
  EXPECT_FALSE(d->ack(Disposition::kDiscard));  // a repeated give-up adds no second record
  absl::StatusOr<MailAddress> dlq = office_->dead_letter_topic(addr("inbox"));
  ASSERT_TRUE(dlq.ok()) << dlq.status();
  EXPECT_EQ(dlq->canonical(), addr("inbox_dlq"));
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
  EXPECT_EQ(status(addr("inbox_dlq")).unread_count, 1u);

  std::optional<Delivery> record = fetch(dlq->canonical());
  ASSERT_TRUE(record.has_value());
  const Letter& l = record->letter();
  EXPECT_EQ(l.id, "p-1");
  EXPECT_EQ(l.from, "mem://sender@conformance.test");
  EXPECT_EQ(l.to, addr("inbox"));  // the original `to`, so it can be replayed
  EXPECT_EQ(text_of(l), "poison");
  EXPECT_EQ(l.headers.get(wire::HeaderKey<std::string>{"x-trace"}), "t-9");
  EXPECT_EQ(l.headers.get(kDeadLetterReason), "consumer-nack");
  EXPECT_EQ(l.headers.get(kDeadLetterAttempts), 1u);
  EXPECT_EQ(l.headers.get(kDeadLetterRound), 1u);
  EXPECT_EQ(l.headers.get(kDeadLetterTopic), addr("inbox"));
  EXPECT_EQ(l.headers.get(kDeadLetterDepth), 1u);
  EXPECT_TRUE(l.headers.get(kDeadLetterError).has_value());
  EXPECT_FALSE(l.headers.contains(kDeadLetterTerminal.name));
  EXPECT_NE(l.headers.get(kSendId), d->letter().headers.get(kSendId));  // a new copy
  EXPECT_EQ(l.headers.get(kDeadLetterSendId), d->letter().headers.get(kSendId))
      << "the record names the copy it was given up from";
  EXPECT_FALSE(fetch(dlq->canonical()).has_value());
}

TEST_P(MailConformance, M_DLQ_1_HandledThenDiscardDoesNotDeadLetter) {
  open(dead_letters());
  if (!can(Capability::kDeadLetter)) GTEST_SKIP() << "provider has no dead-letter queue";
  post_text(addr("inbox"), "fine");
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->ack(Disposition::kHandled));
  EXPECT_FALSE(d->ack(Disposition::kDiscard));
  EXPECT_EQ(status(addr("inbox_dlq")).exists, false);
}

TEST_P(MailConformance, M_DLQ_1_PushGiveUpRecordCountsTheAttemptsOfTheChainThatDied) {
  ConformanceConfig config = dead_letters();
  config.retry = RetryPolicy{.max_attempts = 2, .base_delay = absl::Seconds(1)};
  open(config);
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  if (!can(Capability::kDeadLetter)) GTEST_SKIP() << "provider has no dead-letter queue";
  Recorder ok;
  Recorder failing([](const Letter&, size_t) { return RetriableError("upstream down"); });
  Subscription a = subscribe(addr("inbox"), ok);
  Subscription b = subscribe(addr("inbox"), failing);
  post_text(addr("inbox"), "x");
  ASSERT_TRUE(failing.wait_for(1));
  idle();
  clock_->advance(absl::Seconds(1));
  ASSERT_TRUE(failing.wait_for(2));
  idle();
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
  ASSERT_EQ(status(addr("inbox_dlq")).unread_count, 1u);
  std::optional<Delivery> record = fetch(addr("inbox_dlq"));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->letter().headers.get(kDeadLetterReason), "retriable");
  EXPECT_EQ(record->letter().headers.get(kDeadLetterAttempts), 2u);
  EXPECT_NE(record->letter().headers.get(kDeadLetterError)->find("upstream down"),
            std::string::npos);
}

TEST_P(MailConformance, M_DLQ_1_DeadLetteringIsOptIn) {
  open();
  EXPECT_FALSE(can(Capability::kDeadLetter));
  EXPECT_TRUE(IsUnsupportedCapability(office_->dead_letter_topic(addr("inbox")).status()));
  post_text(addr("inbox"), "x");
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->ack(Disposition::kDiscard));  // degrades to a drop
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
  EXPECT_EQ(status(addr("inbox_dlq")).exists, false);
}

// A mailbox whose canonical form leaves no room for the dead-letter suffix under the 2,048-byte
// cap still gets exactly one record for a give-up: parked in the mailbox itself, never dropped.
TEST_P(MailConformance, M_DLQ_1_NoRoomForTheSuffixParksTheOneRecordInTheMailbox) {
  open(dead_letters());
  if (!can(Capability::kDeadLetter)) GTEST_SKIP() << "provider has no dead-letter queue";
  const std::string base = addr("");
  const std::string box = base + std::string(MailAddress::kMaxLength - base.size() - 2, 'q');
  ASSERT_EQ(box.size(), MailAddress::kMaxLength - 2);
  post_text(box, "poison", "p-1");
  std::optional<Delivery> d = fetch_manual(box);
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->ack(Disposition::kDiscard));
  absl::StatusOr<MailAddress> dlq = office_->dead_letter_topic(box);
  ASSERT_TRUE(dlq.ok()) << dlq.status();
  EXPECT_EQ(dlq->canonical(), box);  // where the record is: parked in the mailbox itself
  absl::StatusOr<std::vector<Letter>> parked = office_->peek_parked(box);
  ASSERT_TRUE(parked.ok()) << parked.status();
  ASSERT_EQ(parked->size(), 1u);
  EXPECT_EQ((*parked)[0].id, "p-1");
  EXPECT_EQ((*parked)[0].headers.get(kDeadLetterTerminal), true);
  EXPECT_EQ((*parked)[0].headers.get(kDeadLetterTopic), box);
  EXPECT_EQ(status(box).unread_count, 0u);
}

TEST_P(MailConformance, M_DLQ_2_AtTheCapTheRecordIsParkedNeverFetched) {
  open(dead_letters());
  if (!can(Capability::kDeadLetter)) GTEST_SKIP() << "provider has no dead-letter queue";
  post_text(addr("inbox"), "poison", "p-1");
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d && d->ack(Disposition::kDiscard));
  std::optional<Delivery> record = fetch_manual(addr("inbox_dlq"));  // a compensation worker
  ASSERT_TRUE(record.has_value());
  EXPECT_TRUE(record->ack(Disposition::kDiscard));  // ... gives up too: parked, not X_dlq_dlq

  MailboxStatus s = status(addr("inbox_dlq"));
  EXPECT_EQ(s.unread_count, 0u);
  EXPECT_EQ(s.in_flight_count, 0u);
  EXPECT_EQ(s.extension_int(ext("parkedCount")), 1);
  EXPECT_EQ(status(addr("inbox_dlq_dlq")).exists, false);
  EXPECT_FALSE(fetch(addr("inbox_dlq")).has_value());
  EXPECT_FALSE(fetch_manual(addr("inbox_dlq")).has_value());
  EXPECT_TRUE(office_->peek(addr("inbox_dlq"), 10)->empty());

  absl::StatusOr<std::vector<Letter>> parked = office_->peek_parked(addr("inbox_dlq"));
  ASSERT_TRUE(parked.ok()) << parked.status();
  ASSERT_EQ(parked->size(), 1u);
  EXPECT_EQ((*parked)[0].id, "p-1");
  EXPECT_EQ((*parked)[0].headers.get(kDeadLetterTerminal), true);
  EXPECT_EQ((*parked)[0].headers.get(kDeadLetterDepth), 2u);
  EXPECT_EQ((*parked)[0].headers.get(kDeadLetterTopic), addr("inbox_dlq"));
  if (can(Capability::kLocate)) {
    absl::StatusOr<std::vector<CopyInfo>> found = office_->locate("p-1");
    ASSERT_TRUE(found.ok());
    ASSERT_EQ(found->size(), 1u);
    EXPECT_EQ((*found)[0].state, CopyState::kParked);
    EXPECT_FALSE(took_effect(office_->settle((*found)[0].key, Disposition::kHandled)));
  }
  absl::StatusOr<uint64_t> purged = office_->purge_parked(addr("inbox_dlq"));
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 1u);
  EXPECT_EQ(status(addr("inbox_dlq")).extension_int(ext("parkedCount")), 0);
  EXPECT_TRUE(office_->peek_parked(addr("inbox_dlq"))->empty());
}

TEST_P(MailConformance, M_DLQ_2_ClearNeverDropsParkedRecords) {
  open(dead_letters(0));  // max_nesting 0: every give-up is parked where it happens
  if (!can(Capability::kDeadLetter)) GTEST_SKIP() << "provider has no dead-letter queue";
  post_text(addr("inbox"), "x");
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d && d->ack(Disposition::kDiscard));
  EXPECT_EQ(status(addr("inbox")).extension_int(ext("parkedCount")), 1);
  ASSERT_TRUE(office_->clear().ok());
  EXPECT_EQ(status(addr("inbox")).extension_int(ext("parkedCount")), 1);
}

TEST_P(MailConformance, M_DLQ_2_ABiggerMaxNestingMakesARealChain) {
  open(dead_letters(2));
  if (!can(Capability::kDeadLetter)) GTEST_SKIP() << "provider has no dead-letter queue";
  post_text(addr("inbox"), "x");
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d && d->ack(Disposition::kDiscard));
  std::optional<Delivery> r1 = fetch_manual(addr("inbox_dlq"));
  ASSERT_TRUE(r1 && r1->ack(Disposition::kDiscard));
  std::optional<Delivery> r2 = fetch(addr("inbox_dlq_dlq"));
  ASSERT_TRUE(r2.has_value());
  EXPECT_EQ(r2->letter().headers.get(kDeadLetterDepth), 2u);
  EXPECT_EQ(r2->letter().headers.get(kDeadLetterTopic), addr("inbox_dlq"));
}

TEST_P(MailConformance, M_DLQ_3_DeadLetterTopicSaysWhereAGiveUpLands) {
  open(dead_letters());
  if (!can(Capability::kDeadLetter)) GTEST_SKIP() << "provider has no dead-letter queue";
  EXPECT_EQ(office_->dead_letter_topic(addr("inbox"))->canonical(), addr("inbox_dlq"));
  // At the cap: the topic itself, never a deeper address that is never written.
  EXPECT_EQ(office_->dead_letter_topic(addr("inbox_dlq"))->canonical(), addr("inbox_dlq"));
  std::string bare = absl::StrCat(GetParam().scheme, "://box@conformance.test");
  EXPECT_EQ(office_->dead_letter_topic(bare)->canonical(), bare + "/_dlq");
  EXPECT_TRUE(IsInvalidMailboxAddress(office_->dead_letter_topic(addr("inbox") + "?x=1").status()));
}

}  // namespace
}  // namespace postal::mail::testing
