// Actor timers (R-SUP-3): send_after, periodic timers, cancellation by handle, bound to the
// actor's life, on virtual time on a deterministic proc.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "postal/postal.h"
#include "support/count_msg.h"
#include "support/virtual_time_proc.h"

namespace {

using Beat = postal::test_support::CountMsg;  // one number
struct Arm {  // sets timers: once after `once_ms` (when > 0), every `every_ms` (when > 0)
  int64_t once_ms = 0;
  int64_t every_ms = 0;
  template <class A>
  void serialize(A& a) {
    a(once_ms, every_ms);
  }
};
struct Disarm {  // cancels the periodic timer
  template <class A>
  void serialize(A&) {}
};
struct Fail {
  template <class A>
  void serialize(A&) {}
};

}  // namespace

POSTAL_MESSAGE(Arm, "test.timer.Arm");
POSTAL_MESSAGE(Disarm, "test.timer.Disarm");
POSTAL_MESSAGE(Fail, "test.timer.Fail");

namespace postal::actors {
namespace {

using test_support::VirtualTimeProc;

struct Seen {
  std::vector<int> beats;
  std::vector<bool> cancelled;
};

// Sends its Beats to `report` when set (a client's port), else to itself.
struct Metronome : Actor, Handles<Beat, Arm, Disarm, Fail> {
  Seen* seen;
  runtime::PortRef<Beat> report;
  TimerHandle periodic;
  explicit Metronome(Seen* s, runtime::PortRef<Beat> r = {}) : seen(s), report(std::move(r)) {}
  runtime::PortRef<Beat> target(Context& cx) {
    return report.addr() == runtime::PortAddr{} ? cx.self<Metronome>().port<Beat>() : report;
  }
  absl::Status handle(Context&, Beat b) override {
    seen->beats.push_back(b.n);
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Arm a) override {
    if (a.once_ms > 0) cx.send_after(absl::Milliseconds(a.once_ms), target(cx), Beat{1});
    if (a.every_ms > 0)
      periodic = cx.send_every(absl::Milliseconds(a.every_ms), target(cx), Beat{2});
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Disarm) override {
    seen->cancelled.push_back(cx.cancel(periodic));
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Fail) override { return absl::InternalError("fail"); }
};

// A metronome on virtual time that has handled `arm`.
struct Armed {
  explicit Armed(Arm arm) {
    m = *spawn<Metronome>(t.proc, "metronome", &seen);
    m.ref().send(t.client, arm);
    t.run();
  }
  VirtualTimeProc t;
  Seen seen;
  ActorHandle<Metronome> m;
};

TEST(Timers, R_SUP_3_SendAfterFiresOnVirtualTime) {
  Armed a(Arm{5000, 0});
  VirtualTimeProc& t = a.t;
  Seen& seen = a.seen;
  t.advance(absl::Milliseconds(4999));
  EXPECT_TRUE(seen.beats.empty());
  t.advance(absl::Milliseconds(1));
  EXPECT_EQ(seen.beats, std::vector<int>{1});
  t.advance(absl::Hours(1));
  EXPECT_EQ(seen.beats, std::vector<int>{1});  // once
}

TEST(Timers, R_SUP_3_APeriodicTimerFiresEachPeriodUntilCancelledByItsHandle) {
  Armed a(Arm{0, 1000});
  VirtualTimeProc& t = a.t;
  Seen& seen = a.seen;
  ActorHandle<Metronome>& m = a.m;
  for (int i = 0; i < 3; ++i) t.advance(absl::Seconds(1));
  EXPECT_EQ(seen.beats, (std::vector<int>{2, 2, 2}));
  m.ref().send(t.client, Disarm{});
  m.ref().send(t.client, Disarm{});
  t.run();
  EXPECT_EQ(seen.cancelled, (std::vector<bool>{true, false}));  // the second finds none
  t.advance(absl::Seconds(10));
  EXPECT_EQ(seen.beats.size(), 3u);
  EXPECT_EQ(t.proc.timers().size(), 0u);
}

TEST(Timers, R_SUP_3_AStoppedActorsTimersAreCancelled) {
  Armed a(Arm{1000, 500});
  VirtualTimeProc& t = a.t;
  Seen& seen = a.seen;
  ActorHandle<Metronome>& m = a.m;
  ASSERT_EQ(t.proc.timers().size(), 2u);
  m.stop();
  EXPECT_EQ(t.proc.timers().size(), 0u);  // at the stop, not when the drain ends
  t.run();
  const runtime::ProcStatsSnapshot before = t.proc.stats();
  t.advance(absl::Seconds(5));
  EXPECT_TRUE(seen.beats.empty());
  EXPECT_EQ(t.proc.stats().posted, before.posted);  // nothing was even sent
}

TEST(Timers, R_SUP_3_AFailedOrRestartedActorsTimersAreCancelled) {
  VirtualTimeProc t;
  Seen seen, seen2;
  auto failing = *spawn<Metronome>(t.proc, "failing", &seen);
  auto restarting = *spawn<Metronome>(
      t.proc,
      SpawnOptions{Supervision::one_for_one().with_backoff(absl::Seconds(1), absl::Seconds(1))},
      "restarting", &seen2);
  for (auto* m : {&failing, &restarting}) {
    m->ref().send(t.client, Arm{0, 500});
    m->ref().send(t.client, Fail{});
  }
  t.run();
  EXPECT_EQ(failing.status().state, ActorState::kFailed);
  EXPECT_EQ(t.proc.timers().size(), 1u);  // the restart's backoff only
  t.advance(absl::Seconds(5));
  EXPECT_EQ(restarting.status().state, ActorState::kIdle);
  EXPECT_TRUE(seen.beats.empty());
  EXPECT_TRUE(seen2.beats.empty());  // the new incarnation set none
}

TEST(Timers, R_SUP_3_OnAThreadedProcTimersRunOnRealTime) {
  test_support::ProcWithClient pc(runtime::ProcOptions::threads(2), "test");
  auto [port, receiver] = runtime::open_port<Beat>(*pc.client);
  Seen seen;
  auto m = *spawn<Metronome>(pc.proc, "metronome", &seen, port.bind());
  m.ref().send(*pc.client, Arm{20, 5});
  std::vector<int> got;
  while (got.size() < 4) {  // three periodic beats and the one-shot, in any order
    absl::StatusOr<Beat> b = receiver.recv(absl::Seconds(10));
    ASSERT_TRUE(b.ok()) << b.status();
    got.push_back(b->n);
  }
  EXPECT_NE(std::find(got.begin(), got.end(), 1), got.end());
}

}  // namespace
}  // namespace postal::actors
