// ActorRef: an actor can hold a reference (and a handle) to its own class; references between
// live actors never keep them past their proc.
#include <memory>
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

// Holds references to itself and to a peer, and tells the test when it is destroyed.
struct Pair;
struct Meet {
  ActorRef<Pair> peer;
  std::shared_ptr<int> token;  // not serialized: a local send keeps the value itself
  template <class A>
  void serialize(A& a) {
    a(peer);
  }
};

}  // namespace
}  // namespace postal::actors

POSTAL_MESSAGE(postal::actors::Meet, "test.actor_ref.Meet");

namespace postal::actors {
namespace {

struct Pair : Actor, Handles<Meet> {
  ActorRef<Pair> me;
  ActorRef<Pair> peer;
  std::shared_ptr<int> alive;
  explicit Pair(std::shared_ptr<int> a) : alive(std::move(a)) {}
  absl::Status init(Context& cx) override {
    me = cx.self<Pair>();
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Meet m) override {
    peer = std::move(m.peer);
    return absl::OkStatus();
  }
};

// A proc destroyed while its actors still run frees them, their state and their queues, although
// each holds its own mailbox (and its peer's) through a reference: without that, a workload torn
// down before its actors stopped leaked every one of them (Savina's Big under LeakSanitizer).
TEST(ActorRef, AProcDestroyedWithLiveActorsFreesThemThoughTheyReferenceEachOther) {
  auto a_alive = std::make_shared<int>(0);
  auto b_alive = std::make_shared<int>(0);
  auto queued = std::make_shared<int>(0);
  std::weak_ptr<int> a_gone = a_alive, b_gone = b_alive, queued_gone = queued;
  {
    auto t = std::make_unique<test_support::VirtualTimeProc>();
    ActorRef<Pair> a = spawn<Pair>(t->proc, "a", std::move(a_alive))->ref();
    ActorRef<Pair> b = spawn<Pair>(t->proc, "b", std::move(b_alive))->ref();
    a.send(t->client, Meet{b, nullptr});
    b.send(t->client, Meet{a, nullptr});
    t->run();
    // One more, never handled: it waits in b's queue with a reference to b itself.
    b.send(t->client, Meet{b, std::move(queued)});
    ASSERT_FALSE(a_gone.expired());
    ASSERT_FALSE(queued_gone.expired());  // the local send kept the token, so its end is seen
    a = {};
    b = {};
    t.reset();
  }
  EXPECT_TRUE(a_gone.expired()) << "actor a outlived its proc";
  EXPECT_TRUE(b_gone.expired()) << "actor b outlived its proc";
  EXPECT_TRUE(queued_gone.expired()) << "a queued envelope outlived its proc";
}

}  // namespace
}  // namespace postal::actors
