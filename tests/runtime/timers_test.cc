// runtime::Timers, the proc's timers (R-SUP-3): due order, periods, cancellation, the thread.
#include "postal/runtime/timers.h"

#include <algorithm>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace postal::runtime {
namespace {

struct ManualTimers {
  absl::Time now = absl::FromUnixSeconds(1000);
  Timers timers{[this] { return now; }, /*threaded=*/false};
};

TEST(Timers, R_SUP_3_CallbacksFireWhenDueInDueOrder) {
  ManualTimers m;
  std::vector<int> fired;
  m.timers.schedule(m.now + absl::Seconds(2), [&] { fired.push_back(2); });
  m.timers.schedule(m.now + absl::Seconds(1), [&] { fired.push_back(1); });
  const uint64_t three = m.timers.schedule(m.now + absl::Seconds(3), [&] { fired.push_back(3); });
  EXPECT_EQ(m.timers.fire_due(), 0u);
  m.now += absl::Seconds(2);
  EXPECT_EQ(m.timers.fire_due(), 2u);
  EXPECT_EQ(fired, (std::vector<int>{1, 2}));
  EXPECT_TRUE(m.timers.pending(three));
  EXPECT_TRUE(m.timers.cancel(three));
  EXPECT_FALSE(m.timers.cancel(three));
  m.now += absl::Hours(1);
  EXPECT_EQ(m.timers.fire_due(), 0u);
  EXPECT_EQ(m.timers.size(), 0u);
}

TEST(Timers, R_SUP_3_APeriodicTimerKeepsItsScheduleAndStopsWhenCancelledFromItsCallback) {
  ManualTimers m;
  int fired = 0;
  uint64_t id = 0;
  id = m.timers.schedule(
      m.now + absl::Seconds(1),
      [&] {
        if (++fired == 3) m.timers.cancel(id);
      },
      absl::Seconds(1));
  for (int i = 0; i < 5; ++i) {
    m.now += absl::Seconds(1);
    m.timers.fire_due();
  }
  EXPECT_EQ(fired, 3);
  EXPECT_FALSE(m.timers.pending(id));
  // A late fire_due fires a periodic timer once, not once per missed period.
  int ticks = 0;
  m.timers.schedule(
      m.now + absl::Seconds(1), [&] { ++ticks; }, absl::Seconds(1));
  m.now += absl::Seconds(10);
  m.timers.fire_due();
  EXPECT_EQ(ticks, 1);
}

TEST(Timers, R_SUP_3_WithAThreadTheyFireWithoutAnyoneAsking) {
  Timers timers(nullptr, /*threaded=*/true);
  absl::Notification late, early;
  timers.schedule(absl::Now() + absl::Seconds(30), [&] { late.Notify(); });
  // Ahead of the one the thread naps for: it wakes for it.
  timers.schedule(absl::Now() + absl::Milliseconds(1), [&] { early.Notify(); });
  EXPECT_TRUE(early.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_FALSE(late.HasBeenNotified());
  timers.stop();
  EXPECT_EQ(timers.schedule(absl::Now(), [] {}), 0u);  // stopped: refused
}

// A timer due after the thread's nap ends does not wake it (a request's timeout is set and
// cancelled on every request); it fires all the same when the nap ends and the thread looks.
TEST(Timers, R_SUP_3_ATimerDueAfterTheThreadsNapStillFiresWhenTheNapEnds) {
  Timers timers(nullptr, /*threaded=*/true);
  absl::Notification first, behind;
  timers.schedule(absl::Now() + absl::Milliseconds(1), [&] { first.Notify(); });
  ASSERT_TRUE(first.WaitForNotificationWithTimeout(absl::Seconds(10)));  // the thread runs
  // The queue is empty: the thread naps Timers::kMaxNap; this one is due after that.
  timers.schedule(absl::Now() + Timers::kMaxNap + absl::Milliseconds(50), [&] { behind.Notify(); });
  EXPECT_TRUE(behind.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

// Cancelled timers leave stale keys in the heap until they reach its top or a rebuild drops
// them; neither may lose, reorder or fire a live timer, nor fire a cancelled one.
TEST(Timers, R_SUP_3_ManyCancelledTimersLeaveTheLiveOnesInDueOrder) {
  ManualTimers m;
  std::vector<int> fired;
  std::vector<uint64_t> cancelled;
  for (int i = 0; i < 1000; ++i) {  // every tenth stays; the rest are set and cancelled
    const int due_s = 1 + (i * 7919) % 1000;  // a permutation of 1..1000 seconds
    const uint64_t id =
        m.timers.schedule(m.now + absl::Seconds(due_s), [&fired, due_s] { fired.push_back(due_s); });
    if (i % 10 == 0) continue;
    cancelled.push_back(id);
    EXPECT_TRUE(m.timers.cancel(id));
  }
  EXPECT_EQ(m.timers.size(), 100u);
  for (uint64_t id : cancelled) EXPECT_FALSE(m.timers.pending(id));
  m.now += absl::Seconds(500);
  const size_t first = m.timers.fire_due();
  m.now += absl::Seconds(500);
  EXPECT_EQ(first + m.timers.fire_due(), 100u);
  ASSERT_EQ(fired.size(), 100u);
  EXPECT_TRUE(std::is_sorted(fired.begin(), fired.end()));
  EXPECT_EQ(m.timers.size(), 0u);
}

}  // namespace
}  // namespace postal::runtime
