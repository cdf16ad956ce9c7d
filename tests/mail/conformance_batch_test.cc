// Conformance: batch fetch and the long poll (M-RECV-6), batched settlement and lease control —
// renew, nack with a delay, terminate (M-ACK-6).
#include "mail_conformance.h"

namespace postal::mail::testing {
namespace {

std::vector<std::string> texts(const std::vector<Delivery>& batch) {
  std::vector<std::string> out;
  for (const Delivery& d : batch) out.push_back(text_of(d.letter()));
  return out;
}

TEST_P(MailConformance, M_RECV_6_ABatchTakesUpToMaxMessagesInQueueOrder) {
  open();
  for (const char* t : {"A", "B", "C", "D", "E"}) post_text(addr("inbox"), t);
  std::vector<Delivery> first = fetch_batch(addr("inbox"), {.max_messages = 3});
  EXPECT_EQ(texts(first), (std::vector<std::string>{"A", "B", "C"}));
  std::vector<Delivery> rest = fetch_batch(addr("inbox"), {.max_messages = 3});
  EXPECT_EQ(texts(rest), (std::vector<std::string>{"D", "E"}));
  EXPECT_TRUE(fetch_batch(addr("inbox"), {.max_messages = 3}).empty());
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
}

TEST_P(MailConformance, M_RECV_6_MaxBytesBoundsABatchButTheFirstCopyIsAlwaysTaken) {
  open();
  post_text(addr("inbox"), std::string(100, 'a'));
  post_text(addr("inbox"), std::string(100, 'b'));
  post_text(addr("inbox"), std::string(100, 'c'));
  const size_t one = Letter::text(std::string(100, 'a')).body.byte_size();
  std::vector<Delivery> two = fetch_batch(addr("inbox"), {.max_messages = 10, .max_bytes = 2 * one});
  EXPECT_EQ(two.size(), 2u);
  std::vector<Delivery> big = fetch_batch(addr("inbox"), {.max_messages = 10, .max_bytes = 1});
  ASSERT_EQ(big.size(), 1u) << "a copy larger than the bound is not stuck";
  EXPECT_EQ(text_of(big[0].letter()), std::string(100, 'c'));
}

TEST_P(MailConformance, M_RECV_6_BadBatchOptionsFailWithInvalidArgumentAndTakeNothing) {
  open();
  post_text(addr("inbox"), "kept");
  for (FetchOptions bad : {FetchOptions{.max_messages = 0},
                           FetchOptions{.max_messages = kMaxFetchBatch + 1},
                           FetchOptions{.max_wait = absl::Seconds(-1)}}) {
    absl::StatusOr<std::vector<Delivery>> b = office_->fetch_batch(addr("inbox"), bad);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << b.status();
  }
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);
}

TEST_P(MailConformance, M_RECV_6_ALongPollIsAnsweredByTheNextPost) {
  open();
  std::unique_ptr<Pending> p =
      fetch_in_background(addr("inbox"), {.max_messages = 8, .max_wait = absl::Hours(1)});
  ASSERT_TRUE(waiting(addr("inbox"), 1)) << "the fetch did not wait";
  EXPECT_FALSE(p->done.HasBeenNotified());
  post_text(addr("inbox"), "wake");
  ASSERT_TRUE(p->done.WaitForNotificationWithTimeout(kWait)) << "the post did not answer it";
  ASSERT_TRUE(p->result.ok()) << p->result.status();
  EXPECT_EQ(texts(*p->result), (std::vector<std::string>{"wake"}));
  EXPECT_EQ(status(addr("inbox")).extension_int(ext("waitingFetchCount")), 0);
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u) << "pushed to the waiter, not queued too";
}

TEST_P(MailConformance, M_RECV_6_ALongPollEndsEmptyAtItsDeadlineOnTheProviderClock) {
  open();
  std::unique_ptr<Pending> p =
      fetch_in_background(addr("inbox"), {.max_messages = 8, .max_wait = absl::Seconds(10)});
  ASSERT_TRUE(waiting(addr("inbox"), 1));
  clock_->advance(absl::Seconds(9));
  EXPECT_FALSE(p->done.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  clock_->advance(absl::Seconds(1));
  ASSERT_TRUE(p->done.WaitForNotificationWithTimeout(kWait));
  ASSERT_TRUE(p->result.ok()) << p->result.status();
  EXPECT_TRUE(p->result->empty());
  // Nothing lingers: a later post is queued, not handed to the finished fetch.
  post_text(addr("inbox"), "after");
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);
}

TEST_P(MailConformance, M_RECV_6_WaitingFetchesAreAnsweredInArrivalOrder) {
  open();
  std::unique_ptr<Pending> first =
      fetch_in_background(addr("inbox"), {.max_messages = 1, .max_wait = absl::Hours(1)});
  ASSERT_TRUE(waiting(addr("inbox"), 1));
  std::unique_ptr<Pending> second =
      fetch_in_background(addr("inbox"), {.max_messages = 1, .max_wait = absl::Hours(1)});
  ASSERT_TRUE(waiting(addr("inbox"), 2));
  post_text(addr("inbox"), "one");
  ASSERT_TRUE(first->done.WaitForNotificationWithTimeout(kWait));
  EXPECT_FALSE(second->done.HasBeenNotified());
  post_text(addr("inbox"), "two");
  ASSERT_TRUE(second->done.WaitForNotificationWithTimeout(kWait));
  EXPECT_EQ(texts(*first->result), (std::vector<std::string>{"one"}));
  EXPECT_EQ(texts(*second->result), (std::vector<std::string>{"two"}));
}

TEST_P(MailConformance, M_RECV_6_StoppingTheOfficeEndsAWaitingFetch) {
  open();
  std::unique_ptr<Pending> p =
      fetch_in_background(addr("inbox"), {.max_messages = 1, .max_wait = absl::Hours(1)});
  ASSERT_TRUE(waiting(addr("inbox"), 1));
  office_->stop();
  ASSERT_TRUE(p->done.WaitForNotificationWithTimeout(kWait)) << "stop left a fetch waiting";
  EXPECT_TRUE(!p->result.ok() || p->result->empty());
}

TEST_P(MailConformance, M_ACK_6_AckAllSettlesAManualBatchAtOnce) {
  open();
  for (const char* t : {"A", "B", "C"}) post_text(addr("inbox"), t);
  std::vector<Delivery> batch =
      fetch_batch(addr("inbox"), {.ack = AckMode::kManual, .max_messages = 3});
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(status(addr("inbox")).in_flight_count, 3u);
  EXPECT_TRUE(batch[1].ack());  // settled by hand first: ack_all skips it
  std::vector<bool> took = ack_all(batch);
  EXPECT_EQ(took, (std::vector<bool>{true, false, true}));
  for (const Delivery& d : batch) EXPECT_TRUE(d.settled());
  EXPECT_EQ(status(addr("inbox")).in_flight_count, 0u);
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
}

TEST_P(MailConformance, M_ACK_6_AckAllUnhandledReturnsTheBatchInOrder) {
  open();
  for (const char* t : {"A", "B"}) post_text(addr("inbox"), t);
  std::vector<Delivery> batch =
      fetch_batch(addr("inbox"), {.ack = AckMode::kManual, .max_messages = 2});
  EXPECT_EQ(ack_all(batch, Disposition::kUnhandled), (std::vector<bool>{true, true}));
  EXPECT_EQ(texts(fetch_batch(addr("inbox"), {.max_messages = 2})),
            (std::vector<std::string>{"A", "B"}));
}

TEST_P(MailConformance, M_ACK_6_InProgressStartsTheLeaseOver) {
  open();
  post_text(addr("inbox"), "slow");
  std::vector<Delivery> batch = fetch_batch(
      addr("inbox"), {.ack = AckMode::kManual, .ack_timeout = absl::Seconds(10)});
  ASSERT_EQ(batch.size(), 1u);
  clock_->advance(absl::Seconds(8));
  ASSERT_TRUE(batch[0].in_progress());
  EXPECT_EQ(batch[0].lease_expires_at(), clock_->now() + absl::Seconds(10));
  clock_->advance(absl::Seconds(8));  // 16 s after hand-out: past the first lease, within the new
  EXPECT_EQ(office_->recover(addr("inbox"))->reclaimed, 0u);
  EXPECT_TRUE(batch[0].ack());
  EXPECT_FALSE(batch[0].in_progress()) << "a settled copy has no lease to renew";
}

TEST_P(MailConformance, M_ACK_6_InProgressAfterTheLeaseEndedDoesNotTakeEffect) {
  open();
  post_text(addr("inbox"), "late");
  std::vector<Delivery> batch = fetch_batch(
      addr("inbox"), {.ack = AckMode::kManual, .ack_timeout = absl::Seconds(1)});
  ASSERT_EQ(batch.size(), 1u);
  clock_->advance(absl::Seconds(2));
  EXPECT_FALSE(batch[0].in_progress());
  EXPECT_EQ(office_->recover(addr("inbox"))->reclaimed, 1u);
}

TEST_P(MailConformance, M_ACK_6_ANackedCopyWaitsItsDelayThenComesBackFirst) {
  open();
  post_text(addr("inbox"), "retry-me");
  post_text(addr("inbox"), "next");
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  ASSERT_TRUE(d->nack(absl::Seconds(5)));
  EXPECT_EQ(status(addr("inbox")).extension_int(ext("delayedCount")), 1);
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u) << "a delayed copy is counted apart";
  EXPECT_EQ(texts(fetch_batch(addr("inbox"), {.max_messages = 5})),
            (std::vector<std::string>{"next"}));
  clock_->advance(absl::Seconds(5));
  std::vector<Delivery> again = fetch_batch(addr("inbox"), {.max_messages = 5});
  EXPECT_EQ(texts(again), (std::vector<std::string>{"retry-me"}));
  EXPECT_EQ(status(addr("inbox")).extension_int(ext("delayedCount")), 0);
}

TEST_P(MailConformance, M_ACK_6_ALongPollWakesWhenANackedCopyFallsDue) {
  open();
  post_text(addr("inbox"), "later");
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  ASSERT_TRUE(d->nack(absl::Seconds(3)));
  std::unique_ptr<Pending> p =
      fetch_in_background(addr("inbox"), {.max_messages = 1, .max_wait = absl::Hours(1)});
  ASSERT_TRUE(waiting(addr("inbox"), 1));
  clock_->advance(absl::Seconds(3));
  ASSERT_TRUE(p->done.WaitForNotificationWithTimeout(kWait)) << "the due copy woke nobody";
  EXPECT_EQ(texts(*p->result), (std::vector<std::string>{"later"}));
}

TEST_P(MailConformance, M_ACK_6_TerminateRemovesTheCopyWithoutADeadLetter) {
  open({.dead_letter = DeadLetterOptions{}});
  post_text(addr("inbox"), "poison");
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->terminate());
  EXPECT_FALSE(d->terminate()) << "one handle settles once";
  MailboxStatus s = status(addr("inbox"));
  EXPECT_EQ(s.unread_count + s.in_flight_count, 0u);
  EXPECT_EQ(s.extension_int(ext("terminatedCount")), 1);
  EXPECT_EQ(status(addr("inbox_dlq")).unread_count, 0u) << "terminate never dead-letters";
  // Settled by name as well, everywhere the core dispositions are.
  post_text(addr("inbox"), "by-name");
  std::optional<Delivery> n = fetch_manual(addr("inbox"));
  ASSERT_TRUE(n.has_value());
  EXPECT_TRUE(took_effect(n->ack("terminate")));
}

}  // namespace

}  // namespace postal::mail::testing
