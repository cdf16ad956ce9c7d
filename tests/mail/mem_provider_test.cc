// What only the mem provider promises: its buses, its options, its extension keys, its executor.
#include "postal/mail/mem_provider.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mail_conformance.h"
#include "postal/mail/mail_errors.h"

namespace postal::mail::testing {
namespace {

std::unique_ptr<PostOffice> office_on(MemOptions options) {
  absl::StatusOr<std::unique_ptr<MemProvider>> p = MemProvider::create(std::move(options));
  EXPECT_TRUE(p.ok()) << p.status();
  auto office = std::make_unique<PostOffice>();
  EXPECT_TRUE(office->register_provider(*std::move(p)).ok());
  EXPECT_TRUE(office->start().ok());
  return office;
}

std::string unique_address(std::string_view what) {
  return absl::StrCat("mem:test@mem-provider.test/", sv(what), "/", mint_send_id());
}

TEST(MemBus, DefaultBusIsSharedSoTwoPostOfficesTalk) {
  auto a = office_on({});
  auto b = office_on({});
  EXPECT_EQ(&a->provider_as<MemProvider>("mem")->bus(), &b->provider_as<MemProvider>("mem")->bus());
  EXPECT_EQ(&a->provider_as<MemProvider>("mem")->bus(), MemBus::shared().get());
  std::string address = unique_address("shared");
  Recorder r;
  absl::StatusOr<Subscription> sub = b->subscribe(address, r.handler());
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(a->post(address, Letter::text("across")).ok());
  ASSERT_TRUE(r.wait_for(1));
  EXPECT_EQ(text_of(r.seen()[0]), "across");
  // The shared state outlives a provider's stop: b is stopped, the backlog stays for a.
  b->stop();
  ASSERT_TRUE(a->post(address, Letter::text("kept")).ok());
  EXPECT_EQ(a->status(address)->unread_count, 1u);
  ASSERT_TRUE(MemBus::shared()->clear(address).ok());
}

TEST(MemBus, NamedScopeIsSharedWithinAndInvisibleAcross) {
  std::string scope = absl::StrCat("tenant-", mint_send_id());
  auto a1 = office_on({.bus = MemBus::for_scope(scope)});
  auto a2 = office_on({.bus = MemBus::for_scope(scope)});
  auto other = office_on({.bus = MemBus::for_scope(scope + "-other")});
  ASSERT_TRUE(a1->post("mem:u@h/inbox", Letter::text("x")).ok());
  EXPECT_EQ(a2->status("mem:u@h/inbox")->unread_count, 1u);
  EXPECT_EQ(other->status("mem:u@h/inbox")->exists, false);
}

TEST(MemBus, IsolatedBusIsPrivate) {
  auto a = office_on({.bus = MemBus::isolated()});
  auto b = office_on({.bus = MemBus::isolated()});
  ASSERT_TRUE(a->post("mem:u@h/inbox", Letter::text("x")).ok());
  EXPECT_EQ(b->status("mem:u@h/inbox")->exists, false);
}

TEST(MemBus, ClearOneMailboxReturnsHowManyCopiesWereDropped) {
  auto bus = MemBus::isolated();
  auto office = office_on({.bus = bus});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(office->post("mem:u@h/a", Letter::text("x")).ok());
  ASSERT_TRUE(office->post("mem:u@h/b", Letter::text("y")).ok());
  EXPECT_EQ(*bus->clear("mem:u@h/a"), 3u);
  EXPECT_EQ(office->status("mem:u@h/b")->unread_count, 1u);
  EXPECT_TRUE(IsInvalidMailboxAddress(bus->clear("mem:u@h/a?x").status()));
  EXPECT_EQ(bus->clear(), 1u);
}

TEST(MemProvider, M_DLQ_3_NonCanonicalDeadLetterSuffixIsRefused) {
  for (const char* bad :
       {"_\xE6\xAD\xBB\xE4\xBF\xA1", "_%e6", "%5Fdlq", "/dlq", "..", "_<x>", ""}) {
    absl::StatusOr<std::unique_ptr<MemProvider>> p =
        MemProvider::create({.dead_letter = DeadLetterOptions{.suffix = bad}});
    EXPECT_FALSE(p.ok()) << "suffix '" << bad << "' was accepted";
    EXPECT_TRUE(IsInvalidMailboxAddress(p.status())) << p.status();
  }
  for (const char* good : {"_dlq", ".dlq", "-dead", "_%E6%AD%BB%E4%BF%A1"}) {
    EXPECT_TRUE(MemProvider::create({.dead_letter = DeadLetterOptions{.suffix = good}}).ok())
        << good;
  }
}

TEST(MemProvider, CreateRejectsBadOptionsWithWhatToDo) {
  EXPECT_FALSE(MemProvider::create({.retry = RetryPolicy{.max_attempts = 0}}).ok());
  EXPECT_FALSE(MemProvider::create({.delivery_settle_timeout = absl::Seconds(-1)}).ok());
  EXPECT_FALSE(MemProvider::create({.max_delivery_threads = 0}).ok());
  EXPECT_FALSE(MemProvider::create({.retry = RetryPolicy{.base_delay = absl::Hours(1),
                                                         .max_delay = absl::Seconds(1)}})
                   .ok());
}

TEST(MemProvider, M_STAT_1_ExtensionKeysAreSchemePrefixed) {
  auto clock = std::make_shared<ManualClock>();
  auto office = office_on({.bus = MemBus::isolated(clock)});
  Recorder r;
  absl::StatusOr<Subscription> sub = office->subscribe("mem:u@h/listen", r.handler());
  ASSERT_TRUE(office->post("mem:u@h/inbox", Letter::text("x")).ok());
  absl::StatusOr<std::optional<Delivery>> d =
      office->fetch("mem:u@h/inbox", {AckMode::kManual, absl::Seconds(5)});
  ASSERT_TRUE(d.ok() && d->has_value());
  clock->advance(absl::Seconds(7));
  MailboxStatus s = *office->status("mem:u@h/inbox");
  EXPECT_EQ(s.extension_int("mem.overdueInFlightCount"), 1);
  EXPECT_EQ(s.extension_int("mem.oldestOverdueMs"), 2000);
  EXPECT_EQ(s.extension_int("mem.parkedCount"), 0);
  EXPECT_EQ(s.extension_int("mem.subscriberCount"), 0);
  EXPECT_EQ(office->status("mem:u@h/listen")->extension_int("mem.subscriberCount"), 1);
  for (const auto& [key, value] : s.extensions) EXPECT_EQ(key.rfind("mem.", 0), 0u) << key;
  EXPECT_NE(s.to_json().find("\"mem.overdueInFlightCount\":1"), std::string::npos) << s.to_json();
  // M-ACK-3: overdue until something reclaims it.
  EXPECT_EQ(office->recover("mem:u@h/inbox")->reclaimed, 1u);
  EXPECT_EQ(office->status("mem:u@h/inbox")->extension_int("mem.overdueInFlightCount"), 0);
}

TEST(MemProvider, M_ACK_3_OptInSweeperReclaimsOnItsClock) {
  auto clock = std::make_shared<ManualClock>();
  auto office =
      office_on({.bus = MemBus::isolated(clock), .lease_sweep_interval = absl::Seconds(1)});
  ASSERT_TRUE(office->post("mem:u@h/inbox", Letter::text("x")).ok());
  absl::StatusOr<std::optional<Delivery>> d =
      office->fetch("mem:u@h/inbox", {AckMode::kManual, absl::Milliseconds(2500)});
  ASSERT_TRUE(d.ok() && d->has_value());
  clock->advance(absl::Seconds(2));
  EXPECT_EQ(office->status("mem:u@h/inbox")->in_flight_count, 1u);
  clock->advance(absl::Seconds(1));  // the sweep at t=3 s finds the lease expired at 2.5 s
  EXPECT_EQ(office->status("mem:u@h/inbox")->unread_count, 1u);
  office->stop();  // the sweeper is cleared by stop
  EXPECT_EQ(clock->pending(), 0u);
}

TEST(MemProvider, M_DLQ_1_RoundCapGivesUpAnExpiredLease) {
  auto clock = std::make_shared<ManualClock>();
  auto office = office_on({.bus = MemBus::isolated(clock),
                           .dead_letter = DeadLetterOptions{},
                           .max_delivery_rounds = 1});
  ASSERT_TRUE(office->post("mem:u@h/inbox", Letter::text("x")).ok());
  absl::StatusOr<std::optional<Delivery>> held =
      office->fetch("mem:u@h/inbox", {AckMode::kManual, absl::Seconds(1)});
  ASSERT_TRUE(held.ok() && held->has_value());
  clock->advance(absl::Seconds(2));
  EXPECT_EQ(office->recover("mem:u@h/inbox")->reclaimed, 1u);
  EXPECT_EQ(office->status("mem:u@h/inbox")->unread_count, 0u);
  absl::StatusOr<std::optional<Delivery>> dead = office->fetch("mem:u@h/inbox_dlq");
  ASSERT_TRUE(dead.ok() && dead->has_value());
  EXPECT_EQ((*dead)->letter().headers.get(kDeadLetterReason), "expired-lease");
}

TEST(MemProvider, OneSubscriptionsCallbackNeverRunsConcurrentlyAndKeepsPostOrder) {
  auto office = office_on({.bus = MemBus::isolated()});
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  Recorder r([&](const Letter&, size_t) {
    if (running.fetch_add(1) != 0) overlapped = true;
    running.fetch_sub(1);
    return absl::OkStatus();
  });
  absl::StatusOr<Subscription> sub = office->subscribe("mem:u@h/inbox", r.handler());
  constexpr int kLetters = 200;
  for (int i = 0; i < kLetters; ++i) {
    ASSERT_TRUE(office->post("mem:u@h/inbox", Letter::text(absl::StrCat(i))).ok());
  }
  ASSERT_TRUE(r.wait_for(kLetters));
  EXPECT_FALSE(overlapped.load());
  std::vector<Letter> seen = r.seen();
  for (int i = 0; i < kLetters; ++i) EXPECT_EQ(text_of(seen[i]), absl::StrCat(i));
}

TEST(MemProvider, UnsubscribeAndStopFromInsideACallbackDoNotDeadlock) {
  auto office = office_on({.bus = MemBus::isolated()});
  Subscription sub;
  absl::Notification done;
  absl::StatusOr<Subscription> s = office->subscribe("mem:u@h/inbox", [&](const Letter&) {
    sub.unsubscribe();
    office->stop();
    done.Notify();
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok());
  sub = *std::move(s);
  ASSERT_TRUE(office->post("mem:u@h/inbox", Letter::text("x")).ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWait));
  EXPECT_FALSE(sub.active());
  EXPECT_FALSE(office->running());
}

TEST(MemProvider, ABlockedSubscriptionDoesNotStallTheOthers) {
  auto office = office_on({.bus = MemBus::isolated()});
  Gate gate;
  Recorder stuck(gate.respond());
  Recorder free_flowing;
  absl::StatusOr<Subscription> a = office->subscribe("mem:u@h/a", stuck.handler());
  absl::StatusOr<Subscription> b = office->subscribe("mem:u@h/b", free_flowing.handler());
  ASSERT_TRUE(office->post("mem:u@h/a", Letter::text("x")).ok());
  ASSERT_TRUE(gate.wait_entered());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(office->post("mem:u@h/b", Letter::text("y")).ok());
  EXPECT_TRUE(free_flowing.wait_for(10));
  gate.release();
}

}  // namespace
}  // namespace postal::mail::testing
