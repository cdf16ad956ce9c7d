// ActorRef: an actor can hold a reference (and a handle) to its own class.
#include <vector>

#include "gtest/gtest.h"
#include "postal/postal.h"
#include "support/count_msg.h"
#include "support/virtual_time_proc.h"

namespace {
using Count = postal::test_support::CountMsg;  // one number
}  // namespace

namespace postal::actors {
namespace {

// Names ActorRef<Countdown> and ActorHandle<Countdown> while Countdown is still incomplete.
struct Countdown : Actor, Handles<Count> {
  ActorRef<Countdown> me;
  ActorHandle<Countdown> helper;
  std::vector<int>* seen;
  explicit Countdown(std::vector<int>* s) : seen(s) {}
  absl::Status init(Context& cx) override {
    me = cx.self<Countdown>();
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Count c) override {
    seen->push_back(c.n);
    if (c.n > 0) me.send(cx, Count{c.n - 1});
    return absl::OkStatus();
  }
};

TEST(ActorRef, AnActorCanHoldARefToItsOwnClassAndLaterUsesStillCompile) {
  test_support::VirtualTimeProc t;
  std::vector<int> seen;
  ActorHandle<Countdown> c = *spawn<Countdown>(t.proc, "countdown", &seen);
  ActorRef<Countdown> ref = c.ref();  // a use after the class, in the same file
  ref.send(t.client, Count{3});
  t.run();
  EXPECT_EQ(seen, (std::vector<int>{3, 2, 1, 0}));
  // A local ref holds the mailbox, which holds the actor: the cycle ends when the actor stops.
  c.stop();
  t.run();
}

}  // namespace
}  // namespace postal::actors
