// MemProvider::subscribe_async: a window of unsettled deliveries per subscription, in post order,
// each under the settle watchdog (M-RETRY-4); what a MailboxHost pipelines its pushes with.
#include <thread>

#include "gtest/gtest.h"
#include "mail_conformance.h"
#include "postal/mail/mem_provider.h"

namespace postal::mail::testing {
namespace {

// Starts deliveries and keeps their settlements for the test to call.
class Held {
 public:
  MemProvider::AsyncMailHandler handler() {
    return [this](const Letter& letter, MemProvider::SettleFn settle) {
      absl::MutexLock lock(&mu_);
      started_.push_back(text_of(letter));
      settles_.push_back(std::move(settle));
    };
  }
  bool wait_started(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return started_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
  }
  std::vector<std::string> started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }
  void settle(size_t i, absl::Status s = absl::OkStatus()) {
    MemProvider::SettleFn fn;
    {
      absl::MutexLock lock(&mu_);
      fn = std::move(settles_.at(i));
    }
    std::move(fn)(std::move(s));
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> started_;
  std::vector<MemProvider::SettleFn> settles_;
};

class MemAsyncSubscription : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = MemProvider::create({.bus = MemBus::isolated(clock_), .delivery_settle_timeout = absl::Seconds(10)});
    ASSERT_TRUE(p.ok()) << p.status();
    provider_ = *std::move(p);
    ASSERT_TRUE(provider_->start().ok());
  }
  void TearDown() override { provider_->stop({}); }
  MailAddress address() { return *MailAddress::parse("mem://box@async.test/inbox"); }
  void post(std::string_view text) { ASSERT_TRUE(provider_->post(address(), Letter::text(text)).ok()); }
  MailboxStatus status() { return *provider_->status(address()); }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::unique_ptr<MemProvider> provider_;
};

TEST_F(MemAsyncSubscription, AtMostTheWindowIsUnsettledAndTheRestStartInPostOrder) {
  Held held;
  auto sub = provider_->subscribe_async(address(), held.handler(), {}, 2);
  ASSERT_TRUE(sub.ok()) << sub.status();
  for (const char* t : {"1", "2", "3", "4", "5"}) post(t);
  ASSERT_TRUE(held.wait_started(2));
  ASSERT_TRUE(provider_->wait_idle(absl::Now() + absl::Milliseconds(50)).code() ==
              absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(held.started(), (std::vector<std::string>{"1", "2"})) << "the window is 2";
  held.settle(0);
  ASSERT_TRUE(held.wait_started(3));
  held.settle(1);
  held.settle(2);
  ASSERT_TRUE(held.wait_started(5));
  held.settle(3);
  held.settle(4);
  ASSERT_TRUE(provider_->wait_idle(absl::Now() + kWait).ok());
  EXPECT_EQ(held.started(), (std::vector<std::string>{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(status().unread_count, 0u);
}

TEST_F(MemAsyncSubscription, M_RETRY_4_TheWatchdogFreesTheSlotOfADeliveryThatNeverSettles) {
  Held held;
  auto sub = provider_->subscribe_async(address(), held.handler(), {}, 1);
  ASSERT_TRUE(sub.ok());
  post("stuck");
  ASSERT_TRUE(held.wait_started(1));
  clock_->advance(absl::Seconds(10));  // it never settles: cancelled, back in the queue
  post("next");
  ASSERT_TRUE(held.wait_started(2)) << "the stuck delivery kept its window slot";
  EXPECT_EQ(held.started()[1], "next");
  held.settle(0);  // late: changes nothing
  EXPECT_EQ(status().extension_int("mem.watchdogCancelledCount"), 1);
  held.settle(1);
}

TEST_F(MemAsyncSubscription, UnsubscribeWaitsForEveryStartedDeliveryToSettle) {
  Held held;
  auto sub = provider_->subscribe_async(address(), held.handler(), {}, 4);
  ASSERT_TRUE(sub.ok());
  post("a");
  ASSERT_TRUE(held.wait_started(1));
  absl::Notification unsubscribed;
  std::thread t([&] {
    sub->unsubscribe();
    unsubscribed.Notify();
  });
  EXPECT_FALSE(unsubscribed.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  held.settle(0);
  EXPECT_TRUE(unsubscribed.WaitForNotificationWithTimeout(kWait));
  t.join();
}

TEST_F(MemAsyncSubscription, ARetriableSettlementGivesTheLetterBackToTheQueue) {
  Held held;
  auto sub = provider_->subscribe_async(address(), held.handler(), {}, 4);
  ASSERT_TRUE(sub.ok());
  post("again");
  ASSERT_TRUE(held.wait_started(1));
  held.settle(0, RetriableError("later"));
  ASSERT_TRUE(provider_->wait_idle(absl::Now() + kWait).ok());
  EXPECT_EQ(status().unread_count, 1u);  // M-RETRY-1: no retry policy, so it is requeued
}

}  // namespace
}  // namespace postal::mail::testing
