// Actor behaviour: lifecycle, one-at-a-time handling, supervision, tombstones, draining stop,
// the undeliverable policy and request/reply (R-ACT-1…5, R-FAIL-5).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "postal/postal.h"
#include "postal/runtime/deferred_flush.h"
#include "support/proc_client.h"
#include "support/virtual_time_proc.h"
#include "support/wait_for.h"

namespace {

struct Note {
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};
struct Boom {
  bool throw_instead = false;
  template <class A>
  void serialize(A& a) {
    a(throw_instead);
  }
};
struct Ask {
  using Reply = int;
  int n = 0;
  postal::OncePortRef<int> reply_to;
  template <class A>
  void serialize(A& a) {
    a(n, reply_to);
  }
};
struct Forward {  // asks `to` and reports the outcome to `report`
  postal::PortRef<Ask> to;
  postal::PortRef<Note> report;
  int64_t timeout_ms = 5000;
  template <class A>
  void serialize(A& a) {
    a(to, report, timeout_ms);
  }
};
struct SendTo {  // sends a Note to `target` as this actor
  postal::PortRef<Note> target;
  template <class A>
  void serialize(A& a) {
    a(target);
  }
};
struct SpawnChildren {
  int count = 0;
  postal::PortRef<Note> done;
  template <class A>
  void serialize(A& a) {
    a(count, done);
  }
};
struct WatchBoth {  // R-SUP-2: watch these two
  postal::runtime::ActorAddr first;
  postal::runtime::ActorAddr second;
  template <class A>
  void serialize(A& a) {
    a(first, second);
  }
};

}  // namespace

POSTAL_MESSAGE(Note, "test.actors.Note");
POSTAL_MESSAGE(Boom, "test.actors.Boom");
POSTAL_MESSAGE(int, "test.actors.Int");
POSTAL_MESSAGE(Ask, "test.actors.Ask");
POSTAL_MESSAGE(Forward, "test.actors.Forward");
POSTAL_MESSAGE(SendTo, "test.actors.SendTo");
POSTAL_MESSAGE(SpawnChildren, "test.actors.SpawnChildren");
POSTAL_MESSAGE(WatchBoth, "test.actors.WatchBoth");

namespace postal::actors {
namespace {

using runtime::FailureKind;
using runtime::InvalidReason;

constexpr absl::Duration kDeadline = absl::Seconds(10);

// Records what it saw; fails on Boom.
struct Recorder : Actor, Handles<Note, Boom> {
  std::vector<int>* seen;
  std::vector<ActorState>* states;
  explicit Recorder(std::vector<int>* s, std::vector<ActorState>* st = nullptr)
      : seen(s), states(st) {}
  absl::Status handle(Context& cx, Note m) override {
    seen->push_back(m.n);
    if (states) states->push_back(cx.status().state);
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Boom b) override {
    if (b.throw_instead) throw std::runtime_error("boom thrown");
    return absl::InternalError("boom returned");
  }
};

struct Fixture : test_support::ProcWithClient {
  explicit Fixture(ProcOptions o) : ProcWithClient(std::move(o), "test") {}
};

TEST(Actor, R_ACT_1_LifecycleCreatedInitializingIdleProcessingStoppingStopped) {
  Fixture f(ProcOptions::deterministic());
  std::vector<int> seen;
  std::vector<ActorState> states;
  auto a = *spawn<Recorder>(f.proc, "rec", &seen, &states);
  EXPECT_EQ(a.status().state, ActorState::kCreated);
  a.ref().send(*f.client, Note{1});
  a.ref().send(*f.client, Note{2});
  ASSERT_TRUE(f.proc.scheduler().step());  // init + first message
  EXPECT_EQ(a.status().state, ActorState::kIdle);
  a.stop("done");
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
  EXPECT_EQ(states, (std::vector<ActorState>{ActorState::kProcessing, ActorState::kProcessing}));
  ActorStatus st = a.status();
  EXPECT_EQ(st.state, ActorState::kStopped);
  EXPECT_EQ(st.reason, "done");
}

TEST(Actor, R_ACT_1_InitErrorFailsTheActor) {
  struct BadInit : Actor, Handles<Note> {
    absl::Status init(Context&) override { return absl::InvalidArgumentError("no config"); }
    absl::Status handle(Context&, Note) override { return absl::OkStatus(); }
  };
  Fixture f(ProcOptions::deterministic());
  auto a = *spawn<BadInit>(f.proc, "bad");
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(a.status().state, ActorState::kFailed);
  EXPECT_NE(a.status().reason.find("no config"), std::string::npos);
}

// Detects overlapping handler calls on one actor from many sending threads.
struct Exclusive : Actor, Handles<Note> {
  std::atomic<int>* inside;
  std::atomic<int>* overlaps;
  std::atomic<int>* count;
  Exclusive(std::atomic<int>* i, std::atomic<int>* o, std::atomic<int>* c)
      : inside(i), overlaps(o), count(c) {}
  absl::Status handle(Context&, Note) override {
    if (inside->fetch_add(1) != 0) overlaps->fetch_add(1);
    for (int spin = 0; spin < 200; ++spin) asm volatile("" ::: "memory");
    inside->fetch_sub(1);
    count->fetch_add(1);
    return absl::OkStatus();
  }
};

TEST(Actor, R_ACT_2_OneMessageAtATimeUnderConcurrentSenders) {
  Fixture f(ProcOptions::threads(2));
  std::atomic<int> inside{0}, overlaps{0}, count{0};
  auto a = *spawn<Exclusive>(f.proc, "excl", &inside, &overlaps, &count);
  constexpr int kThreads = 4, kPer = 5000;
  std::vector<std::thread> senders;
  for (int t = 0; t < kThreads; ++t) {
    senders.emplace_back([&, t] {
      auto c = *Client::attach(f.proc, "sender" + std::string(1, static_cast<char>('a' + t)));
      for (int i = 0; i < kPer; ++i) a.ref().send(*c, Note{i});
    });
  }
  for (auto& t : senders) t.join();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (count.load() < kThreads * kPer && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(count.load(), kThreads * kPer);
  EXPECT_EQ(overlaps.load(), 0);
}

struct Server : Actor, Handles<Ask> {
  absl::Status handle(Context& cx, Ask a) override {
    a.reply_to.send(cx, a.n * 2);
    return absl::OkStatus();
  }
};
struct Silent : Actor, Handles<Ask> {
  absl::Status handle(Context&, Ask) override { return absl::OkStatus(); }
};
struct Requester : Actor, Handles<Forward> {
  absl::Status handle(Context& cx, Forward f) override {
    absl::StatusOr<int> r =
        runtime::request(cx, f.to, Ask{21, {}}, absl::Milliseconds(f.timeout_ms));
    int code = r.ok() ? *r : -static_cast<int>(r.status().code());
    f.report.send(cx, Note{code});
    return absl::OkStatus();
  }
};

// A requester on `options`' proc asks a server there and reports the answer (42).
void ExpectARequestIsAnswered(ProcOptions options) {
  Fixture f(std::move(options));
  auto server = *spawn<Server>(f.proc, "server");
  auto requester = *spawn<Requester>(f.proc, "requester");
  auto [report, rx] = runtime::open_port<Note>(*f.client);
  requester.ref().send(*f.client, Forward{server.ref().port<Ask>(), report.bind(), 5000});
  auto got = rx.recv(kDeadline);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->n, 42);
}

TEST(Actor, R_ACT_2_BlockingRequestSuspendsTheFiberNotTheWorker) {
  // One worker: the server can only run while the requester's handler waits if the wait
  // suspends just the fiber.
  ExpectARequestIsAnswered(ProcOptions::threads(1));
}

// Echoes every Note to `to`.
struct Echo : Actor, Handles<Note> {
  PortRef<Note> to;
  explicit Echo(PortRef<Note> t) : to(std::move(t)) {}
  absl::Status handle(Context& cx, Note m) override {
    to.send(cx, m);
    return absl::OkStatus();
  }
};

ProcOptions one_worker_lingering(absl::Duration linger) {
  ProcOptions o = ProcOptions::threads(1);
  o.scheduler.linger = linger;
  return o;
}

TEST(Actor, R_SCHED_1_AMessageThatComesWhileTheSliceLingersIsHandledInThatSlice) {
  EXPECT_EQ(runtime::SchedulerOptions::low_power().linger, absl::ZeroDuration());
  for (absl::Duration linger : {absl::Minutes(1), absl::ZeroDuration()}) {
    SCOPED_TRACE(absl::FormatDuration(linger));
    Fixture f(one_worker_lingering(linger));
    auto [back, rx] = runtime::open_port<Note>(*f.client);
    auto echo = *spawn<Echo>(f.proc, "echo", back.bind());
    echo.ref().send(*f.client, Note{1});
    ASSERT_TRUE(rx.recv(kDeadline).ok());
    // Without the linger, wait for the slice to end (its only worker goes to sleep), so that
    // the next message cannot share it by arriving early; with it, the slice never ends alone.
    if (linger == absl::ZeroDuration()) {
      ASSERT_TRUE(test_support::wait_for(
          [&] { return f.proc.scheduler().sleeping_workers() == 1; }, kDeadline));
    }
    const uint64_t slices = f.proc.scheduler().stats().slices;
    echo.ref().send(*f.client, Note{2});
    auto got = rx.recv(kDeadline);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->n, 2);
    if (linger > absl::ZeroDuration()) {
      EXPECT_EQ(f.proc.scheduler().stats().slices, slices) << "handled by the lingering slice";
    } else {
      EXPECT_GT(f.proc.scheduler().stats().slices, slices) << "a new slice for every message";
    }
  }
}

TEST(Actor, R_SCHED_1_ALingeringSliceGivesWayAtOnceToOtherWorkOnItsWorker) {
  // One worker and a one-minute linger: the second actor runs within the deadline only if the
  // first one's slice stops waiting when the second becomes runnable.
  Fixture f(one_worker_lingering(absl::Minutes(1)));
  auto [back, rx] = runtime::open_port<Note>(*f.client);
  auto first = *spawn<Echo>(f.proc, "first", back.bind());
  auto second = *spawn<Echo>(f.proc, "second", back.bind());
  first.ref().send(*f.client, Note{1});
  ASSERT_TRUE(rx.recv(kDeadline).ok());
  second.ref().send(*f.client, Note{2});
  auto got = rx.recv(kDeadline);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->n, 2);
}

// Defers a flush that marks `flushed`, as a channel client defers its write (deferred_flush.h).
struct MarkFlushed final : runtime::DeferredFlush {
  explicit MarkFlushed(std::atomic<bool>& f) : flushed(f) {}
  void flush() override { flushed.store(true); }
  std::atomic<bool>& flushed;
};
struct DefersAFlush : Actor, Handles<Note> {
  std::atomic<bool>* flushed;
  explicit DefersAFlush(std::atomic<bool>* f) : flushed(f) {}
  absl::Status handle(Context&, Note) override {
    runtime::defer_flush(std::make_shared<MarkFlushed>(*flushed));
    return absl::OkStatus();
  }
};

TEST(Actor, R_SCHED_1_ALingeringSliceFlushesWhatItDeferredBeforeItWaits) {
  // A one-minute linger with nothing else to do: the deferred send (a reply over a channel)
  // goes out within the deadline only if the slice flushes before it waits.
  Fixture f(one_worker_lingering(absl::Minutes(1)));
  std::atomic<bool> flushed{false};
  auto actor = *spawn<DefersAFlush>(f.proc, "defers", &flushed);
  actor.ref().send(*f.client, Note{1});
  EXPECT_TRUE(test_support::wait_for([&] { return flushed.load(); }, kDeadline))
      << "the deferred flush waited behind the linger";
}

TEST(Actor, R_SCHED_1_AWaitThatRanOutMakesTheWorkerSkipTheNextChanceWhicheverActorItComesFrom) {
  // One worker, a 3 s linger. The first actor's wait runs out; the second actor, fresh (its own
  // back-off is zero), must then not linger: its worker goes to sleep at once, not after 3 s.
  Fixture f(one_worker_lingering(absl::Seconds(3)));
  auto [back, rx] = runtime::open_port<Note>(*f.client);
  auto first = *spawn<Echo>(f.proc, "first", back.bind());
  auto second = *spawn<Echo>(f.proc, "second", back.bind());
  const auto asleep = [&] { return f.proc.scheduler().sleeping_workers() == 1; };
  ASSERT_TRUE(test_support::wait_for(asleep, kDeadline)) << "the actors' inits did not end";
  // The first actor's wait must run out (3 s). On a loaded machine something may end it early
  // (then it did not run out, and proves nothing): send again until one does.
  bool ran_out = false;
  for (int attempt = 0; attempt < 3 && !ran_out; ++attempt) {
    first.ref().send(*f.client, Note{1});
    ASSERT_TRUE(rx.recv(kDeadline).ok());
    const absl::Time sent = absl::Now();
    ASSERT_TRUE(test_support::wait_for(asleep, kDeadline)) << "the first actor's wait did not end";
    ran_out = absl::Now() - sent >= absl::Milliseconds(2900);
  }
  ASSERT_TRUE(ran_out) << "the first actor's wait never ran its 3 s";
  second.ref().send(*f.client, Note{2});
  ASSERT_TRUE(rx.recv(kDeadline).ok());
  EXPECT_TRUE(test_support::wait_for(asleep, absl::Milliseconds(1500)))
      << "the second actor lingered although the worker's last wait ran out";
}

TEST(Actor, R_SCHED_1_AStopEndsTheLinger) {
  Fixture f(one_worker_lingering(absl::Minutes(1)));
  auto [back, rx] = runtime::open_port<Note>(*f.client);
  auto echo = *spawn<Echo>(f.proc, "echo", back.bind());
  echo.ref().send(*f.client, Note{1});
  ASSERT_TRUE(rx.recv(kDeadline).ok());
  echo.stop("done");
  absl::StatusOr<ActorStatus> st = echo.wait(kDeadline);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->state, ActorState::kStopped);
}

TEST(Actor, R_SCHED_1_AHandlerWaitingOnTheSameWorkerResumesWhileAnotherSliceLingers) {
  // One worker: the server's slice lingers after it answered, and the requester's fiber, woken
  // by the answer on the same thread, must still get to run and report.
  ExpectARequestIsAnswered(one_worker_lingering(absl::Minutes(1)));
}

// R-SCHED-3: a producer that feeds one consumer from a single long handler.
struct Consumer : Actor, Handles<Note> {
  std::atomic<int>* handled;
  explicit Consumer(std::atomic<int>* h) : handled(h) {}
  absl::Status handle(Context&, Note) override {
    handled->fetch_add(1);
    return absl::OkStatus();
  }
};
struct Feeder : Actor, Handles<Note> {
  ActorRef<Consumer> to;
  const std::atomic<int>* handled;
  PortRef<Note> report;
  Feeder(ActorRef<Consumer> t, const std::atomic<int>* h, PortRef<Note> r)
      : to(std::move(t)), handled(h), report(std::move(r)) {}
  // Sends until the consumer has handled one, at most `n.n` times; reports how many it sent
  // then, or -1 when the consumer handled nothing while this handler ran.
  absl::Status handle(Context& cx, Note n) override {
    int sent = 0;
    while (sent < n.n && handled->load() == 0) {
      to.send(cx, Note{sent});
      ++sent;
    }
    report.send(cx, Note{handled->load() > 0 ? sent : -1});
    return absl::OkStatus();
  }
};

TEST(Actor, R_SCHED_3_AnActorFedByALongHandlerRunsOnAnIdleWorkerBeforeTheHandlerEnds) {
  Fixture f(ProcOptions::threads(2));
  std::atomic<int> handled{0};
  auto tally = *spawn<Consumer>(f.proc, "tally", &handled);
  auto [report, rx] = runtime::open_port<Note>(*f.client);
  auto feeder = *spawn<Feeder>(f.proc, "feeder", tally.ref(), &handled, report.bind());
  constexpr int kMaxSends = 200'000;
  feeder.ref().send(*f.client, Note{kMaxSends});
  auto got = rx.recv(kDeadline);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_GT(got->n, 0) << "the consumer waited in the feeder's LIFO slot for all " << kMaxSends
                       << " sends while the other worker idled";
  ASSERT_TRUE(test_support::wait_for([&] { return handled.load() == std::max(got->n, 0); },
                                     kDeadline));
}

TEST(Actor, RequestTimesOutWithDeadlineExceeded) {
  Fixture f(ProcOptions::threads(2));
  auto silent = *spawn<Silent>(f.proc, "silent");
  auto requester = *spawn<Requester>(f.proc, "requester");
  auto [report, rx] = runtime::open_port<Note>(*f.client);
  requester.ref().send(*f.client, Forward{silent.ref().port<Ask>(), report.bind(), 50});
  auto got = rx.recv(kDeadline);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->n, -static_cast<int>(absl::StatusCode::kDeadlineExceeded));
}

TEST(Actor, RequestToAStoppedActorFailsAtOnceNotAtTheDeadline) {
  Fixture f(ProcOptions::threads(2));
  auto server = *spawn<Server>(f.proc, "server");
  server.stop();
  ASSERT_TRUE(server.wait(kDeadline).ok());
  auto requester = *spawn<Requester>(f.proc, "requester");
  auto [report, rx] = runtime::open_port<Note>(*f.client);
  auto start = absl::Now();
  // A one-minute deadline: only the returned envelope can end the wait within the test deadline.
  requester.ref().send(*f.client, Forward{server.ref().port<Ask>(), report.bind(), 60'000});
  auto got = rx.recv(kDeadline);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->n, -static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_LT(absl::Now() - start, kDeadline);
  // Consumed by the request, not policy: the requester goes back to Idle (it may still be
  // finishing the handler that sent the report, so wait for that with a deadline).
  const absl::Time give_up = absl::Now() + kDeadline;
  while (requester.status().state == ActorState::kProcessing && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(requester.status().state, ActorState::kIdle);
}

// Asks `to` in its handler and answers with what it got: a request inside a request.
struct Relay : Actor, Handles<Ask> {
  PortRef<Ask> to;
  explicit Relay(PortRef<Ask> t) : to(std::move(t)) {}
  absl::Status handle(Context& cx, Ask a) override {
    absl::StatusOr<int> r = runtime::request(cx, to, Ask{a.n, {}}, kDeadline);
    if (!r.ok()) return r.status();
    a.reply_to.send(cx, *r + 1);
    return absl::OkStatus();
  }
};

TEST(Actor, R_ACT_8_ClientRequestOnADeterministicProcDrivesTheSteps) {
  Fixture f(ProcOptions::deterministic());
  auto server = *spawn<Server>(f.proc, "server");
  const absl::Time start = absl::Now();
  absl::StatusOr<int> got = server.ref().request(*f.client, Ask{21, {}}, absl::Minutes(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, 42);
  // A one-minute deadline: only the driven steps can answer within the test deadline.
  EXPECT_LT(absl::Now() - start, kDeadline);

  // A request whose handler makes a request of its own: the blocked handler ends its step and
  // the client keeps stepping until the inner reply resumes it.
  auto relay = *spawn<Relay>(f.proc, "relay", server.ref().port<Ask>());
  got = relay.ref().request(*f.client, Ask{5, {}}, absl::Minutes(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, 11);
  EXPECT_LT(absl::Now() - start, kDeadline);
}

TEST(Actor, R_ACT_8_DeterministicRequestToAStoppedActorFailsAtOnce) {
  Fixture f(ProcOptions::deterministic());
  auto server = *spawn<Server>(f.proc, "server");
  server.stop("gone fishing");
  f.proc.scheduler().run_until_idle();
  ASSERT_EQ(server.status().state, ActorState::kStopped);
  const absl::Time start = absl::Now();
  absl::StatusOr<int> got = server.ref().request(*f.client, Ask{1, {}}, absl::Minutes(1));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_NE(got.status().message().find("gone fishing"), std::string::npos) << got.status();
  EXPECT_LT(absl::Now() - start, kDeadline);
}

TEST(Actor, R_ACT_3_HandlerErrorOrExceptionFailsTheActor) {
  for (bool throw_instead : {false, true}) {
    Fixture f(ProcOptions::deterministic());
    std::vector<int> seen;
    auto a = *spawn<Recorder>(f.proc, "rec", &seen);
    a.ref().send(*f.client, Boom{throw_instead});
    f.proc.scheduler().run_until_idle();
    ActorStatus st = a.status();
    EXPECT_EQ(st.state, ActorState::kFailed);
    EXPECT_NE(st.reason.find(throw_instead ? "boom thrown" : "boom returned"), std::string::npos)
        << st.reason;
  }
}

struct Parent : Actor, Handles<Note> {
  bool absorb;
  ActorHandle<Recorder>* child_out;
  ActorHandle<Recorder>* sibling_out;
  std::vector<int> child_seen;
  std::vector<std::string>* events;
  Parent(bool a, ActorHandle<Recorder>* c, ActorHandle<Recorder>* s, std::vector<std::string>* e)
      : absorb(a), child_out(c), sibling_out(s), events(e) {}
  absl::Status init(Context& cx) override {
    *child_out = *cx.spawn<Recorder>("child", &child_seen);
    *sibling_out = *cx.spawn<Recorder>("sibling", &child_seen);
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Note) override { return absl::OkStatus(); }
  absl::Status on_child_failed(Context& cx, const SupervisionEvent& e) override {
    events->push_back(e.error);
    if (absorb) return absl::OkStatus();
    return Actor::on_child_failed(cx, e);
  }
};

TEST(Actor, R_ACT_3_ChildFailurePropagatesToParentAndStopsSiblings) {
  Fixture f(ProcOptions::deterministic());
  ActorHandle<Recorder> child, sibling;
  std::vector<std::string> events;
  auto parent = *spawn<Parent>(f.proc, "parent", false, &child, &sibling, &events);
  f.proc.scheduler().run_until_idle();
  ASSERT_TRUE(child.valid());
  child.ref().send(*f.client, Boom{});
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(child.status().state, ActorState::kFailed);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0].find("boom returned"), std::string::npos);
  EXPECT_EQ(parent.status().state, ActorState::kFailed);
  EXPECT_NE(parent.status().reason.find("child"), std::string::npos);
  EXPECT_EQ(sibling.status().state, ActorState::kStopped);  // children stop with their parent
}

TEST(Actor, R_ACT_3_ParentThatHandlesTheEventKeepsRunning) {
  Fixture f(ProcOptions::deterministic());
  ActorHandle<Recorder> child, sibling;
  std::vector<std::string> events;
  auto parent = *spawn<Parent>(f.proc, "parent", true, &child, &sibling, &events);
  f.proc.scheduler().run_until_idle();
  child.ref().send(*f.client, Boom{true});
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(child.status().state, ActorState::kFailed);
  EXPECT_EQ(events.size(), 1u);
  EXPECT_EQ(parent.status().state, ActorState::kIdle);
  EXPECT_EQ(sibling.status().state, ActorState::kIdle);
}

const runtime::DeliveryFailure& root_of_next_return(Client& c) {
  static thread_local runtime::EnvelopePtr last;
  auto env = c.next_undeliverable(kDeadline);
  EXPECT_TRUE(env.ok()) << env.status();
  last = std::move(*env);
  return *last->root_failure();
}

TEST(Actor, R_ACT_4_StoppedAndFailedActorsLeaveTombstones) {
  Fixture f(ProcOptions::deterministic());
  std::vector<int> seen;
  auto stopped = *spawn<Recorder>(f.proc, "stopped", &seen);
  auto failed = *spawn<Recorder>(f.proc, "failed", &seen);
  stopped.stop();
  failed.ref().send(*f.client, Boom{});
  f.proc.scheduler().run_until_idle();
  ASSERT_EQ(failed.status().state, ActorState::kFailed);

  stopped.ref().send(*f.client, Note{1});
  const auto& a = root_of_next_return(*f.client);
  EXPECT_EQ(a.kind, FailureKind::kInvalidReference);
  EXPECT_EQ(a.invalid, InvalidReason::kActorStopped);

  failed.ref().send(*f.client, Note{2});
  const auto& b = root_of_next_return(*f.client);
  EXPECT_EQ(b.invalid, InvalidReason::kActorFailed);

  // Respawning under a tombstone's name is refused: the id stays bound to the dead actor.
  EXPECT_EQ(spawn<Recorder>(f.proc, "stopped", &seen).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(seen.empty());
}

// A short-lived actor: counts its init, fails on Boom.
struct Brief : Actor, Handles<Note, Boom> {
  std::atomic<int>* started;
  explicit Brief(std::atomic<int>* s) : started(s) {}
  absl::Status init(Context&) override {
    started->fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Note) override { return absl::OkStatus(); }
  absl::Status handle(Context&, Boom) override { return absl::InternalError("brief boom"); }
};

// Watches the actors it is told to and records their Downs.
struct DownRecorder : Actor, Handles<WatchBoth> {
  std::vector<Down>* downs;
  explicit DownRecorder(std::vector<Down>* d) : downs(d) {}
  absl::Status handle(Context& cx, WatchBoth w) override {
    if (absl::Status s = cx.watch(w.first); !s.ok()) return s;
    return cx.watch(w.second);
  }
  absl::Status on_down(Context&, const Down& d) override {
    downs->push_back(d);
    return absl::OkStatus();
  }
};

// A deterministic proc whose clock the test moves, with the given tombstone grace.
struct ClockedFixture : test_support::VirtualTimeProc {
  explicit ClockedFixture(absl::Duration grace) : VirtualTimeProc(options(grace)) {}
  static ProcOptions options(absl::Duration grace) {
    ProcOptions o = ProcOptions::deterministic();
    o.tombstone_grace = grace;
    return o;
  }
};

TEST(Actor, R_ACT_7_ATombstoneIsReapedAfterItsGraceAndItsNameIsFree) {
  ClockedFixture c(absl::Minutes(1));
  test_support::ProcWithClient& f = c.pc;
  std::vector<int> seen;
  auto stopped = *spawn<Recorder>(f.proc, "stopped", &seen);
  auto failed = *spawn<Recorder>(f.proc, "failed", &seen);
  stopped.stop();
  failed.ref().send(*f.client, Boom{});
  f.proc.scheduler().run_until_idle();
  ASSERT_EQ(stopped.status().state, ActorState::kStopped);
  ASSERT_EQ(failed.status().state, ActorState::kFailed);

  *c.now += absl::Seconds(59);  // within the grace: tombstones
  stopped.ref().send(*f.client, Note{1});
  EXPECT_EQ(root_of_next_return(*f.client).invalid, InvalidReason::kActorStopped);
  failed.ref().send(*f.client, Note{2});
  EXPECT_EQ(root_of_next_return(*f.client).invalid, InvalidReason::kActorFailed);
  EXPECT_EQ(spawn<Recorder>(f.proc, "stopped", &seen).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(f.proc.mailbox_count(), 3u);

  *c.now += absl::Seconds(2);  // past it: gone, even before anything sweeps
  stopped.ref().send(*f.client, Note{3});
  EXPECT_EQ(root_of_next_return(*f.client).invalid, InvalidReason::kActorNotExist);
  failed.ref().send(*f.client, Note{4});
  EXPECT_EQ(root_of_next_return(*f.client).invalid, InvalidReason::kActorNotExist);
  EXPECT_EQ(f.proc.reap_tombstones(), 2u);
  EXPECT_EQ(f.proc.mailbox_count(), 1u) << "only the client is left";

  // The name is free again: a new actor answers to it.
  auto again = spawn<Recorder>(f.proc, "stopped", &seen);
  ASSERT_TRUE(again.ok()) << again.status();
  again->ref().send(*f.client, Note{5});
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(seen, (std::vector<int>{5}));
}

TEST(Actor, R_ACT_7_ZeroGraceReapsAtOnceAndAnInfiniteOneNever) {
  {
    ClockedFixture c(absl::ZeroDuration());
    std::vector<int> seen;
    auto a = *spawn<Recorder>(c.pc.proc, "rec", &seen);
    a.stop();
    c.pc.proc.scheduler().run_until_idle();
    a.ref().send(*c.pc.client, Note{1});
    EXPECT_EQ(root_of_next_return(*c.pc.client).invalid, InvalidReason::kActorNotExist);
  }
  {
    ClockedFixture c(absl::InfiniteDuration());
    std::vector<int> seen;
    auto a = *spawn<Recorder>(c.pc.proc, "rec", &seen);
    a.stop();
    c.pc.proc.scheduler().run_until_idle();
    *c.now += absl::Hours(24 * 365);
    EXPECT_EQ(c.pc.proc.reap_tombstones(), 0u);
    a.ref().send(*c.pc.client, Note{1});
    EXPECT_EQ(root_of_next_return(*c.pc.client).invalid, InvalidReason::kActorStopped);
  }
}

// A tombstone is the mailbox alone: once the actor ended and no handle holds its cell, the cell
// (its queues, its state) is freed at once, not with the tombstone. The tombstone still refuses
// sends with the actor's end, and a watch of it still reports how the actor ended.
TEST(Actor, R_ACT_7_ATombstoneLetsGoOfTheEndedActorsCell) {
  ClockedFixture c(absl::Minutes(1));
  test_support::ProcWithClient& f = c.pc;
  std::atomic<int> started{0};
  ActorRef<Brief> stopped_ref;
  ActorRef<Brief> failed_ref;
  std::weak_ptr<runtime::PortSink> stopped_cell;
  std::weak_ptr<runtime::PortSink> failed_cell;
  {
    auto stopped = *spawn<Brief>(f.proc, "stopped", &started);
    auto failed = *spawn<Brief>(f.proc, "failed", &started);
    stopped_ref = stopped.ref();
    failed_ref = failed.ref();
    stopped_cell = f.proc.lookup(stopped.addr().id)->handler_sink_owner();
    failed_cell = f.proc.lookup(failed.addr().id)->handler_sink_owner();
    stopped.stop("done here");
    failed.ref().send(*f.client, Boom{});
    f.proc.scheduler().run_until_idle();
    EXPECT_FALSE(stopped_cell.expired()) << "a handle still holds the cell";
  }
  EXPECT_TRUE(stopped_cell.expired()) << "the tombstone must not keep the stopped actor's cell";
  EXPECT_TRUE(failed_cell.expired()) << "nor the failed one's";
  std::shared_ptr<runtime::Mailbox> tombstone = f.proc.lookup(stopped_ref.addr().id);
  ASSERT_NE(tombstone, nullptr) << "the tombstone stays for its grace";
  EXPECT_TRUE(tombstone->sink_released());
  EXPECT_EQ(f.proc.mailbox_count(), 3u);

  stopped_ref.send(*f.client, Note{1});
  const runtime::DeliveryFailure& s = root_of_next_return(*f.client);
  EXPECT_EQ(s.invalid, InvalidReason::kActorStopped);
  EXPECT_NE(s.detail.find("done here"), std::string::npos) << s.detail;
  failed_ref.send(*f.client, Note{2});
  const runtime::DeliveryFailure& x = root_of_next_return(*f.client);
  EXPECT_EQ(x.invalid, InvalidReason::kActorFailed);
  EXPECT_NE(x.detail.find("brief boom"), std::string::npos) << x.detail;

  // R-SUP-2: a watch of the ended actors still says how each ended.
  std::vector<Down> downs;
  auto watcher = *spawn<DownRecorder>(f.proc, "watcher", &downs);
  watcher.ref().send(*f.client, WatchBoth{stopped_ref.addr(), failed_ref.addr()});
  f.proc.scheduler().run_until_idle();
  ASSERT_EQ(downs.size(), 2u);
  EXPECT_EQ(downs[0].reason, "done here");
  EXPECT_FALSE(downs[0].failed);
  EXPECT_TRUE(downs[1].failed);
  EXPECT_NE(downs[1].reason.find("brief boom"), std::string::npos) << downs[1].reason;
}

// The same on worker threads: an actor that stops itself while others send to it.
TEST(Actor, R_ACT_7_CellsOfActorsEndingOnWorkersAreFreedAsTheyEnd) {
  Fixture f(ProcOptions::threads(2));
  std::atomic<int> started{0};
  std::vector<std::weak_ptr<runtime::PortSink>> cells;
  for (int i = 0; i < 200; ++i) {
    auto a = *spawn<Brief>(f.proc, "ender-" + std::to_string(i), &started);
    cells.push_back(f.proc.lookup(a.addr().id)->handler_sink_owner());
    a.ref().send(*f.client, Note{i});
    if (i % 3 == 0) a.ref().send(*f.client, Boom{});
    a.stop();
    ASSERT_TRUE(a.wait(kDeadline).ok());
  }
  // The last one may still be in the tail of its last slice.
  EXPECT_TRUE(test_support::wait_for(
      [&] {
        return std::all_of(cells.begin(), cells.end(), [](const auto& c) { return c.expired(); });
      },
      kDeadline))
      << "a cell outlived its actor and its handle";
}

// Memory of a proc that churns actors stays flat: the muxer holds the live actors plus the
// tombstones still in their grace, not every actor that ever lived.
TEST(Actor, R_ACT_7_ChurningTwoHundredThousandActorsKeepsTheMuxerBounded) {
  ClockedFixture c(absl::Seconds(10));
  test_support::ProcWithClient& f = c.pc;
  std::atomic<int> started{0};
  size_t most = 0;
  constexpr int kCycles = 200'000;
  // Sixteen names in turn: each comes back after sixteen cycles, past its tombstone's grace.
  std::vector<std::string> names;
  for (int n = 0; n < 16; ++n) names.push_back("churn-" + std::to_string(n));
  for (int i = 0; i < kCycles; ++i) {
    auto a = spawn<Brief>(f.proc, names[i % names.size()], &started);
    ASSERT_TRUE(a.ok()) << "cycle " << i << ": " << a.status();
    a->stop();
    f.proc.scheduler().run_until_idle();
    *c.now += absl::Seconds(1);  // each tombstone lives ten cycles
    most = std::max(most, f.proc.mailbox_count());
  }
  EXPECT_EQ(started.load(), kCycles);
  EXPECT_LE(most, 13u) << "the client, one live actor, ~10 tombstones in their grace";
}

// A bound on tombstones (ProcOptions::max_tombstones): past it the oldest is reaped before its
// grace ends — sends to it fail ActorNotExist even through a handle that holds its mailbox, its
// name is free — and the younger ones stay tombstones.
TEST(Actor, R_ACT_7_PastMaxTombstonesTheOldestIsReapedBeforeItsGrace) {
  ProcOptions o = ClockedFixture::options(absl::Minutes(1));
  o.max_tombstones = 3;
  test_support::VirtualTimeProc c(o);
  test_support::ProcWithClient& f = c.pc;
  std::atomic<int> started{0};
  std::vector<ActorHandle<Brief>> ended;
  for (int i = 0; i < 5; ++i) {
    auto a = spawn<Brief>(f.proc, "ended-" + std::to_string(i), &started);
    ASSERT_TRUE(a.ok()) << a.status();
    a->stop();
    f.proc.scheduler().run_until_idle();
    ended.push_back(std::move(*a));
  }
  EXPECT_EQ(f.proc.mailbox_count(), 4u) << "the client and the three youngest tombstones";
  for (int i = 0; i < 5; ++i) {
    ended[i].ref().send(*f.client, Note{i});
    EXPECT_EQ(root_of_next_return(*f.client).invalid,
              i < 2 ? InvalidReason::kActorNotExist : InvalidReason::kActorStopped)
        << "actor " << i;
  }
  auto again = spawn<Brief>(f.proc, "ended-0", &started);  // its name is free
  EXPECT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(spawn<Brief>(f.proc, "ended-4", &started).status().code(),
            absl::StatusCode::kAlreadyExists);
}

// Children churned by a long-lived parent are reaped too, and the parent forgets them.
struct Churner : Actor, Handles<Note> {
  std::atomic<int>* started;
  explicit Churner(std::atomic<int>* s) : started(s) {}
  absl::Status handle(Context& cx, Note m) override {
    for (int i = 0; i < m.n; ++i) {
      absl::StatusOr<ActorHandle<Brief>> child = cx.spawn<Brief>("leaf", started);
      if (!child.ok()) return child.status();
      child->stop();
    }
    return absl::OkStatus();
  }
};

TEST(Actor, R_ACT_7_ChildrenOfALongLivedParentAreReaped) {
  ClockedFixture c(absl::ZeroDuration());
  test_support::ProcWithClient& f = c.pc;
  std::atomic<int> started{0};
  auto parent = *spawn<Churner>(f.proc, "parent", &started);
  size_t most = 0;
  for (int round = 0; round < 100; ++round) {
    parent.ref().send(*f.client, Note{500});
    f.proc.scheduler().run_until_idle();
    most = std::max(most, f.proc.mailbox_count());
  }
  EXPECT_EQ(started.load(), 100 * 500);
  f.proc.reap_tombstones();
  EXPECT_EQ(f.proc.mailbox_count(), 2u) << "the client and the parent";
  EXPECT_LE(most, 510u) << "one round of children at most";
  EXPECT_EQ(parent.status().state, ActorState::kIdle);
  parent.stop();  // stops no reaped child (they are gone), and ends cleanly
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(parent.status().state, ActorState::kStopped);
}

// Reaping while actors end on worker threads: a reaped mailbox is freed only after its actor's
// last slice (run under AddressSanitizer, this is the use-after-free check).
TEST(Actor, R_ACT_7_ReapingRacesNoEndingActor) {
  ProcOptions o = ProcOptions::threads(2);
  o.tombstone_grace = absl::ZeroDuration();
  Fixture f(o);
  std::atomic<int> started{0};
  for (int i = 0; i < 5'000; ++i) {
    auto a = spawn<Brief>(f.proc, "racer", &started);
    ASSERT_TRUE(a.ok()) << "cycle " << i << ": " << a.status();
    a->ref().send(*f.client, Note{i});
    if (i % 50 == 0) a->ref().send(*f.client, Boom{});
    a->stop();
    ASSERT_TRUE(a->wait(kDeadline).ok());
  }
  f.proc.reap_tombstones();
  EXPECT_LE(f.proc.mailbox_count(), 3u);
}

TEST(Actor, R_ACT_5_StopDrainsQueuedMessagesAndRefusesNewOnes) {
  Fixture f(ProcOptions::deterministic());
  std::vector<int> seen;
  auto a = *spawn<Recorder>(f.proc, "rec", &seen);
  for (int i = 1; i <= 3; ++i) a.ref().send(*f.client, Note{i});
  a.stop();
  EXPECT_EQ(a.status().state, ActorState::kCreated);  // nothing ran yet
  a.ref().send(*f.client, Note{4});                  // refused: the actor is stopping
  const auto& refused = root_of_next_return(*f.client);
  EXPECT_EQ(refused.invalid, InvalidReason::kActorStopped);
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(a.status().state, ActorState::kStopped);
}

// Counts what it handled.
struct Tally : Actor, Handles<Note> {
  std::atomic<int>* handled;
  explicit Tally(std::atomic<int>* h) : handled(h) {}
  absl::Status handle(Context&, Note) override {
    handled->fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }
};

// R-ACT-5: a message admitted before the stop is handled; a message after it is refused without
// being counted delivered. The race is between a sender's admission (state check, count, push)
// and the cell's "queue empty, finish stopping"; many rounds of senders racing a stop make a
// lost admission show up as a message both counted delivered and returned.
TEST(Actor, R_ACT_5_EveryMessageIsEitherHandledOrRefusedNeverBoth) {
  constexpr int kRounds = 20, kSenders = 3, kPer = 300;
  for (int round = 0; round < kRounds; ++round) {
    Fixture f(ProcOptions::threads(2));
    std::atomic<int> handled{0};
    auto a = *spawn<Tally>(f.proc, "tally", &handled);
    // Widen the window between admission and the push onto the actor's queue: the trace hook
    // runs right after a message is counted delivered.
    f.proc.set_trace(runtime::TraceHook{
        [](const runtime::TraceEvent& e) {
          if (e.kind == runtime::TraceEventKind::kDelivered) std::this_thread::yield();
        },
        wire::type_hash<Note>()});
    std::vector<std::unique_ptr<Client>> clients;
    for (int t = 0; t < kSenders; ++t) {
      clients.push_back(
          *Client::attach(f.proc, "sender" + std::string(1, static_cast<char>('a' + t))));
    }
    std::atomic<bool> go{false};
    std::vector<std::thread> senders;
    for (int t = 0; t < kSenders; ++t) {
      senders.emplace_back([&, t] {
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        for (int i = 0; i < kPer; ++i) a.ref().send(*clients[t], Note{i});
      });
    }
    go.store(true, std::memory_order_release);
    // Stop while the senders are still going (the first handled message says they started).
    const absl::Time give_up = absl::Now() + kDeadline;
    while (handled.load() == 0 && absl::Now() < give_up) std::this_thread::yield();
    a.stop("round over");
    for (auto& t : senders) t.join();
    ASSERT_TRUE(a.wait(kDeadline).ok());

    // Everything not handled comes back; a message bounced from the queue after the stop comes
    // back later than one refused at the door, so wait for each with a deadline.
    int refused = 0;
    const absl::Time returns_by = absl::Now() + kDeadline;
    for (size_t c = 0; handled.load() + refused < kSenders * kPer && absl::Now() < returns_by;
         c = (c + 1) % clients.size()) {
      auto back = clients[c]->next_undeliverable(absl::Milliseconds(1));
      if (!back.ok()) continue;
      ASSERT_NE((*back)->root_failure(), nullptr);
      EXPECT_EQ((*back)->root_failure()->invalid, InvalidReason::kActorStopped);
      ++refused;
    }
    ASSERT_EQ(handled.load() + refused, kSenders * kPer) << "round " << round;
    auto stats = f.proc.stats();
    // Returns are delivered to the clients' handler ports, so they are counted delivered too.
    ASSERT_EQ(stats.delivered, static_cast<uint64_t>(handled.load() + refused))
        << "round " << round << ": a message was counted delivered and also returned";
    ASSERT_EQ(stats.returned, static_cast<uint64_t>(refused)) << "round " << round;
  }
}

TEST(Actor, R_ACT_6_StoppedAndStoppingRefusalsCarryTheStopReason) {
  Fixture f(ProcOptions::deterministic());
  std::vector<int> seen;
  auto a = *spawn<Recorder>(f.proc, "rec", &seen);
  a.stop("maintenance window");
  a.ref().send(*f.client, Note{1});  // refused while stopping
  const auto& stopping = root_of_next_return(*f.client);
  EXPECT_EQ(stopping.invalid, InvalidReason::kActorStopped);
  EXPECT_EQ(stopping.detail, "the actor is stopping: maintenance window");
  f.proc.scheduler().run_until_idle();
  ASSERT_EQ(a.status().state, ActorState::kStopped);
  a.ref().send(*f.client, Note{2});  // refused by the tombstone
  const auto& stopped = root_of_next_return(*f.client);
  EXPECT_EQ(stopped.invalid, InvalidReason::kActorStopped);
  EXPECT_EQ(stopped.detail, "the actor stopped: maintenance window");
  EXPECT_NE(stopped.to_string().find("maintenance window"), std::string::npos)
      << stopped.to_string();
}

TEST(Actor, R_ACT_6_FailedRefusalsAndReturnedBacklogCarryTheError) {
  Fixture f(ProcOptions::deterministic());
  std::vector<int> seen;
  auto a = *spawn<Recorder>(f.proc, "rec", &seen);
  a.ref().send(*f.client, Boom{});
  a.ref().send(*f.client, Note{1});  // queued behind the failure: returned with the error
  f.proc.scheduler().run_until_idle();
  ASSERT_EQ(a.status().state, ActorState::kFailed);
  const auto& backlog = root_of_next_return(*f.client);
  EXPECT_EQ(backlog.invalid, InvalidReason::kActorFailed);
  EXPECT_NE(backlog.detail.find("the actor failed: "), std::string::npos) << backlog.detail;
  EXPECT_NE(backlog.detail.find("boom returned"), std::string::npos) << backlog.detail;
  a.ref().send(*f.client, Note{2});
  const auto& later = root_of_next_return(*f.client);
  EXPECT_EQ(later.invalid, InvalidReason::kActorFailed);
  EXPECT_NE(later.detail.find("boom returned"), std::string::npos) << later.detail;
  EXPECT_TRUE(seen.empty());
}

TEST(Actor, R_ACT_6_ALongErrorIsBoundedInTheFailure) {
  struct Verbose : Actor, Handles<Note> {
    absl::Status handle(Context&, Note) override {
      return absl::InternalError(std::string(1000, 'x') + "\nsecond line");
    }
  };
  Fixture f(ProcOptions::deterministic());
  auto a = *spawn<Verbose>(f.proc, "verbose");
  a.ref().send(*f.client, Note{1});
  f.proc.scheduler().run_until_idle();
  ASSERT_EQ(a.status().state, ActorState::kFailed);
  a.ref().send(*f.client, Note{2});
  const auto& failure = root_of_next_return(*f.client);
  EXPECT_EQ(failure.invalid, InvalidReason::kActorFailed);
  EXPECT_LE(failure.detail.size(), runtime::DeliveryFailure::kMaxDetail);
  EXPECT_NE(failure.detail.find("xxx"), std::string::npos);
  EXPECT_EQ(failure.detail.find('\n'), std::string::npos);
  EXPECT_LE(failure.to_string().size(), runtime::DeliveryFailure::kMaxLine);
}

TEST(Actor, R_FAIL_6_TrySendToAStoppedOrFailedActorFailsAtTheCall) {
  Fixture f(ProcOptions::deterministic());
  std::vector<int> seen;
  auto live = *spawn<Recorder>(f.proc, "live", &seen);
  auto stopped = *spawn<Recorder>(f.proc, "stopped", &seen);
  auto failed = *spawn<Recorder>(f.proc, "failed", &seen);
  EXPECT_TRUE(live.ref().try_send(*f.client, Note{1}).ok());
  stopped.stop("closed for the day");
  absl::Status stopping = stopped.ref().try_send(*f.client, Note{2});
  EXPECT_EQ(stopping.code(), absl::StatusCode::kFailedPrecondition) << stopping;
  EXPECT_NE(stopping.message().find("the actor is stopping: closed for the day"),
            std::string::npos)
      << stopping;
  failed.ref().send(*f.client, Boom{});
  f.proc.scheduler().run_until_idle();
  ASSERT_EQ(failed.status().state, ActorState::kFailed);

  absl::Status s = stopped.ref().try_send(*f.client, Note{3});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("actor stopped"), std::string::npos) << s;
  absl::Status fs = failed.ref().port<Note>().try_send(*f.client, Note{4});
  EXPECT_EQ(fs.code(), absl::StatusCode::kFailedPrecondition) << fs;
  EXPECT_NE(fs.message().find("actor failed"), std::string::npos) << fs;
  EXPECT_NE(fs.message().find("boom returned"), std::string::npos) << fs;
  EXPECT_EQ(seen, (std::vector<int>{1}));
  EXPECT_EQ(f.client->next_undeliverable(absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded)
      << "a refusal reported at the call is not also returned";
}

// Sends a Note wherever told; records the hooks it went through.
struct Policy : Actor, Handles<SendTo> {
  bool absorb_invalid;
  std::vector<std::string>* hooks;
  Policy(bool a, std::vector<std::string>* h) : absorb_invalid(a), hooks(h) {}
  absl::Status handle(Context& cx, SendTo m) override {
    m.target.send(cx, Note{7});
    return absl::OkStatus();
  }
  absl::Status on_invalid_reference(Context& cx, const runtime::MessageEnvelope& env) override {
    hooks->push_back("invalid_reference");
    if (absorb_invalid) return absl::OkStatus();
    return Actor::on_invalid_reference(cx, env);
  }
  absl::Status on_port_gone(Context& cx, const runtime::MessageEnvelope& env) override {
    hooks->push_back("port_gone");
    return Actor::on_port_gone(cx, env);
  }
  absl::Status on_transport_failure(Context& cx, const runtime::MessageEnvelope& env) override {
    hooks->push_back("transport");
    return Actor::on_transport_failure(cx, env);
  }
};

runtime::PortAddr port_of(const runtime::ActorAddr& a) {
  return a.port(runtime::Port::handler(wire::type_hash<Note>()));
}

TEST(Actor, R_FAIL_5_InvalidReferenceFailsTheActorByDefault) {
  Fixture f(ProcOptions::deterministic());
  std::vector<std::string> hooks;
  auto p = *spawn<Policy>(f.proc, "policy", false, &hooks);
  auto ghost = f.proc.actor_addr(runtime::Uid::singleton(*runtime::Label::parse("ghost")));
  p.ref().send(*f.client, SendTo{PortRef<Note>(port_of(ghost))});
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(hooks, (std::vector<std::string>{"invalid_reference"}));
  EXPECT_EQ(p.status().state, ActorState::kFailed);
  EXPECT_NE(p.status().reason.find("actor does not exist"), std::string::npos)
      << p.status().reason;
}

TEST(Actor, R_FAIL_5_HooksAreOverridable) {
  Fixture f(ProcOptions::deterministic());
  std::vector<std::string> hooks;
  auto p = *spawn<Policy>(f.proc, "policy", true, &hooks);
  auto ghost = f.proc.actor_addr(runtime::Uid::singleton(*runtime::Label::parse("ghost")));
  p.ref().send(*f.client, SendTo{PortRef<Note>(port_of(ghost))});
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(hooks, (std::vector<std::string>{"invalid_reference"}));
  EXPECT_EQ(p.status().state, ActorState::kIdle);
}

TEST(Actor, R_FAIL_5_PortGoneAndTransportFailuresAreAbsorbed) {
  Fixture f(ProcOptions::deterministic());
  std::vector<std::string> hooks;
  auto p = *spawn<Policy>(f.proc, "policy", false, &hooks);
  PortRef<Note> gone;
  {
    auto [handle, rx] = runtime::open_port<Note>(*f.client);
    gone = handle.bind();
  }  // receiver dropped: the port is gone
  runtime::ProcId other{runtime::Uid::instance(424242)};
  runtime::ActorAddr elsewhere{
      runtime::ActorId{other, runtime::Uid::singleton(*runtime::Label::parse("x"))},
      f.proc.location()};
  p.ref().send(*f.client, SendTo{gone});
  p.ref().send(*f.client, SendTo{PortRef<Note>(port_of(elsewhere))});
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(hooks, (std::vector<std::string>{"port_gone", "transport"}));
  EXPECT_EQ(p.status().state, ActorState::kIdle);
  auto stats = f.proc.stats();
  EXPECT_EQ(stats.port_gone, 1u);
  EXPECT_EQ(stats.transport, 1u);
}

TEST(Actor, BadPayloadToAnActorPortIsProtocolMismatchAndTheActorKeepsWorking) {
  Fixture f(ProcOptions::deterministic());
  std::vector<int> seen;
  auto a = *spawn<Recorder>(f.proc, "rec", &seen);
  auto dest = a.addr().port(runtime::Port::handler(wire::type_hash<Note>()));
  for (std::string bytes : {std::string(), std::string("\x01", 1), std::string(64, '\xff')}) {
    auto env = runtime::MessageEnvelope::make(
        f.client->self_addr(), dest, wire::Any::from_bytes(wire::type_hash<Note>(), bytes));
    f.proc.send(std::move(env));
    const auto& failure = root_of_next_return(*f.client);
    EXPECT_EQ(failure.invalid, InvalidReason::kProtocolMismatch) << failure.to_string();
  }
  a.ref().send(*f.client, Note{5});
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(seen, (std::vector<int>{5}));
  EXPECT_EQ(a.status().state, ActorState::kIdle);
}

// Spawns `count` children from one handler and reports when all have initialized.
struct Leaf : Actor, Handles<Note> {
  std::atomic<int>* started;
  explicit Leaf(std::atomic<int>* s) : started(s) {}
  absl::Status init(Context&) override {
    started->fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Note) override { return absl::OkStatus(); }
};
struct Spawner : Actor, Handles<SpawnChildren> {
  std::atomic<int>* started;
  explicit Spawner(std::atomic<int>* s) : started(s) {}
  absl::Status handle(Context& cx, SpawnChildren m) override {
    for (int i = 0; i < m.count; ++i) {
      if (absl::Status s = cx.spawn<Leaf>("leaf", started).status(); !s.ok()) return s;
    }
    m.done.send(cx, Note{m.count});
    return absl::OkStatus();
  }
};

double seconds_to_spawn(int count) {
  Fixture f(ProcOptions::threads(2));
  std::atomic<int> started{0};
  auto spawner = *spawn<Spawner>(f.proc, "spawner", &started);
  auto [done, rx] = runtime::open_port<Note>(*f.client);
  auto t0 = std::chrono::steady_clock::now();
  spawner.ref().send(*f.client, SpawnChildren{count, done.bind()});
  EXPECT_TRUE(rx.recv(absl::Seconds(60)).ok());
  auto deadline = t0 + std::chrono::seconds(60);
  while (started.load() < count && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(started.load(), count);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CAF 0.17's work-stealing scheduler degrades super-linearly when one handler spawns tens of
// thousands of children; postal must stay linear. Compared against 10 000 children measured in
// the same run, 40 000 must take well under the 16× a quadratic scheduler would need.
TEST(Actor, SpawningFortyThousandChildrenIsLinear) {
  seconds_to_spawn(2000);  // warm up allocators
  double t10 = seconds_to_spawn(10'000);
  double t40 = seconds_to_spawn(40'000);
  EXPECT_LT(t40, 8 * t10 + 0.05) << "10k: " << t10 << " s, 40k: " << t40 << " s";
}

}  // namespace
}  // namespace postal::actors
