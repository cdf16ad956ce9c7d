// Supervision strategies (R-SUP-1): escalate, one-for-one and all-for-one restarts with a
// restart budget and exponential backoff, on a deterministic proc whose clock the test moves.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "postal/postal.h"
#include "support/count_msg.h"
#include "support/virtual_time_proc.h"

namespace {

using Tick = postal::test_support::CountMsg;  // one number
struct Crash {
  template <class A>
  void serialize(A&) {}
};
struct HowMany {  // replies with the number of inits so far
  using Reply = Tick;
  postal::OncePortRef<Tick> reply_to;
  template <class A>
  void serialize(A& a) {
    a(reply_to);
  }
};
struct OpenReplyPort {  // the worker opens a once port and leaves its ref in the shared log
  template <class A>
  void serialize(A&) {}
};

}  // namespace

POSTAL_MESSAGE(Crash, "test.sup.Crash");
POSTAL_MESSAGE(HowMany, "test.sup.HowMany");
POSTAL_MESSAGE(OpenReplyPort, "test.sup.OpenReplyPort");

namespace postal::actors {
namespace {

using test_support::VirtualTimeProc;

struct Leaf : Actor, Handles<Tick> {
  absl::Status handle(Context&, Tick) override { return absl::OkStatus(); }
};

// What every incarnation of a worker leaves behind, shared by the test.
struct Log {
  int inits = 0;
  std::vector<int> seen;  // Ticks handled, by every incarnation
  std::vector<std::string> stops;
  runtime::OncePortRef<Tick> reply_ref;
  std::shared_ptr<runtime::OnceReceiver<Tick>> reply_rx;
  ActorHandle<Leaf> leaf;
};

struct Worker : Actor, Handles<Tick, Crash, HowMany, OpenReplyPort> {
  Log* log;
  bool with_leaf;
  explicit Worker(Log* l, bool leaf = false) : log(l), with_leaf(leaf) {}
  absl::Status init(Context& cx) override {
    ++log->inits;
    if (with_leaf) log->leaf = *cx.spawn<Leaf>("leaf");
    return absl::OkStatus();
  }
  void on_stop(Context&, const ActorStatus& st) override { log->stops.push_back(st.to_string()); }
  absl::Status handle(Context&, Tick t) override {
    log->seen.push_back(t.n);
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Crash) override { return absl::InternalError("crashed"); }
  absl::Status handle(Context& cx, HowMany m) override {
    m.reply_to.send(cx, Tick{log->inits});
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, OpenReplyPort) override {
    auto [ref, rx] = runtime::open_once_port<Tick>(cx);
    log->reply_ref = ref;
    log->reply_rx = std::make_shared<runtime::OnceReceiver<Tick>>(std::move(rx));
    return absl::OkStatus();
  }
};

// Spawns one worker per policy in init; records what it hears of them.
struct Supervisor : Actor, Handles<Tick> {
  std::vector<Supervision> policies;
  std::vector<Log>* logs;
  std::vector<ActorHandle<Worker>>* workers;
  std::vector<std::string>* events;
  Supervisor(std::vector<Supervision> p, std::vector<Log>* l, std::vector<ActorHandle<Worker>>* w,
             std::vector<std::string>* e)
      : policies(std::move(p)), logs(l), workers(w), events(e) {}
  absl::Status init(Context& cx) override {
    for (size_t i = 0; i < policies.size(); ++i) {
      absl::StatusOr<ActorHandle<Worker>> w =
          cx.spawn<Worker>(SpawnOptions{policies[i]}, "worker", &(*logs)[i], i == 0);
      if (!w.ok()) return w.status();
      workers->push_back(*w);
    }
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Tick) override { return absl::OkStatus(); }
  absl::Status on_child_restarted(Context&, const SupervisionEvent& e) override {
    events->push_back(absl::StrCat("restarted#", e.restarts, ": ", e.error));
    return absl::OkStatus();
  }
  absl::Status on_child_failed(Context& cx, const SupervisionEvent& e) override {
    events->push_back(absl::StrCat("failed: ", e.error));
    return Actor::on_child_failed(cx, e);
  }
};

struct Tree {
  explicit Tree(std::vector<Supervision> policies) : logs(policies.size()) {
    parent = *spawn<Supervisor>(t.proc, "parent", std::move(policies), &logs, &workers, &events);
    t.run();
  }
  VirtualTimeProc t;
  std::vector<Log> logs;
  std::vector<ActorHandle<Worker>> workers;
  std::vector<std::string> events;
  ActorHandle<Supervisor> parent;
};

const Supervision kOneForOne =
    Supervision::one_for_one(3, absl::Minutes(1)).with_backoff(absl::Seconds(1), absl::Seconds(8));

TEST(Supervision, R_SUP_1_OneForOneRestartKeepsTheAddress) {
  Tree tree({kOneForOne});
  ActorHandle<Worker>& w = tree.workers[0];
  const runtime::ActorAddr before = w.addr();
  ActorRef<Worker> old_ref = w.ref();
  old_ref.send(tree.t.client, Crash{});
  tree.t.run();
  EXPECT_EQ(w.status().state, ActorState::kRestarting);
  EXPECT_EQ(tree.logs[0].stops, (std::vector<std::string>{"failed(INTERNAL: crashed)"}));
  ASSERT_EQ(tree.events.size(), 1u);
  EXPECT_EQ(tree.events[0], "restarted#1: INTERNAL: crashed");
  tree.t.advance(absl::Seconds(1));
  EXPECT_EQ(tree.logs[0].inits, 2);
  EXPECT_EQ(w.status().state, ActorState::kIdle);
  EXPECT_EQ(w.addr(), before);
  // A reference taken before the restart reaches the new incarnation.
  old_ref.send(tree.t.client, Tick{7});
  tree.t.run();
  EXPECT_EQ(tree.logs[0].seen, std::vector<int>{7});
  EXPECT_EQ(tree.parent.status().state, ActorState::kIdle);
}

TEST(Supervision, R_SUP_1_MessagesDuringTheBackoffWaitForTheNewIncarnationInOrder) {
  Tree tree({kOneForOne});
  ActorHandle<Worker>& w = tree.workers[0];
  w.ref().send(tree.t.client, Crash{});
  w.ref().send(tree.t.client, Tick{1});
  tree.t.run();
  w.ref().send(tree.t.client, Tick{2});
  tree.t.run();
  EXPECT_TRUE(tree.logs[0].seen.empty());
  EXPECT_EQ(w.status().state, ActorState::kRestarting);
  tree.t.advance(absl::Milliseconds(999));
  EXPECT_TRUE(tree.logs[0].seen.empty());  // still backing off
  tree.t.advance(absl::Milliseconds(1));
  EXPECT_EQ(tree.logs[0].seen, (std::vector<int>{1, 2}));
  // Nothing came back to the sender: the messages were queued, not returned.
  EXPECT_EQ(tree.t.client.next_undeliverable(absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(Supervision, R_SUP_1_BackoffDoublesAndPastTheLimitTheFailureEscalates) {
  Tree tree({Supervision::one_for_one(2, absl::Minutes(1))
                 .with_backoff(absl::Seconds(1), absl::Seconds(8))});
  ActorHandle<Worker>& w = tree.workers[0];
  w.ref().send(tree.t.client, Crash{});
  tree.t.run();
  tree.t.advance(absl::Seconds(1));  // first restart: 1 s
  ASSERT_EQ(tree.logs[0].inits, 2);
  w.ref().send(tree.t.client, Crash{});
  tree.t.run();
  tree.t.advance(absl::Seconds(1));
  EXPECT_EQ(tree.logs[0].inits, 2);  // second restart: 2 s
  tree.t.advance(absl::Seconds(1));
  EXPECT_EQ(tree.logs[0].inits, 3);
  w.ref().send(tree.t.client, Crash{});  // the third failure within the minute
  tree.t.run();
  EXPECT_EQ(w.status().state, ActorState::kFailed);
  EXPECT_NE(w.status().reason.find("restart limit reached: 2 restarts"), std::string::npos)
      << w.status().reason;
  ASSERT_EQ(tree.events.size(), 3u);
  EXPECT_EQ(tree.events[2].rfind("failed: ", 0), 0u);
  EXPECT_EQ(tree.parent.status().state, ActorState::kFailed);  // escalated by default
}

TEST(Supervision, R_SUP_1_RestartsOutsideTheWindowDoNotCount) {
  Tree tree({Supervision::one_for_one(1, absl::Minutes(1))
                 .with_backoff(absl::Seconds(1), absl::Seconds(1))});
  ActorHandle<Worker>& w = tree.workers[0];
  for (int i = 0; i < 3; ++i) {
    w.ref().send(tree.t.client, Crash{});
    tree.t.run();
    tree.t.advance(absl::Minutes(1));
    EXPECT_EQ(w.status().state, ActorState::kIdle) << i;
  }
  EXPECT_EQ(tree.logs[0].inits, 4);
}

TEST(Supervision, R_SUP_1_EscalateIsTheDefault) {
  Tree tree({Supervision{}});
  tree.workers[0].ref().send(tree.t.client, Crash{});
  tree.t.run();
  EXPECT_EQ(tree.workers[0].status().state, ActorState::kFailed);
  EXPECT_EQ(tree.parent.status().state, ActorState::kFailed);
  EXPECT_EQ(tree.logs[0].inits, 1);
}

TEST(Supervision, R_SUP_1_AllForOneRestartsTheAllForOneSiblingsOnly) {
  const Supervision all = Supervision::all_for_one(3, absl::Minutes(1))
                              .with_backoff(absl::Seconds(1), absl::Seconds(1));
  Tree tree({all, all, kOneForOne});
  tree.workers[1].ref().send(tree.t.client, Crash{});
  tree.t.run();
  // The sibling restarts at once (it did not fail); the failed one after its backoff.
  EXPECT_EQ(tree.logs[0].inits, 2);
  EXPECT_EQ(tree.logs[1].inits, 1);
  EXPECT_EQ(tree.logs[2].inits, 1);
  EXPECT_EQ(tree.logs[0].stops.size(), 1u);
  tree.t.advance(absl::Seconds(1));
  EXPECT_EQ(tree.logs[1].inits, 2);
  EXPECT_EQ(tree.logs[2].inits, 1);  // one-for-one: untouched
  for (ActorHandle<Worker>& w : tree.workers) EXPECT_EQ(w.status().state, ActorState::kIdle);
  EXPECT_EQ(tree.parent.status().state, ActorState::kIdle);
}

TEST(Supervision, R_SUP_1_AReplyToTheOldIncarnationsOncePortIsPortGone) {
  Tree tree({kOneForOne});
  ActorHandle<Worker>& w = tree.workers[0];
  w.ref().send(tree.t.client, OpenReplyPort{});
  w.ref().send(tree.t.client, Crash{});
  tree.t.run();
  tree.t.advance(absl::Seconds(1));
  ASSERT_EQ(tree.logs[0].inits, 2);
  ASSERT_TRUE(tree.logs[0].reply_ref.valid());
  // The receiver still exists (the test holds it), yet the reply must not be delivered.
  tree.logs[0].reply_ref.send(tree.t.client, Tick{42});
  tree.t.run();
  EXPECT_FALSE(tree.logs[0].reply_rx->ready());
  absl::StatusOr<runtime::EnvelopePtr> back =
      tree.t.client.next_undeliverable(absl::ZeroDuration());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->root_failure()->kind, runtime::FailureKind::kPortGone);
}

TEST(Supervision, R_SUP_1_TheFailedIncarnationsChildrenStopAndInitSpawnsAnew) {
  Tree tree({kOneForOne});
  ActorHandle<Leaf> first_leaf = tree.logs[0].leaf;
  tree.workers[0].ref().send(tree.t.client, Crash{});
  tree.t.run();
  tree.t.advance(absl::Seconds(1));
  EXPECT_EQ(first_leaf.status().state, ActorState::kStopped);
  EXPECT_EQ(first_leaf.status().reason, "parent restarting");
  EXPECT_FALSE(tree.logs[0].leaf.addr() == first_leaf.addr());
  EXPECT_EQ(tree.logs[0].leaf.status().state, ActorState::kIdle);
}

TEST(Supervision, R_SUP_1_AStopDuringTheBackoffDrainsWhatWasAdmittedAndStops) {
  Tree tree({kOneForOne});
  ActorHandle<Worker>& w = tree.workers[0];
  w.ref().send(tree.t.client, Crash{});
  w.ref().send(tree.t.client, Tick{5});
  tree.t.run();
  ASSERT_EQ(w.status().state, ActorState::kRestarting);
  w.stop("enough");
  tree.t.run();  // no clock move: the stop ends the backoff
  EXPECT_EQ(tree.logs[0].seen, std::vector<int>{5});
  EXPECT_EQ(w.status().state, ActorState::kStopped);
  EXPECT_EQ(w.status().reason, "enough");
}

TEST(Supervision, R_SUP_1_ARootActorMayRestartOneForOne) {
  VirtualTimeProc t;
  Log log;
  auto w = *spawn<Worker>(t.proc, SpawnOptions{kOneForOne}, "root-worker", &log);
  w.ref().send(t.client, Crash{});
  t.run();
  t.advance(absl::Seconds(1));
  EXPECT_EQ(log.inits, 2);
  EXPECT_EQ(w.status().state, ActorState::kIdle);
}

TEST(Supervision, R_SUP_1_OnAThreadedProcTheBackoffRunsOnRealTime) {
  test_support::ProcWithClient pc(runtime::ProcOptions::threads(2), "test");
  Log log;
  auto w = *spawn<Worker>(pc.proc,
                          SpawnOptions{Supervision::one_for_one().with_backoff(
                              absl::Milliseconds(5), absl::Milliseconds(5))},
                          "worker", &log);
  w.ref().send(*pc.client, Crash{});
  // Queued behind the crash, answered by the new incarnation once the backoff timer fired.
  absl::StatusOr<Tick> inits = w.ref().request(*pc.client, HowMany{}, absl::Seconds(10));
  ASSERT_TRUE(inits.ok()) << inits.status();
  EXPECT_EQ(inits->n, 2);
}

TEST(Supervision, R_SUP_1_RestartsRacingSendsAndAStopOnThreadsNeitherLoseNorHang) {
  test_support::ProcWithClient pc(runtime::ProcOptions::threads(2), "test");
  Log log;  // written by the worker only, read after it ended
  auto w =
      *spawn<Worker>(pc.proc,
                     SpawnOptions{Supervision::one_for_one(1000, absl::Minutes(1))
                                      .with_backoff(absl::ZeroDuration(), absl::ZeroDuration())},
                     "worker", &log);
  constexpr int kRounds = 200;
  std::thread crasher([&] {
    for (int i = 0; i < kRounds; ++i) w.ref().send(*pc.client, Crash{});
  });
  for (int i = 0; i < kRounds; ++i) w.ref().send(*pc.client, Tick{i});
  crasher.join();
  absl::StatusOr<Tick> inits = w.ref().request(*pc.client, HowMany{}, absl::Seconds(30));
  ASSERT_TRUE(inits.ok()) << inits.status();
  w.stop("done");
  absl::StatusOr<ActorStatus> end = w.wait(absl::Seconds(30));
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->state, ActorState::kStopped);
  EXPECT_EQ(log.inits, kRounds + 1);  // every crash restarted it, none was lost
  EXPECT_EQ(log.seen.size(), static_cast<size_t>(kRounds));  // every Tick reached an incarnation
}

// Spawns a detached child in init and fails on Crash.
struct Launcher : Actor, Handles<Crash> {
  Log* log;
  ActorHandle<Worker>* child;
  Launcher(Log* l, ActorHandle<Worker>* c) : log(l), child(c) {}
  absl::Status init(Context& cx) override {
    *child = *cx.spawn<Worker>(SpawnOptions::detach(), "detached", log);
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Crash) override { return absl::InternalError("launcher down"); }
};

TEST(Supervision, R_ACT_3_ADetachedChildOutlivesItsParentAndReportsToNobody) {
  VirtualTimeProc t;
  Log log;
  ActorHandle<Worker> child;
  auto launcher = *spawn<Launcher>(t.proc, "launcher", &log, &child);
  t.run();
  launcher.ref().send(t.client, Crash{});
  t.run();
  EXPECT_EQ(launcher.status().state, ActorState::kFailed);
  EXPECT_EQ(child.status().state, ActorState::kIdle);  // not stopped with its parent
  child.ref().send(t.client, Crash{});
  t.run();
  EXPECT_EQ(child.status().state, ActorState::kFailed);  // and its failure is only logged
  EXPECT_NE(launcher.status().reason.find("launcher down"), std::string::npos);
}

TEST(Supervision, R_SUP_1_RefusedWhenItCannotBeHonoured) {
  VirtualTimeProc t;
  struct Owning : Actor, Handles<Tick> {
    explicit Owning(std::unique_ptr<int>) {}
    absl::Status handle(Context&, Tick) override { return absl::OkStatus(); }
  };
  auto moved = spawn<Owning>(t.proc, SpawnOptions{kOneForOne}, "owning", std::make_unique<int>(1));
  EXPECT_EQ(moved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(moved.status().message().find("copyable"), std::string::npos);
  Log log;
  auto root = spawn<Worker>(t.proc, SpawnOptions{Supervision::all_for_one()}, "root", &log);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  // Without a restart policy move-only arguments are fine.
  EXPECT_TRUE(spawn<Owning>(t.proc, "owning", std::make_unique<int>(1)).ok());
}

}  // namespace
}  // namespace postal::actors
