// The soak's ledger (tools/soak_ledger.h): every id ends in exactly one state, a second reply or
// return is a duplicate, a reply to a payload returned as not delivered is a contradiction, and
// what was open when its proc died is lost with it, not uncounted. The ledger is what the soak's
// verdict rests on, so its detectors are shown to fire here, where a duplicate can be made.
#include "soak_ledger.h"

#include <gtest/gtest.h>

#include "postal/routing/return_kinds.h"

namespace postal::tools {
namespace {

using runtime::DeliveryFailure;
using runtime::TransportReason;

DeliveryFailure transport(TransportReason r, std::string detail = {}) {
  return DeliveryFailure::transport_failure("echo.beta@ipc://@x", r, std::move(detail));
}
// What a channel returns for an envelope it wrote and never saw acked.
DeliveryFailure written_unacked(TransportReason r, std::string detail = {}) {
  DeliveryFailure f = transport(r, std::move(detail));
  f.maybe_delivered = true;
  return f;
}

TEST(SoakLedger, EveryIdEndsInExactlyOneState) {
  SoakLedger l;
  const absl::Time t0 = absl::Now();
  const uint64_t delivered = l.sent(0, 0), returned = l.sent(0, 0), possibly = l.sent(0, 0);
  const uint64_t lost = l.sent(1, 0), silent = l.sent(0, 0);
  l.replied(delivered);
  l.returned(returned, transport(TransportReason::kDialFailed));
  l.returned(possibly, written_unacked(TransportReason::kAckTimedOut));
  l.replied(possibly);  // written, never acked — and it was delivered after all
  EXPECT_EQ(l.in_flight(1), 1u);
  l.proc_died(1, 0, t0);
  l.expire(t0 + absl::Seconds(1), absl::Seconds(2));
  EXPECT_EQ(l.in_flight(1), 1u) << "lost only after the grace";
  l.expire(t0 + absl::Seconds(3), absl::Seconds(2));
  EXPECT_EQ(l.in_flight(1), 0u);
  (void)lost;
  (void)silent;

  const SoakCounts c = l.counts(true);
  EXPECT_EQ(c.sent, 5u);
  EXPECT_EQ(c.delivered, 1u);
  EXPECT_EQ(c.returned, 1u);
  EXPECT_EQ(c.returned_by_kind.at("dial failed"), 1u);
  EXPECT_EQ(c.possibly_delivered, 1u);
  EXPECT_EQ(c.possibly_then_delivered, 1u);
  EXPECT_EQ(c.lost_with_proc, 1u);
  EXPECT_EQ(c.uncounted, 1u) << "open at the end, its proc never died: a silent loss";
  EXPECT_TRUE(c.balanced());
  EXPECT_FALSE(c.pass());
}

TEST(SoakLedger, ASecondReplyOrReturnIsADuplicate) {
  SoakLedger l;
  const uint64_t a = l.sent(0, 0), b = l.sent(0, 0);
  l.replied(a);
  l.replied(a);
  l.returned(b, transport(TransportReason::kDialFailed));
  l.returned(b, transport(TransportReason::kDialFailed));
  const SoakCounts c = l.counts(true);
  EXPECT_EQ(c.duplicate_replies, 1u);
  EXPECT_EQ(c.duplicate_returns, 1u);
  EXPECT_EQ(c.delivered, 1u);
  EXPECT_EQ(c.returned, 1u);
  EXPECT_FALSE(c.pass());
}

TEST(SoakLedger, AReplyToAPayloadReturnedAsNotDeliveredIsAContradiction) {
  SoakLedger l;
  const uint64_t a = l.sent(0, 0), b = l.sent(0, 0);
  l.returned(a, transport(TransportReason::kChannelClosed, "the server said goodbye: bye "
                                                           "(the server stopped)"));
  l.replied(a);
  l.replied(b);
  l.returned(b, DeliveryFailure::invalid_reference("x", runtime::InvalidReason::kActorNotExist));
  const SoakCounts c = l.counts(true);
  EXPECT_EQ(c.contradicted, 2u);
  EXPECT_FALSE(c.pass());
}

TEST(SoakLedger, ALateAnswerMovesALostIdToItsTrueState) {
  SoakLedger l;
  const absl::Time t0 = absl::Now();
  const uint64_t a = l.sent(0, 0), b = l.sent(0, 0);
  l.proc_died(0, 0, t0);
  l.expire(t0 + absl::Seconds(10), absl::Seconds(1));
  l.replied(a);
  l.returned(b, written_unacked(TransportReason::kChannelClosed, "session_unknown"));
  const SoakCounts c = l.counts(true);
  EXPECT_EQ(c.late, 2u);
  EXPECT_EQ(c.delivered, 1u);
  EXPECT_EQ(c.possibly_delivered, 1u);
  EXPECT_EQ(c.lost_with_proc, 0u);
  EXPECT_TRUE(c.pass());
}

TEST(SoakLedger, AnIdOpenWhenItsProcDiedIsLostNotUncountedAtTheEnd) {
  SoakLedger l;
  const uint64_t a = l.sent(0, 3);
  l.proc_died(0, 3, absl::Now());
  (void)a;
  const SoakCounts c = l.counts(true);
  EXPECT_EQ(c.lost_with_proc, 1u);
  EXPECT_EQ(c.uncounted, 0u);
  EXPECT_TRUE(c.pass());
}

// Through a relay, a payload has two envelopes, one per hop, and each may come back once: the
// first hop's "possibly delivered" return and the relay's report of its copy are not a
// duplicate; an exact first-hop return followed by the relay's is a contradiction.
TEST(SoakLedger, EachHopOfARelayedPayloadReturnsAtMostOnce) {
  SoakLedger l;
  const uint64_t a = l.sent(0, 0, 1), b = l.sent(0, 0, 1), c = l.sent(0, 0, 1);
  l.returned(a, written_unacked(TransportReason::kAckTimedOut));                 // host → relay
  l.returned(a, transport(TransportReason::kDialFailed), /*relayed=*/true);      // relay → echo
  l.returned(b, transport(TransportReason::kDialFailed));
  l.returned(b, written_unacked(TransportReason::kAckTimedOut), /*relayed=*/true);
  l.returned(c, transport(TransportReason::kDialFailed), /*relayed=*/true);
  l.returned(c, transport(TransportReason::kDialFailed), /*relayed=*/true);
  const SoakCounts n = l.counts(true);
  EXPECT_EQ(n.returned, 2u) << "a: its relay's copy failed exactly; c: once";
  EXPECT_EQ(n.contradicted, 1u) << "b";
  EXPECT_EQ(n.duplicate_returns, 1u) << "c";
  EXPECT_TRUE(n.balanced());
}

// A relay's proc dying leaves what went through it open: lost with that proc.
TEST(SoakLedger, WhatWentThroughADeadRelayIsLostWithIt) {
  SoakLedger l;
  const uint64_t a = l.sent(0, 0, 2);
  l.proc_died(2, 0, absl::Now());
  (void)a;
  EXPECT_EQ(l.counts(true).lost_with_proc, 1u);
}

// What counts as "possibly delivered" (routing/return_kinds.h): the typed flag, whatever the text.
TEST(ReturnKinds, OnlyWrittenNeverAckedIsPossiblyDelivered) {
  using routing::possibly_delivered;
  EXPECT_TRUE(possibly_delivered(written_unacked(TransportReason::kAckTimedOut)));
  EXPECT_TRUE(possibly_delivered(written_unacked(TransportReason::kChannelClosed)));
  EXPECT_FALSE(possibly_delivered(transport(TransportReason::kAckTimedOut)))
      << "timed out before it was ever written";
  EXPECT_FALSE(possibly_delivered(transport(
      TransportReason::kChannelClosed, "it may or may not have been delivered")))
      << "the text does not decide";
  EXPECT_FALSE(possibly_delivered(transport(TransportReason::kDialFailed)));
  EXPECT_FALSE(possibly_delivered(
      DeliveryFailure::invalid_reference("x", runtime::InvalidReason::kActorNotExist)));
  EXPECT_EQ(routing::return_kind(transport(TransportReason::kAckTimedOut)), "ack timed out");
  EXPECT_EQ(routing::return_kind(
                DeliveryFailure::invalid_reference("x", runtime::InvalidReason::kActorNotExist)),
            "actor does not exist");
}

}  // namespace
}  // namespace postal::tools
