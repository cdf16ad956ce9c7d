// Stash (R-ACT-9): messages an actor is not ready for are put aside and handled after
// unstash_all, before anything newer, in order; they survive a restart and go back to their
// senders when the actor ends. Selective receive (receive_only / receive_all) puts aside every
// handler message of another type without running its handler.
#include <vector>

#include "gtest/gtest.h"
#include "postal/postal.h"
#include "support/count_msg.h"
#include "support/virtual_time_proc.h"

namespace {
using Job = postal::test_support::CountMsg;  // one number
struct Open {
  bool crash = false;
  template <class A>
  void serialize(A& a) {
    a(crash);
  }
};
struct Resume {
  template <class A>
  void serialize(A&) {}
};
struct Ask {  // a request whose reply is a Job
  using Reply = Job;
  postal::OncePortRef<Job> reply_to;
  template <class A>
  void serialize(A& a) {
    a(reply_to);
  }
};
struct Wait {  // start receiving only Resume (and ask `server`, when set, in the meantime)
  postal::PortRef<Ask> server;
  bool crash_after = false;
  template <class A>
  void serialize(A& a) {
    a(server, crash_after);
  }
};
}  // namespace

POSTAL_MESSAGE(Open, "test.stash.Open");
POSTAL_MESSAGE(Wait, "test.stash.Wait");
POSTAL_MESSAGE(Resume, "test.stash.Resume");
POSTAL_MESSAGE(Ask, "test.stash.Ask");

namespace postal::actors {
namespace {

using test_support::VirtualTimeProc;

struct Log {
  std::vector<int> done;
  std::vector<absl::Status> misuse;
  size_t stashed_when_opened = 0;
  uint64_t queued_behind_when_opened = 0;
};

// Handles Jobs only once opened; until then it stashes them.
struct Gate : Actor, Handles<Job, Open> {
  Log* log;
  bool open = false;
  explicit Gate(Log* l) : log(l) {}
  absl::Status handle(Context& cx, Job j) override {
    if (!open) return cx.stash(std::move(j));
    log->done.push_back(j.n);
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Open o) override {
    if (o.crash) return absl::InternalError("crash while closed");
    log->misuse.push_back(cx.stash(Job{}));  // not the message being handled
    log->stashed_when_opened = cx.stashed();
    log->queued_behind_when_opened = cx.queued_behind();
    open = true;
    cx.unstash_all();
    return absl::OkStatus();
  }
};

TEST(Stash, R_ACT_9_StashedMessagesAreHandledAfterUnstashInOrderBeforeNewerOnes) {
  VirtualTimeProc t;
  Log log;
  auto g = *spawn<Gate>(t.proc, "gate", &log);
  for (int n = 1; n <= 3; ++n) g.ref().send(t.client, Job{n});
  t.run();
  EXPECT_TRUE(log.done.empty());
  g.ref().send(t.client, Open{});
  g.ref().send(t.client, Job{4});
  t.run();
  EXPECT_EQ(log.stashed_when_opened, 3u);
  EXPECT_EQ(log.done, (std::vector<int>{1, 2, 3, 4}));
  ASSERT_EQ(log.misuse.size(), 1u);
  EXPECT_EQ(log.misuse[0].code(), absl::StatusCode::kInvalidArgument);
}

// Context::queued_behind(): the handler messages waiting behind the one being handled — the
// stashed ones are not waiting for a handler, and the one being handled is not behind itself.
TEST(Stash, R_ACT_9_QueuedBehindCountsWhatWaitsButNeitherTheStashNorTheCurrentMessage) {
  VirtualTimeProc t;
  Log log;
  auto g = *spawn<Gate>(t.proc, "gate", &log);
  for (int n = 1; n <= 3; ++n) g.ref().send(t.client, Job{n});
  t.run();
  g.ref().send(t.client, Open{});
  g.ref().send(t.client, Job{4});
  g.ref().send(t.client, Job{5});
  t.run();
  EXPECT_EQ(log.stashed_when_opened, 3u);
  EXPECT_EQ(log.queued_behind_when_opened, 2u);
  EXPECT_EQ(log.done, (std::vector<int>{1, 2, 3, 4, 5}));
}

// Opens after `needed` Opens; each Open unstashes everything, so a Job is replayed and stashed
// again several times (a stash re-stashed in place keeps its message).
struct SlowGate : Actor, Handles<Job, Open> {
  Log* log;
  int needed;
  SlowGate(Log* l, int n) : log(l), needed(n) {}
  absl::Status handle(Context& cx, Job j) override {
    if (needed > 0) return cx.stash(std::move(j));
    log->done.push_back(j.n);
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Open) override {
    --needed;
    cx.unstash_all();
    return absl::OkStatus();
  }
};

TEST(Stash, R_ACT_9_AMessageStashedAgainOnEveryReplayKeepsItsContentAndOrder) {
  VirtualTimeProc t;
  Log log;
  auto g = *spawn<SlowGate>(t.proc, "gate", &log, 3);
  for (int n = 1; n <= 5; ++n) g.ref().send(t.client, Job{n * 11});
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(log.done.empty());
    g.ref().send(t.client, Open{});
    t.run();
  }
  EXPECT_EQ(log.done, (std::vector<int>{11, 22, 33, 44, 55}));
}

TEST(Stash, R_ACT_9_ARestartUnstashesForTheNewIncarnation) {
  VirtualTimeProc t;
  Log log;
  auto g = *spawn<Gate>(
      t.proc,
      SpawnOptions{Supervision::one_for_one().with_backoff(absl::Seconds(1), absl::Seconds(1))},
      "gate", &log);
  g.ref().send(t.client, Job{1});
  g.ref().send(t.client, Open{true});
  t.run();
  t.advance(absl::Seconds(1));
  EXPECT_TRUE(log.done.empty());  // the new incarnation is closed too: stashed again
  g.ref().send(t.client, Open{});
  t.run();
  EXPECT_EQ(log.done, std::vector<int>{1});
}

TEST(Stash, R_ACT_9_WhenTheActorEndsStashedMessagesGoBackToTheirSenders) {
  VirtualTimeProc t;
  Log log;
  auto g = *spawn<Gate>(t.proc, "gate", &log);
  g.ref().send(t.client, Job{1});
  t.run();
  g.stop("closing time");
  t.run();
  EXPECT_EQ(g.status().state, ActorState::kStopped);
  absl::StatusOr<runtime::EnvelopePtr> back = t.client.next_undeliverable(absl::ZeroDuration());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->root_failure()->invalid, runtime::InvalidReason::kActorStopped);
  EXPECT_EQ((*back)->data().get<Job>()->n, 1);
}

// --- Selective receive -------------------------------------------------------------------------

struct Answerer : Actor, Handles<Ask> {
  absl::Status handle(Context& cx, Ask a) override {
    a.reply_to.send(cx, Job{99});
    return absl::OkStatus();
  }
};

struct WaitLog {
  std::vector<int> jobs;        // Jobs handled, in order
  std::vector<int> replies;     // answers that reached a continuation
  std::vector<size_t> stashed;  // cx.stashed() at each Resume
  std::vector<bool> receiving_all;  // cx.receiving_all() at each Job
};

// While waiting it handles only Resume; Jobs are held back by the cell, not by a handler.
struct Waiter : Actor, Handles<Job, Wait, Resume> {
  WaitLog* log;
  explicit Waiter(WaitLog* l) : log(l) {}
  absl::Status handle(Context& cx, Job j) override {
    log->jobs.push_back(j.n);
    log->receiving_all.push_back(cx.receiving_all());
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Wait w) override {
    cx.receive_only<Resume>();
    if (!(w.server.addr() == runtime::PortAddr{})) {
      cx.request(w.server, Ask{}, absl::Seconds(10))
          .then([this](Context&, absl::StatusOr<Job> a) -> absl::Status {
            log->replies.push_back(a.ok() ? a->n : -1);
            return absl::OkStatus();
          });
    }
    if (w.crash_after) return absl::InternalError("crash while waiting");
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Resume) override {
    log->stashed.push_back(cx.stashed());
    cx.receive_all();
    return absl::OkStatus();
  }
};

TEST(Stash, R_ACT_9_ReceiveOnlyHoldsOtherTypesBackUnhandledUntilReceiveAllThenInOrder) {
  VirtualTimeProc t;
  WaitLog log;
  auto w = *spawn<Waiter>(t.proc, "waiter", &log);
  w.ref().send(t.client, Job{1});
  w.ref().send(t.client, Wait{});
  for (int n = 2; n <= 4; ++n) w.ref().send(t.client, Job{n});
  t.run();
  EXPECT_EQ(log.jobs, std::vector<int>{1}) << "a held-back Job ran its handler";
  w.ref().send(t.client, Resume{});
  w.ref().send(t.client, Job{5});
  t.run();
  EXPECT_EQ(log.stashed, std::vector<size_t>{3});
  EXPECT_EQ(log.jobs, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(log.receiving_all, (std::vector<bool>{true, true, true, true, true}));
  // Waiting again holds back again, also what arrives while the put-aside ones replay.
  w.ref().send(t.client, Wait{});
  w.ref().send(t.client, Job{6});
  t.run();
  EXPECT_EQ(log.jobs.size(), 5u);
  w.ref().send(t.client, Resume{});
  t.run();
  EXPECT_EQ(log.jobs.back(), 6);
}

TEST(Stash, R_ACT_9_RepliesToTheActorsOwnRequestsAreNeverHeldBack) {
  VirtualTimeProc t;
  WaitLog log;
  auto server = *spawn<Answerer>(t.proc, "server");
  auto w = *spawn<Waiter>(t.proc, "waiter", &log);
  Wait wait;
  wait.server = server.ref().port<Ask>();
  w.ref().send(t.client, wait);
  w.ref().send(t.client, Job{1});
  t.run();
  EXPECT_EQ(log.replies, std::vector<int>{99}) << "the reply waited behind receive_only";
  EXPECT_TRUE(log.jobs.empty());
  w.ref().send(t.client, Resume{});
  t.run();
  EXPECT_EQ(log.jobs, std::vector<int>{1});
}

TEST(Stash, R_ACT_9_ARestartStartsTheNewIncarnationReceivingEverything) {
  VirtualTimeProc t;
  WaitLog log;
  auto w = *spawn<Waiter>(
      t.proc,
      SpawnOptions{Supervision::one_for_one().with_backoff(absl::Seconds(1), absl::Seconds(1))},
      "waiter", &log);
  w.ref().send(t.client, Job{1});
  Wait crash;
  crash.crash_after = true;
  w.ref().send(t.client, crash);
  w.ref().send(t.client, Job{2});
  t.run();
  t.advance(absl::Seconds(1));
  t.run();
  EXPECT_EQ(log.jobs, (std::vector<int>{1, 2}));
  EXPECT_TRUE(log.stashed.empty()) << "no Resume was needed";
}

TEST(Stash, R_ACT_9_HeldBackMessagesCountAgainstTheMailboxBound) {
  VirtualTimeProc t;
  WaitLog log;
  auto w = *spawn<Waiter>(
      t.proc, SpawnOptions::bounded(runtime::MailboxBound::of(2, runtime::OverloadPolicy::kFail)),
      "waiter", &log);
  w.ref().send(t.client, Wait{});
  t.run();
  w.ref().send(t.client, Job{1});
  w.ref().send(t.client, Job{2});
  t.run();  // both held back: the queue is empty, the mailbox full
  w.ref().send(t.client, Job{3});
  absl::StatusOr<runtime::EnvelopePtr> back = t.client.next_undeliverable(absl::ZeroDuration());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->root_failure()->transport, runtime::TransportReason::kOverloaded);
  EXPECT_EQ((*back)->data().get<Job>()->n, 3);
  EXPECT_EQ(t.proc.lookup(w.ref().addr().id)->sink_info().queued, 2u);
  EXPECT_TRUE(log.jobs.empty());
}

}  // namespace
}  // namespace postal::actors
