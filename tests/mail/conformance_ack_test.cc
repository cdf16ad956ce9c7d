// Conformance: leases and settlement (M-ACK-1, M-ACK-2, M-ACK-3, M-ACK-5).
#include "mail_conformance.h"

namespace postal::mail::testing {
namespace {

TEST_P(MailConformance, M_ACK_1_LeaseIsFixedAtHandOutByItsOwnTimeout) {
  open();
  post_text(addr("inbox"), "A");
  post_text(addr("inbox"), "B");
  std::optional<Delivery> a = fetch_manual(addr("inbox"), absl::Seconds(10));
  ASSERT_TRUE(a.has_value());
  clock_->advance(absl::Seconds(5));
  // A 1 ms fetch cannot shorten A's lease: it gets B, and A stays in flight.
  std::optional<Delivery> b = fetch_manual(addr("inbox"), absl::Milliseconds(1));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(text_of(b->letter()), "B");
  EXPECT_EQ(status(addr("inbox")).in_flight_count, 2u);
  clock_->advance(absl::Seconds(6));  // t = 11 s: both leases are over
  // A 60 s fetch cannot stretch A's expired lease: it is reclaimed, and handed out again.
  std::optional<Delivery> again = fetch_manual(addr("inbox"), absl::Seconds(60));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(text_of(again->letter()), "A");
  EXPECT_EQ(again->lease_expires_at(), clock_->now() + absl::Seconds(60));
  EXPECT_FALSE(a->ack());
  EXPECT_FALSE(b->ack());
  EXPECT_TRUE(again->ack());
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);  // B, back in the queue
}

TEST_P(MailConformance, M_ACK_1_DefaultLeaseIsThirtySeconds) {
  open();
  post_text(addr("inbox"), "x");
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->lease_expires_at(), clock_->now() + absl::Seconds(30));
  clock_->advance(absl::Seconds(29));
  EXPECT_EQ(office_->recover(addr("inbox"))->reclaimed, 0u);
  clock_->advance(absl::Seconds(1));
  EXPECT_EQ(office_->recover(addr("inbox"))->reclaimed, 1u);
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);
}

TEST_P(MailConformance, M_ACK_1_ZeroTimeoutLeaseNeverExpires) {
  open();
  post_text(addr("inbox"), "x");
  std::optional<Delivery> d = fetch_manual(addr("inbox"), absl::ZeroDuration());
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->lease_expires_at().has_value());
  clock_->advance(absl::Hours(1000));
  EXPECT_EQ(office_->recover(addr("inbox"))->reclaimed, 0u);
  EXPECT_FALSE(fetch_manual(addr("inbox"), absl::Milliseconds(1)).has_value());
  EXPECT_TRUE(d->ack());
}

// An infinite lease is a lease that never expires, end to end: no expiry time (not one in 2262),
// and nothing reclaims it.
TEST_P(MailConformance, M_ACK_1_InfiniteTimeoutLeaseNeverExpires) {
  open();
  post_text(addr("inbox"), "x");
  std::optional<Delivery> d = fetch_manual(addr("inbox"), absl::InfiniteDuration());
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->lease_expires_at().has_value())
      << "expires at " << absl::FormatTime(*d->lease_expires_at());
  clock_->advance(absl::Hours(1000));
  EXPECT_EQ(office_->recover(addr("inbox"))->reclaimed, 0u);
  EXPECT_TRUE(d->ack());
}

TEST_P(MailConformance, M_ACK_2_ThreeDispositions) {
  open();
  for (const char* t : {"handled", "discard", "unhandled"}) post_text(addr("inbox"), t);
  std::optional<Delivery> h = fetch_manual(addr("inbox"));
  std::optional<Delivery> x = fetch_manual(addr("inbox"));
  std::optional<Delivery> u = fetch_manual(addr("inbox"));
  ASSERT_TRUE(h && x && u);
  EXPECT_TRUE(h->ack(Disposition::kHandled));
  EXPECT_TRUE(x->ack(Disposition::kDiscard));
  EXPECT_TRUE(u->ack(Disposition::kUnhandled));
  MailboxStatus s = status(addr("inbox"));
  EXPECT_EQ(s.unread_count, 1u);
  EXPECT_EQ(s.in_flight_count, 0u);
  std::optional<Delivery> back = fetch(addr("inbox"));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(text_of(back->letter()), "unhandled");
  EXPECT_EQ(back->letter().headers.get(kSendId), u->letter().headers.get(kSendId));
  EXPECT_EQ(back->letter().headers.get(kRound), 2u);
}

TEST_P(MailConformance, M_ACK_2_SecondSettlementReturnsFalse) {
  open();
  post_text(addr("inbox"), "x");
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->ack(Disposition::kHandled));
  EXPECT_TRUE(d->settled());
  EXPECT_FALSE(d->ack(Disposition::kUnhandled));
  EXPECT_FALSE(d->ack(Disposition::kDiscard));
  MailboxStatus s = status(addr("inbox"));
  EXPECT_EQ(s.unread_count, 0u);
  EXPECT_EQ(s.in_flight_count, 0u);
  if (can(Capability::kSettleByKey)) {
    EXPECT_FALSE(took_effect(office_->settle(d->key(), Disposition::kUnhandled)));
    EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
  }
}

TEST_P(MailConformance, M_ACK_2_StaleHandleAfterReclaimChangesNothing) {
  open();
  post_text(addr("inbox"), "x");
  std::optional<Delivery> first = fetch_manual(addr("inbox"), absl::Seconds(1));
  ASSERT_TRUE(first.has_value());
  clock_->advance(absl::Seconds(2));
  std::optional<Delivery> second = fetch_manual(addr("inbox"));  // reclaims, leases again
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->key().send_id, first->key().send_id);    // the same copy ...
  EXPECT_NE(second->key().lease_id, first->key().lease_id);  // ... under a newer lease
  EXPECT_FALSE(first->ack(Disposition::kDiscard));
  MailboxStatus s = status(addr("inbox"));
  EXPECT_EQ(s.in_flight_count, 1u);
  EXPECT_EQ(s.unread_count, 0u);
  EXPECT_TRUE(second->ack());
}

TEST_P(MailConformance, M_ACK_2_LateSettlementAfterExpiryReturnsFalse) {
  open();
  post_text(addr("inbox"), "x");
  std::optional<Delivery> d = fetch_manual(addr("inbox"), absl::Seconds(1));
  ASSERT_TRUE(d.has_value());
  clock_->advance(absl::Seconds(2));
  EXPECT_FALSE(d->ack(Disposition::kHandled));
  EXPECT_EQ(status(addr("inbox")).in_flight_count, 1u);  // overdue, waiting for its reclaim
  EXPECT_EQ(office_->recover(addr("inbox"))->reclaimed, 1u);
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);
}

TEST_P(MailConformance, M_ACK_2_SameMessageIdAtOneAddressIsTrackedPerCopy) {
  open();
  PostReceipt r1 = post_text(addr("inbox"), "first", "order-42");
  PostReceipt r2 = post_text(addr("inbox"), "second", "order-42");
  EXPECT_NE(r1.send_id, r2.send_id);
  std::optional<Delivery> d1 = fetch_manual(addr("inbox"));
  std::optional<Delivery> d2 = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d1 && d2);
  EXPECT_EQ(d1->letter().id, "order-42");
  EXPECT_EQ(d2->letter().id, "order-42");
  EXPECT_NE(d1->key(), d2->key());
  EXPECT_TRUE(d1->ack(Disposition::kUnhandled));
  EXPECT_TRUE(d2->ack(Disposition::kHandled));
  MailboxStatus s = status(addr("inbox"));
  EXPECT_EQ(s.unread_count, 1u);
  EXPECT_EQ(s.in_flight_count, 0u);
  std::optional<Delivery> back = fetch(addr("inbox"));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(text_of(back->letter()), "first");
}

TEST_P(MailConformance, M_ACK_2_SettlementIsNeverKeyedByTheMessageId) {
  open();
  if (!can(Capability::kSettleByKey)) GTEST_SKIP() << "provider cannot settle by key";
  post_text(addr("inbox"), "x", "order-42");
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  CopyKey by_name = d->key();
  by_name.send_id = "order-42";
  EXPECT_FALSE(took_effect(office_->settle(by_name, Disposition::kHandled)));
  CopyKey no_lease = d->key();
  no_lease.lease_id = 0;
  EXPECT_FALSE(took_effect(office_->settle(no_lease, Disposition::kHandled)));
  EXPECT_EQ(status(addr("inbox")).in_flight_count, 1u);
  EXPECT_TRUE(d->ack());
}

TEST_P(MailConformance, M_ACK_2_UndeclaredDispositionFailsBeforeAnythingChanges) {
  open();
  post_text(addr("inbox"), "x");
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  ASSERT_FALSE(provider().understands("bounce"));
  absl::StatusOr<bool> r = d->ack(std::string_view("bounce"));
  EXPECT_TRUE(IsUnsupportedCapability(r.status())) << r.status();
  EXPECT_FALSE(d->settled());
  if (can(Capability::kSettleByKey)) {
    EXPECT_TRUE(IsUnsupportedCapability(office_->settle(d->key(), "bounce").status()));
  }
  MailboxStatus s = status(addr("inbox"));
  EXPECT_EQ(s.in_flight_count, 1u);
  EXPECT_EQ(s.unread_count, 0u);
  absl::StatusOr<bool> named = d->ack(std::string_view("handled"));
  ASSERT_TRUE(named.ok());
  EXPECT_TRUE(*named);
}

TEST_P(MailConformance, M_ACK_2_DroppingAnUnsettledHandleReturnsTheCopy) {
  open();
  post_text(addr("inbox"), "x");
  post_text(addr("inbox"), "y");
  { std::optional<Delivery> d = fetch_manual(addr("inbox")); }  // RAII: back to the queue
  MailboxStatus s = status(addr("inbox"));
  EXPECT_EQ(s.unread_count, 2u);
  EXPECT_EQ(s.in_flight_count, 0u);
  {
    std::optional<Delivery> d = fetch_manual(addr("inbox"));
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(text_of(d->letter()), "x");
    d->detach();  // the lease runs its course instead
  }
  EXPECT_EQ(status(addr("inbox")).in_flight_count, 1u);
}

TEST_P(MailConformance, M_ACK_3_ExpiredLeaseIsReclaimedByTheNextManualFetch) {
  open();
  post_text(addr("inbox"), "x");
  std::optional<Delivery> d = fetch_manual(addr("inbox"), absl::Seconds(5));
  ASSERT_TRUE(d.has_value());
  clock_->advance(absl::Seconds(6));
  MailboxStatus s = status(addr("inbox"));
  EXPECT_EQ(s.in_flight_count, 1u);  // lazy: nothing has reclaimed it yet
  EXPECT_EQ(s.unread_count, 0u);
  std::optional<Delivery> again = fetch_manual(addr("inbox"));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(text_of(again->letter()), "x");
  EXPECT_EQ(again->letter().headers.get(kRound), 2u);
}

TEST_P(MailConformance, M_ACK_3_RecoverReclaimsOnlyExpiredLeasesAndIsIdempotent) {
  open();
  for (const char* t : {"short", "long", "forever"}) post_text(addr("inbox"), t);
  std::optional<Delivery> s1 = fetch_manual(addr("inbox"), absl::Seconds(5));
  std::optional<Delivery> s2 = fetch_manual(addr("inbox"), absl::Seconds(60));
  std::optional<Delivery> s3 = fetch_manual(addr("inbox"), absl::ZeroDuration());
  clock_->advance(absl::Seconds(10));
  absl::StatusOr<RecoverResult> r = office_->recover(addr("inbox"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->supported);
  EXPECT_EQ(r->reclaimed, 1u);
  EXPECT_EQ(office_->recover(addr("inbox"))->reclaimed, 0u);
  EXPECT_EQ(office_->recover().reclaimed, 0u);
  MailboxStatus s = status(addr("inbox"));
  EXPECT_EQ(s.unread_count, 1u);
  EXPECT_EQ(s.in_flight_count, 2u);
  EXPECT_TRUE(s2->ack());
  EXPECT_TRUE(s3->ack());
}

TEST_P(MailConformance, M_ACK_5_LocateIsReadOnlyAndSettlesByOurKey) {
  open();
  if (!can(Capability::kLocate) || !can(Capability::kSettleByKey)) GTEST_SKIP();
  post_text(addr("buyer"), "buyer's copy", "order-42");
  post_text(addr("seller"), "seller's copy", "order-42");
  std::optional<Delivery> d = fetch_manual(addr("buyer"));
  ASSERT_TRUE(d.has_value());
  MailboxStatus buyer = status(addr("buyer"));
  absl::StatusOr<std::vector<CopyInfo>> found = office_->locate("order-42");
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_EQ(found->size(), 2u);
  const CopyInfo* in_flight = nullptr;
  const CopyInfo* queued = nullptr;
  for (const CopyInfo& c : *found) {
    EXPECT_EQ(c.message_id, "order-42");
    (c.state == CopyState::kInFlight ? in_flight : queued) = &c;
  }
  ASSERT_TRUE(in_flight != nullptr && queued != nullptr);
  EXPECT_EQ(in_flight->key, d->key());
  EXPECT_EQ(queued->key.address, addr("seller"));
  EXPECT_EQ(queued->key.lease_id, 0u);
  MailboxStatus after = status(addr("buyer"));
  EXPECT_EQ(after.in_flight_count, buyer.in_flight_count);
  EXPECT_EQ(after.last_activity_time, buyer.last_activity_time);
  EXPECT_FALSE(
      took_effect(office_->settle(queued->key, Disposition::kHandled)));  // no lease: no effect
  EXPECT_TRUE(took_effect(office_->settle(in_flight->key, Disposition::kHandled)));
  EXPECT_FALSE(d->ack());  // the copy was settled through its key
  EXPECT_EQ(status(addr("seller")).unread_count, 1u);
}

}  // namespace
}  // namespace postal::mail::testing
