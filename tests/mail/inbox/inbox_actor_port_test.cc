// An actor port fronted by an inbox (M-INBOX-1): the same envelope delivered twice — same stable
// message id, as a resend keeps it — is one accepted record and one duplicate; an envelope
// without the id is refused rather than given a fresh one. In one proc: the resend is the test
// sending the message again with the same headers; crossing a restarted channel is not tested.
#include "postal/mail/inbox_actor_port.h"

#include <vector>

#include <gtest/gtest.h>

#include "inbox_test_support.h"
#include "postal/mail/inbox_errors.h"
#include "postal/postal.h"
#include "support/count_msg.h"
#include "support/virtual_time_proc.h"

namespace postal::mail::testing {
namespace {

using Count = test_support::CountMsg;

struct Projection : actors::Actor, actors::Handles<Count> {
  Projection(Inbox* inbox, std::vector<absl::StatusOr<AcceptReceipt>>* answers)
      : inbox(inbox), answers(answers) {}
  absl::Status handle(actors::Context& cx, Count c) override {
    const InboxPortBinding binding{.scope = InboxScope::tenant("t1"),
                                   .source = "orders-service",
                                   .consumer = "orders.projection.v1"};
    answers->push_back(accept_envelope(*inbox, cx, binding, "order.created", 1,
                                       absl::StrCat(R"({"orderId":)", c.n, "}")));
    return absl::OkStatus();
  }
  Inbox* inbox;
  std::vector<absl::StatusOr<AcceptReceipt>>* answers;
};

TEST_F(InboxTest, M_INBOX_1_AnActorPortFrontedByAnInboxAcceptsAResentEnvelopeOnce) {
  auto inbox = open_inbox();
  test_support::VirtualTimeProc t;
  std::vector<absl::StatusOr<AcceptReceipt>> answers;
  actors::ActorHandle<Projection> p =
      *actors::spawn<Projection>(t.proc, "projection", inbox.get(), &answers);
  p.ref().send(t.client, Count{7}, with_message_id("order-7-created"));
  p.ref().send(t.client, Count{7}, with_message_id("order-7-created"));  // the resend
  p.ref().send(t.client, Count{8}, with_message_id("order-8-created"));
  p.ref().send(t.client, Count{9});  // no stable id
  t.run();
  ASSERT_EQ(answers.size(), 4u);
  ASSERT_TRUE(answers[0].ok()) << answers[0].status();
  EXPECT_EQ(answers[0]->kind, AcceptReceipt::Kind::kAccepted);
  ASSERT_TRUE(answers[1].ok()) << answers[1].status();
  EXPECT_EQ(answers[1]->kind, AcceptReceipt::Kind::kDuplicate);
  EXPECT_EQ(answers[1]->id, answers[0]->id);
  EXPECT_EQ(answers[2]->kind, AcceptReceipt::Kind::kAccepted);
  EXPECT_TRUE(IsInvalidPayload(answers[3].status())) << answers[3].status();
  EXPECT_EQ(query_int(dir_ / "inbox.db", "SELECT count(*) FROM inbox"), 2);
  p.stop();
  t.run();
}

}  // namespace
}  // namespace postal::mail::testing
