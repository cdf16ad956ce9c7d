// Tests for the Scheduler (scheduler.h): deterministic stepping, worker threads, slices and
// budgets, and fiber waits that never block a worker (R-ACT-2). Schedulables here are simple
// counters standing in for actor cells.
#include "postal/runtime/scheduler.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "postal/runtime/message_envelope.h"
#include "postal/runtime/receiver_queue.h"

namespace postal::runtime {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(20);

// Counts completed work across many schedulables and lets the test wait for a total.
class Tally {
 public:
  void add(int n = 1) {
    absl::MutexLock lock(&mu_);
    done_ += n;
  }
  // True when `total` was reached before the deadline.
  bool wait_for(int total, absl::Duration timeout = kDeadline) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, total]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return done_ >= total; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }
  int value() {
    absl::MutexLock lock(&mu_);
    return done_;
  }

 private:
  absl::Mutex mu_;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
};

// An "actor" with `pending` messages: each slice handles at most `budget` of them and makes
// itself runnable again while some remain, as an actor cell does.
class Counter final : public Schedulable {
 public:
  Counter(Scheduler& sched, int id, Tally* tally = nullptr, std::vector<int>* order = nullptr)
      : sched_(sched), id_(id), tally_(tally), order_(order) {}

  void add_messages(int n) { pending_.fetch_add(n); }

  void run_slice(size_t budget) override {
    slices_.fetch_add(1);
    max_budget_seen_ = std::max(max_budget_seen_.load(), budget);
    if (sched_.on_worker_thread()) on_worker_.store(true);
    int ran = 0;
    while (static_cast<size_t>(ran) < budget && pending_.load() > 0) {
      pending_.fetch_sub(1);
      handled_.fetch_add(1);
      if (order_ != nullptr) order_->push_back(id_);
      ++ran;
    }
    if (pending_.load() > 0) sched_.schedule(this);
    if (tally_ != nullptr) tally_->add(ran);
  }

  int handled() const { return handled_.load(); }
  int slices() const { return slices_.load(); }
  size_t max_budget_seen() const { return max_budget_seen_.load(); }
  bool ran_on_worker() const { return on_worker_.load(); }

 private:
  Scheduler& sched_;
  int id_;
  Tally* tally_;
  std::vector<int>* order_;
  std::atomic<int> pending_{0};
  std::atomic<int> handled_{0};
  std::atomic<int> slices_{0};
  std::atomic<size_t> max_budget_seen_{0};
  std::atomic<bool> on_worker_{false};
};

// Stops the scheduler on every exit path, before the schedulables it may still run are destroyed
// (declare it after them).
struct StopOnExit {
  Scheduler& sched;
  ~StopOnExit() { sched.stop(); }
};

// --- Deterministic mode --------------------------------------------------------------------------

TEST(SchedulerDeterministic, RunsNothingUntilStep) {
  Scheduler sched(SchedulerOptions::deterministic());
  sched.start();  // a no-op in manual mode
  EXPECT_TRUE(sched.manual());
  EXPECT_EQ(sched.worker_count(), 0);
  Counter c(sched, 1);
  c.add_messages(2);
  sched.schedule(&c);
  EXPECT_EQ(c.handled(), 0) << "scheduling alone must run nothing";

  EXPECT_TRUE(sched.step());
  EXPECT_EQ(c.handled(), 1) << "one step runs one message";
  EXPECT_TRUE(sched.step());
  EXPECT_EQ(c.handled(), 2);
  EXPECT_FALSE(sched.step()) << "nothing left to run";
  EXPECT_EQ(c.handled(), 2);
}

TEST(SchedulerDeterministic, StepWithNothingRunnableReturnsFalse) {
  Scheduler sched(SchedulerOptions::deterministic());
  EXPECT_FALSE(sched.step());
  EXPECT_EQ(sched.run_until_idle(), 0u);
}

TEST(SchedulerDeterministic, RunUntilIdleReturnsTheStepsRun) {
  Scheduler sched(SchedulerOptions::deterministic());
  Counter a(sched, 1);
  Counter b(sched, 2);
  a.add_messages(3);
  b.add_messages(4);
  sched.schedule(&a);
  sched.schedule(&b);
  EXPECT_EQ(sched.run_until_idle(), 7u);
  EXPECT_EQ(a.handled(), 3);
  EXPECT_EQ(b.handled(), 4);
  EXPECT_EQ(sched.run_until_idle(), 0u);
}

TEST(SchedulerDeterministic, RunUntilIdleStopsAtMaxSteps) {
  Scheduler sched(SchedulerOptions::deterministic());
  Counter a(sched, 1);
  a.add_messages(10);
  sched.schedule(&a);
  EXPECT_EQ(sched.run_until_idle(4), 4u);
  EXPECT_EQ(a.handled(), 4);
  EXPECT_EQ(sched.run_until_idle(), 6u);
  EXPECT_EQ(a.handled(), 10);
}

TEST(SchedulerDeterministic, RunnablesTakeTurnsInFifoOrder) {
  Scheduler sched(SchedulerOptions::deterministic());
  std::vector<int> order;
  Counter a(sched, 1, nullptr, &order);
  Counter b(sched, 2, nullptr, &order);
  Counter c(sched, 3, nullptr, &order);
  a.add_messages(2);
  b.add_messages(2);
  c.add_messages(1);
  sched.schedule(&a);
  sched.schedule(&b);
  sched.schedule(&c);
  EXPECT_EQ(sched.run_until_idle(), 5u);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 1, 2})) << "a busy actor goes to the back";
}

// A handler that waits for a reply in deterministic mode: step() returns instead of hanging, and
// the waiter resumes on a later step once the reply is there.
TEST(SchedulerDeterministic, R_ACT_2_BlockedHandlerDoesNotHangStep) {
  Scheduler sched(SchedulerOptions::deterministic());
  ReceiverQueue replies(sched);
  struct Waiter final : Schedulable {
    explicit Waiter(ReceiverQueue& q) : q(q) {}
    void run_slice(size_t) override {
      started = true;
      result = q.wait(absl::Seconds(30)).ok() ? 1 : -1;
    }
    ReceiverQueue& q;
    bool started = false;
    int result = 0;
  } waiter(replies);
  Counter other(sched, 2);
  other.add_messages(1);

  sched.schedule(&waiter);
  sched.schedule(&other);
  EXPECT_TRUE(sched.step());
  EXPECT_TRUE(waiter.started);
  EXPECT_EQ(waiter.result, 0) << "still waiting";
  EXPECT_TRUE(sched.step()) << "other runnables still run while the handler waits";
  EXPECT_EQ(other.handled(), 1);

  replies.deliver(std::make_unique<MessageEnvelope>());
  EXPECT_FALSE(sched.step());  // lets the resumed waiter finish; nothing else is runnable
  EXPECT_EQ(waiter.result, 1);
}

// BUG (runtime/src/scheduler.cc, Scheduler::step / ~Scheduler in manual mode): when a stepped
// handler blocks (a fiber wait inside BlockingScope), step() detaches its fiber and returns. If
// the scheduler — typically a deterministic Proc at the end of a test whose actor is still in
// request() — is destroyed before that wait ends, the fiber stays suspended on the test thread's
// fiber scheduler. The next fiber switch on that thread after the wait's deadline (any later
// step() or receive, e.g. in the next test) resumes it inside freed objects (the ReceiverQueue it
// waited on, the actor cell, the scheduler). Suggested fix: the manual scheduler counts its
// blocked stepping fibers and, on stop()/destruction, either completes their waits with a
// cancellation (ReceiverQueue::fail with "proc stopped") and steps them to the end, or aborts with
// a message naming the blocked actor instead of leaving a dangling fiber. Disabled until then.
// Observed: release build segfaults; the asan (Debug) build aborts in Boost's
// `~condition_variable_any(): Assertion wait_queue_.empty()` when the queue is destroyed under
// the suspended waiter. (With an actor, the queue lives on the suspended fiber's stack instead,
// and the resumed handler runs on inside the destroyed actor cell.)
TEST(SchedulerDeterministic, StopCancelsAHandlerBlockedInAWaitAndLetsItFinish) {
  // The waiter's queue lives on its own fiber (as a request's reply port does); stopping the
  // scheduler must wake it with a cancellation and run it to its end, not leave it dangling.
  struct Waiter final : Schedulable {
    void run_slice(size_t) override {
      auto& sched = *scheduler;
      ReceiverQueue replies(sched);
      absl::StatusOr<EnvelopePtr> got = replies.wait(absl::Seconds(30));
      result = got.status();
      finished = true;
    }
    Scheduler* scheduler = nullptr;
    absl::Status result;
    bool finished = false;
  };
  Waiter waiter;
  const absl::Time start = absl::Now();
  {
    Scheduler sched(SchedulerOptions::deterministic());
    waiter.scheduler = &sched;
    sched.schedule(&waiter);
    ASSERT_TRUE(sched.step());  // the handler is now blocked in its wait
    EXPECT_FALSE(waiter.finished);
  }  // destroying the scheduler stops it
  EXPECT_TRUE(waiter.finished);
  EXPECT_FALSE(waiter.result.ok());
  EXPECT_NE(waiter.result.code(), absl::StatusCode::kDeadlineExceeded) << waiter.result;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  Scheduler next(SchedulerOptions::deterministic());
  EXPECT_FALSE(next.step());
}

// --- Worker threads ------------------------------------------------------------------------------

TEST(SchedulerThreads, ManyActorsMadeRunnableFromAForeignThreadAllRun) {
  SchedulerOptions options;
  options.workers = 2;
  Scheduler sched(options);
  sched.start();
  EXPECT_EQ(sched.worker_count(), 2);
  EXPECT_FALSE(sched.on_worker_thread());

  constexpr int kActors = 2000;
  Tally tally;
  std::vector<std::unique_ptr<Counter>> actors;
  for (int i = 0; i < kActors; ++i) {
    actors.push_back(std::make_unique<Counter>(sched, i, &tally));
    actors.back()->add_messages(1);
  }
  StopOnExit guard{sched};
  for (auto& a : actors) sched.schedule(a.get());  // from the test thread: the inject queue
  ASSERT_TRUE(tally.wait_for(kActors)) << "ran " << tally.value() << " of " << kActors;
  for (auto& a : actors) {
    EXPECT_EQ(a->handled(), 1);
    EXPECT_TRUE(a->ran_on_worker());
  }
  EXPECT_GE(sched.stats().slices, uint64_t{kActors});
  sched.stop();
}

TEST(SchedulerThreads, ConcurrentForeignThreadsMakingActorsRunnableLoseNothing) {
  SchedulerOptions options = SchedulerOptions::low_power();  // workers sleep: exercises wake-ups
  options.workers = 2;
  Scheduler sched(options);
  sched.start();
  constexpr int kThreads = 4;
  constexpr int kEach = 500;
  Tally tally;
  std::vector<std::unique_ptr<Counter>> actors;
  for (int i = 0; i < kThreads * kEach; ++i) {
    actors.push_back(std::make_unique<Counter>(sched, i, &tally));
    actors.back()->add_messages(1);
  }
  StopOnExit guard{sched};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) sched.schedule(actors[t * kEach + i].get());
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(tally.wait_for(kThreads * kEach))
      << "ran " << tally.value() << " of " << kThreads * kEach;
  sched.stop();
}

TEST(SchedulerThreads, SlicesHonourTheBudgetAndBusyActorsFinish) {
  SchedulerOptions options;
  options.workers = 2;
  options.budget = 16;
  Scheduler sched(options);
  sched.start();
  Tally tally;
  Counter busy(sched, 1, &tally);
  Counter light(sched, 2, &tally);
  busy.add_messages(1000);
  light.add_messages(3);
  StopOnExit guard{sched};
  sched.schedule(&busy);
  sched.schedule(&light);
  ASSERT_TRUE(tally.wait_for(1003)) << "ran " << tally.value();
  EXPECT_EQ(busy.handled(), 1000);
  EXPECT_EQ(light.handled(), 3);
  EXPECT_EQ(busy.max_budget_seen(), 16u);
  EXPECT_GE(busy.slices(), 1000 / 16) << "a slice handles at most `budget` messages";
  sched.stop();
}

// R-ACT-2: a handler waiting for a reply waits on its fiber; the worker thread keeps running other
// actors — with one worker, the actor that sends the reply could not run otherwise.
TEST(SchedulerThreads, R_ACT_2_AWaitingHandlerDoesNotBlockItsWorker) {
  SchedulerOptions options;
  options.workers = 1;
  Scheduler sched(options);
  sched.start();
  ReceiverQueue replies(sched);
  Tally tally;

  struct Replier final : Schedulable {
    Replier(ReceiverQueue& q, Tally& t) : q(q), t(t) {}
    void run_slice(size_t) override {
      q.deliver(std::make_unique<MessageEnvelope>());
      t.add();
    }
    ReceiverQueue& q;
    Tally& t;
  } replier(replies, tally);

  struct Requester final : Schedulable {
    Requester(Scheduler& s, ReceiverQueue& q, Schedulable& r, Tally& t) : s(s), q(q), r(r), t(t) {}
    void run_slice(size_t) override {
      s.schedule(&r);  // the replier can only run on this same (only) worker
      ok = q.wait(absl::Seconds(10)).ok();
      t.add();
    }
    Scheduler& s;
    ReceiverQueue& q;
    Schedulable& r;
    Tally& t;
    std::atomic<bool> ok{false};
  } requester(sched, replies, replier, tally);
  StopOnExit guard{sched};

  sched.schedule(&requester);
  ASSERT_TRUE(tally.wait_for(2));
  EXPECT_TRUE(requester.ok.load()) << "the reply never came: the wait blocked the worker";
  EXPECT_GE(sched.stats().runners, 2u) << "an extra runner fiber covered the blocked handler";
  sched.stop();
}

// The server spin (scheduler.h): a worker whose last idle gap was within it spins that long the
// next time, so a request that follows its predecessor's answer that soon finds it awake; a
// longer gap, or the spin off, falls back to the plain spin; low_power never spins. (What it buys
// end to end is measured in mail_publish_bench, docs/benchmarks.md: a timed test of thread
// wake-ups would depend on the machine's load.)
TEST(SchedulerThreads, TheServerSpinIsUsedOnlyAfterAnIdleGapWithinIt) {
  using std::chrono::microseconds;
  SchedulerOptions options;
  options.workers = 1;
  options.spin = absl::Microseconds(5);
  Scheduler sched(options);
  EXPECT_EQ(sched.idle_spin_after(microseconds(100)), microseconds(5));  // off by default

  sched.raise_server_spin(absl::Microseconds(250));
  sched.raise_server_spin(absl::Microseconds(1));  // raising never lowers it
  EXPECT_EQ(sched.server_spin(), absl::Microseconds(250));
  EXPECT_EQ(sched.idle_spin_after(microseconds(100)), microseconds(250));
  EXPECT_EQ(sched.idle_spin_after(microseconds(250)), microseconds(250));
  EXPECT_EQ(sched.idle_spin_after(microseconds(251)), microseconds(5));
  EXPECT_EQ(sched.idle_spin_after(std::chrono::nanoseconds::max()), microseconds(5));
  sched.raise_server_spin(absl::InfiniteDuration());  // clamped, no overflow in a deadline
  EXPECT_EQ(sched.server_spin(), Scheduler::kMaxServerSpin);

  SchedulerOptions low = SchedulerOptions::low_power();
  low.server_spin = absl::Microseconds(250);
  Scheduler quiet(low);
  EXPECT_EQ(quiet.server_spin(), absl::Microseconds(250));
  EXPECT_EQ(quiet.idle_spin_after(microseconds(100)), microseconds(0));
}

// Counts its slices; the test thread polls the count.
class Served final : public Schedulable {
 public:
  void run_slice(size_t) override { served_.fetch_add(1, std::memory_order_release); }
  // True once `n` slices ran; false at the deadline.
  bool wait_for(int n) const {
    const absl::Time deadline = absl::Now() + kDeadline;
    while (served_.load(std::memory_order_acquire) < n) {
      if (absl::Now() > deadline) return false;
    }
    return true;
  }

 private:
  std::atomic<int> served_{0};
};

// Serves `requests` one at a time from this thread, each ~20 µs after the last was served (a
// paced load, not a wait for a message); returns the scheduler's stats at the end.
SchedulerStats serve_paced_requests(Scheduler& sched, int requests) {
  Served server;
  StopOnExit guard{sched};
  sched.start();
  for (int i = 1; i <= requests; ++i) {
    sched.schedule(&server);
    EXPECT_TRUE(server.wait_for(i));
    const absl::Time next = absl::Now() + absl::Microseconds(20);
    while (absl::Now() < next) {
    }
  }
  SchedulerStats stats = sched.stats();
  sched.stop();
  return stats;
}

// The worker learns its idle gaps: with the server spin on, work that keeps coming back within it
// makes the worker take the long spin (at least once in 50 requests, however loaded the machine:
// one gap within 5 ms is enough); with it off, never.
TEST(SchedulerThreads, AWorkerTakesTheServerSpinAfterAGapWithinItAndNeverWithItOff) {
  SchedulerOptions options;
  options.workers = 1;
  options.spin = absl::Microseconds(5);
  Scheduler plain(options);
  EXPECT_EQ(serve_paced_requests(plain, 50).server_spins, 0u);

  options.server_spin = absl::Milliseconds(5);
  Scheduler server(options);
  EXPECT_GE(serve_paced_requests(server, 50).server_spins, 1u);
}

TEST(SchedulerThreads, StopIsIdempotentAndJoinsWorkers) {
  SchedulerOptions options;
  options.workers = 2;
  Scheduler sched(options);
  sched.start();
  sched.start();
  Tally tally;
  Counter c(sched, 1, &tally);
  c.add_messages(1);
  StopOnExit guard{sched};
  sched.schedule(&c);
  ASSERT_TRUE(tally.wait_for(1));
  sched.stop();
  sched.stop();
  EXPECT_EQ(c.handled(), 1);
}

}  // namespace
}  // namespace postal::runtime
