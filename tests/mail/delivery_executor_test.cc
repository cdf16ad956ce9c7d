// The mem provider's DeliveryExecutor (mail/src/mem/delivery_executor.h): shutdown drops queued
// tasks without running them — also those of a strand whose task was running when it stopped,
// which would otherwise keep what they capture (a subscription that owns the strand) alive.
#include "mem/delivery_executor.h"

#include <atomic>
#include <memory>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "support/wait_for.h"

namespace postal::mail::mem_internal {
namespace {

TEST(DeliveryExecutor, ShutdownDropsTheQueueOfTheStrandThatWasRunning) {
  DeliveryExecutor executor(1);
  std::shared_ptr<DeliveryExecutor::Strand> strand = executor.make_strand();
  auto token = std::make_shared<int>(7);
  std::weak_ptr<int> watch = token;
  std::atomic<bool> second_ran{false};
  // The first task stops the executor from inside its strand; the second waits behind it. The
  // first holds off until the second is queued, or it could stop the executor before that post.
  absl::Notification second_queued;
  ASSERT_TRUE(executor.post(strand, [&executor, &second_queued] {
    second_queued.WaitForNotification();
    executor.shutdown();
  }));
  ASSERT_TRUE(executor.post(strand, [&second_ran, t = std::move(token)] { second_ran = true; }));
  second_queued.Notify();
  EXPECT_TRUE(test_support::wait_for([&] { return watch.expired(); }, absl::Seconds(10)))
      << "the queued task (and what it captured) outlived the executor's shutdown";
  EXPECT_FALSE(second_ran.load());
  EXPECT_FALSE(executor.post(strand, [] {}));
}

}  // namespace
}  // namespace postal::mail::mem_internal
