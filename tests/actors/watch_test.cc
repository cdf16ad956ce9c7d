// Watches, local part (R-SUP-2): exactly one Down when a watched actor stops or fails, at once
// for one already gone, none after unwatch or for a restart.
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "postal/postal.h"
#include "support/virtual_time_proc.h"

namespace {

struct WatchIt {
  postal::runtime::ActorAddr who;
  template <class A>
  void serialize(A& a) {
    a(who);
  }
};
struct UnwatchIt {
  postal::runtime::ActorAddr who;
  template <class A>
  void serialize(A& a) {
    a(who);
  }
};
struct Poke {
  bool fail = false;
  template <class A>
  void serialize(A& a) {
    a(fail);
  }
};

}  // namespace

POSTAL_MESSAGE(WatchIt, "test.watch.WatchIt");
POSTAL_MESSAGE(UnwatchIt, "test.watch.UnwatchIt");
POSTAL_MESSAGE(Poke, "test.watch.Poke");

namespace postal::actors {
namespace {

using test_support::VirtualTimeProc;

struct Seen {
  std::vector<Down> downs;
  std::vector<absl::Status> watched;
  std::vector<bool> unwatched;
};

struct Watcher : Actor, Handles<WatchIt, UnwatchIt> {
  Seen* seen;
  explicit Watcher(Seen* s) : seen(s) {}
  absl::Status handle(Context& cx, WatchIt w) override {
    seen->watched.push_back(cx.watch(w.who));
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, UnwatchIt u) override {
    seen->unwatched.push_back(cx.unwatch(u.who));
    return absl::OkStatus();
  }
  absl::Status on_down(Context&, const Down& d) override {
    seen->downs.push_back(d);
    return absl::OkStatus();
  }
};

// Forwards every Down's address to a client port (the threaded test reads them there).
struct Relay : Actor, Handles<WatchIt> {
  PortRef<WatchIt> downs;
  explicit Relay(PortRef<WatchIt> d) : downs(std::move(d)) {}
  absl::Status handle(Context& cx, WatchIt w) override { return cx.watch(w.who); }
  absl::Status on_down(Context& cx, const Down& d) override {
    downs.send(cx, WatchIt{d.who});
    return absl::OkStatus();
  }
};

struct Target : Actor, Handles<Poke> {
  absl::Status handle(Context&, Poke p) override {
    return p.fail ? absl::InternalError("target broke") : absl::OkStatus();
  }
};

struct Pair {
  Pair() {
    watcher = *spawn<Watcher>(t.proc, "watcher", &seen);
    target = *spawn<Target>(t.proc, "target");
    t.run();
  }
  void watch(const runtime::ActorAddr& who) {
    watcher.ref().send(t.client, WatchIt{who});
    t.run();
  }
  VirtualTimeProc t;
  Seen seen;
  ActorHandle<Watcher> watcher;
  ActorHandle<Target> target;
};

TEST(Watch, R_SUP_2_AWatcherGetsExactlyOneDownWhenTheWatchedActorStops) {
  Pair p;
  p.watch(p.target.addr());
  p.watch(p.target.addr());  // twice: still one Down
  EXPECT_TRUE(p.seen.downs.empty());
  p.target.stop("bye");
  p.t.run();
  ASSERT_EQ(p.seen.downs.size(), 1u);
  EXPECT_EQ(p.seen.downs[0].who, p.target.addr());
  EXPECT_EQ(p.seen.downs[0].reason, "bye");
  EXPECT_FALSE(p.seen.downs[0].failed);
  for (const absl::Status& s : p.seen.watched) EXPECT_TRUE(s.ok()) << s;
}

TEST(Watch, R_SUP_2_AFailureGivesDownWithTheError) {
  Pair p;
  p.watch(p.target.addr());
  p.target.ref().send(p.t.client, Poke{true});
  p.t.run();
  ASSERT_EQ(p.seen.downs.size(), 1u);
  EXPECT_TRUE(p.seen.downs[0].failed);
  EXPECT_NE(p.seen.downs[0].reason.find("target broke"), std::string::npos);
}

TEST(Watch, R_SUP_2_WatchingAStoppedOrUnknownActorGivesDownAtOnce) {
  Pair p;
  p.target.stop("long gone");
  p.t.run();
  p.watch(p.target.addr());
  runtime::ActorAddr nobody =
      p.t.proc.actor_addr(runtime::Uid::singleton(*runtime::Label::parse("nobody")));
  p.watch(nobody);
  ASSERT_EQ(p.seen.downs.size(), 2u);
  EXPECT_EQ(p.seen.downs[0].reason, "long gone");
  EXPECT_EQ(p.seen.downs[1].who, nobody);
  EXPECT_EQ(p.seen.downs[1].reason, "no such actor");
}

TEST(Watch, R_SUP_2_UnwatchWinsEvenOverADownAlreadyOnItsWay) {
  Pair p;
  p.watch(p.target.addr());
  p.target.stop();
  p.watcher.ref().send(p.t.client, UnwatchIt{p.target.addr()});
  // The target ends first and its Down queues behind the unwatch at the watcher.
  p.t.run();
  EXPECT_EQ(p.seen.unwatched, std::vector<bool>{true});
  EXPECT_TRUE(p.seen.downs.empty());
  p.watcher.ref().send(p.t.client, UnwatchIt{p.target.addr()});
  p.t.run();
  EXPECT_EQ(p.seen.unwatched, (std::vector<bool>{true, false}));
}

TEST(Watch, R_SUP_2_ARestartIsNotDownTheEndIs) {
  VirtualTimeProc t;
  Seen seen;
  auto watcher = *spawn<Watcher>(t.proc, "watcher", &seen);
  auto target = *spawn<Target>(
      t.proc,
      SpawnOptions{Supervision::one_for_one().with_backoff(absl::Seconds(1), absl::Seconds(1))},
      "target");
  t.run();
  watcher.ref().send(t.client, WatchIt{target.addr()});
  t.run();
  target.ref().send(t.client, Poke{true});
  t.run();
  t.advance(absl::Seconds(1));
  EXPECT_EQ(target.status().state, ActorState::kIdle);
  EXPECT_TRUE(seen.downs.empty());
  target.stop("done");
  t.run();
  ASSERT_EQ(seen.downs.size(), 1u);
  EXPECT_EQ(seen.downs[0].reason, "done");
}

TEST(Watch, R_SUP_2_AnEndedWatchersWatchesEndWithIt) {
  Pair p;
  p.watch(p.target.addr());
  p.watcher.stop();
  p.t.run();
  const runtime::ProcStatsSnapshot before = p.t.proc.stats();
  p.target.stop();
  p.t.run();
  EXPECT_EQ(p.t.proc.stats().posted, before.posted);  // no Down was even sent
  EXPECT_TRUE(p.seen.downs.empty());
}

TEST(Watch, R_SUP_2_WatchesRacingTheEndOnThreadsGiveExactlyOneDownEach) {
  test_support::ProcWithClient pc(runtime::ProcOptions::threads(2), "test");
  auto [port, downs] = runtime::open_port<WatchIt>(*pc.client);
  auto relay = *spawn<Relay>(pc.proc, "relay", port.bind());
  constexpr int kTargets = 100;
  std::vector<ActorHandle<Target>> targets;
  for (int i = 0; i < kTargets; ++i) {
    targets.push_back(*spawn<Target>(pc.proc, absl::StrCat("target-", i)));
  }
  std::thread stopper([&] {
    for (ActorHandle<Target>& t : targets) t.stop();
  });
  for (ActorHandle<Target>& t : targets) relay.ref().send(*pc.client, WatchIt{t.addr()});
  stopper.join();
  std::set<std::string> seen;
  for (int i = 0; i < kTargets; ++i) {
    absl::StatusOr<WatchIt> d = downs.recv(absl::Seconds(30));
    ASSERT_TRUE(d.ok()) << d.status() << " after " << i;
    EXPECT_TRUE(seen.insert(d->who.to_string()).second) << "two Downs for " << d->who.to_string();
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kTargets));
}

// A bare Proc has no postal-watch (a Node installs it: tests/routing/remote_watch_test.cc), so a
// remote watch is refused there, saying why; self and client watches are refused everywhere.
TEST(Watch, R_SUP_2_RemoteWatchesNeedTheWatchActorAndSelfOrClientWatchesAreRefused) {
  Pair p;
  runtime::Proc other;
  p.watch(other.actor_addr(runtime::Uid::singleton(*runtime::Label::parse("far"))));
  p.watch(p.watcher.addr());
  p.watch(p.t.client.self_addr());
  ASSERT_EQ(p.seen.watched.size(), 3u);
  EXPECT_EQ(p.seen.watched[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(p.seen.watched[0].message().find("postal-watch"), std::string::npos)
      << p.seen.watched[0];
  EXPECT_EQ(p.seen.watched[1].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.seen.watched[2].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(p.seen.downs.empty());
}

}  // namespace
}  // namespace postal::actors
