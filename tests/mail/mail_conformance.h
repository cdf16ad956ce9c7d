// The provider conformance suite: what every mail provider must do, by docs/semantics.md rule id.
//
// The suite is a parameterized GoogleTest over a ProviderFactory. A provider joins it by
// instantiating the suite with a factory (see mem_conformance_test.cc):
//
//   INSTANTIATE_TEST_SUITE_P(Post, MailConformance, testing::Values(PostProviderFactory()),
//                            ConformanceName);
//
// The factory makes a fresh provider whose state is private to one test and whose time runs on
// the ManualClock it is given (leases, backoff, watchdog, activity times), configured by the
// ConformanceConfig. Tests never sleep: they wait on events with deadlines, and advance the clock.
//
// What a provider needs to run the whole suite:
//   * capabilities post, subscribe, fetch, manual-ack, status, recover and wait-idle (the suite
//     waits for pushed deliveries to settle with PostOffice::wait_idle);
//   * the ConformanceConfig honoured: a retry policy, dead letters, the settle timeout;
//   * extension keys `<scheme>.subscriberCount` and `<scheme>.parkedCount`.
// Tests of optional capabilities (peek, enumerate, clear, locate, settle-by-key, dead-letter)
// skip when the provider does not declare them; so do the push tests when a provider does not
// declare subscribe (nats: consumers pull, nats_provider.h). Test names carry the docs/semantics.md rule ids.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "postal/mail/clock.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/mem_provider.h"
#include "postal/mail/post_office.h"
#include "postal/mail/system_headers.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::testing {

inline constexpr absl::Duration kWait = absl::Seconds(20);  // deadline for awaited events

struct ConformanceConfig {
  std::optional<RetryPolicy> retry = std::nullopt;
  std::optional<DeadLetterOptions> dead_letter = std::nullopt;
  absl::Duration settle_timeout = kDefaultDeliverySettleTimeout;
};

struct ProviderFactory {
  std::string name;    // test-name suffix
  std::string scheme;  // e.g. "mem"
  std::function<absl::StatusOr<std::unique_ptr<MailProvider>>(const ConformanceConfig&,
                                                              std::shared_ptr<ManualClock>)>
      make;
};
inline void PrintTo(const ProviderFactory& f, std::ostream* os) { *os << f.name; }
inline std::string ConformanceName(const ::testing::TestParamInfo<ProviderFactory>& info) {
  return info.param.name;
}

// Records what a subscription callback saw, and answers with `respond`.
class Recorder {
 public:
  using Respond = std::function<absl::Status(const Letter&, size_t call)>;
  explicit Recorder(Respond respond = nullptr) : state_(std::make_shared<State>()) {
    state_->respond = std::move(respond);
  }
  MailHandler handler() const {
    return [state = state_](const Letter& letter) {
      size_t call;
      {
        absl::MutexLock lock(&state->mu);
        state->seen.push_back(letter);
        call = state->seen.size();
      }
      return state->respond ? state->respond(letter, call) : absl::OkStatus();
    };
  }
  // True once at least `n` calls have been seen; false at the deadline.
  bool wait_for(size_t n, absl::Duration timeout = kWait) const {
    absl::MutexLock lock(&state_->mu);
    auto enough = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return state_->seen.size() >= n; };
    return state_->mu.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }
  std::vector<Letter> seen() const {
    absl::MutexLock lock(&state_->mu);
    return state_->seen;
  }
  size_t count() const { return seen().size(); }

 private:
  struct State {
    absl::Mutex mu;
    std::vector<Letter> seen;
    Respond respond;
  };
  std::shared_ptr<State> state_;
};

// A callback that blocks until released; `wait_entered` returns once one has started.
class Gate {
 public:
  Gate() = default;
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  ~Gate() { release(); }  // a failing test never leaves a callback blocked
  Recorder::Respond respond(absl::Status result = absl::OkStatus()) const {
    return [s = state_, result](const Letter&, size_t) {
      if (!s->entered.HasBeenNotified()) s->entered.Notify();
      s->release.WaitForNotification();
      return result;
    };
  }
  bool wait_entered() const { return state_->entered.WaitForNotificationWithTimeout(kWait); }
  void release() const {
    if (!state_->release.HasBeenNotified()) state_->release.Notify();
  }

 private:
  struct State {
    absl::Notification entered;
    absl::Notification release;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// The bool of a settle() that must have succeeded as a call.
inline bool took_effect(const absl::StatusOr<bool>& r) {
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() && *r;
}

inline std::string text_of(const Letter& letter) { return letter.body.text().value_or("<?>"); }

class MailConformance : public ::testing::TestWithParam<ProviderFactory> {
 protected:
  void SetUp() override { clock_ = std::make_shared<ManualClock>(); }
  void TearDown() override {
    if (office_) office_->stop();
  }

  void open(const ConformanceConfig& config = {}) {
    absl::StatusOr<std::unique_ptr<MailProvider>> p = GetParam().make(config, clock_);
    ASSERT_TRUE(p.ok()) << p.status();
    office_ = std::make_unique<PostOffice>();
    ASSERT_TRUE(office_->register_provider(*std::move(p)).ok());
    ASSERT_TRUE(office_->start().ok());
  }
  // After open().
  MailProvider& provider() { return *office_->provider(GetParam().scheme); }
  bool can(Capability op) { return provider().can(op); }

  // `<scheme>:box@conformance.test/<path>`, canonical.
  std::string addr(std::string_view path) const {
    return absl::StrCat(GetParam().scheme, "://box@conformance.test/", sv(path));
  }
  std::string ext(std::string_view key) const {
    return absl::StrCat(GetParam().scheme, ".", sv(key));
  }

  PostReceipt post(const std::string& address, Letter letter) {
    absl::StatusOr<PostReceipt> r = office_->post(address, std::move(letter));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : PostReceipt{};
  }
  PostReceipt post_text(const std::string& address, std::string_view text, std::string id = {}) {
    return post(address, Letter::text(text, std::move(id)));
  }
  std::optional<Delivery> fetch(const std::string& address, FetchOptions options = {}) {
    absl::StatusOr<std::optional<Delivery>> d = office_->fetch(address, options);
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return std::nullopt;
    return *std::move(d);
  }
  std::optional<Delivery> fetch_manual(const std::string& address,
                                       absl::Duration ack_timeout = kDefaultAckTimeout) {
    return fetch(address, FetchOptions{AckMode::kManual, ack_timeout});
  }
  MailboxStatus status(const std::string& address) {
    absl::StatusOr<MailboxStatus> s = office_->status(address);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : MailboxStatus{};
  }
  Subscription subscribe(const std::string& address, const Recorder& recorder) {
    absl::StatusOr<Subscription> s = office_->subscribe(address, recorder.handler());
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : Subscription();
  }
  std::vector<Delivery> fetch_batch(const std::string& address, FetchOptions options) {
    absl::StatusOr<std::vector<Delivery>> b = office_->fetch_batch(address, options);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : std::vector<Delivery>{};
  }
  // A fetch_batch on its own thread, so the test can watch it wait.
  struct Pending {
    std::thread thread;
    absl::Notification done;
    absl::StatusOr<std::vector<Delivery>> result;
    ~Pending() {
      if (thread.joinable()) thread.join();
    }
  };
  std::unique_ptr<Pending> fetch_in_background(const std::string& address, FetchOptions options) {
    auto p = std::make_unique<Pending>();
    p->thread = std::thread([this, p = p.get(), address, options] {
      p->result = office_->fetch_batch(address, options);
      p->done.Notify();
    });
    return p;
  }
  // True once `n` fetches wait on `address` (the provider's own count); false at the deadline.
  bool waiting(const std::string& address, int64_t n) {
    const absl::Time deadline = absl::Now() + kWait;
    while (absl::Now() < deadline) {
      if (status(address).extension_int(ext("waitingFetchCount")) == n) return true;
      std::this_thread::yield();
    }
    return false;
  }

  // Every dispatched delivery has settled or waits in a backoff.
  void idle() { ASSERT_TRUE(office_->wait_idle(kWait).ok()); }

  std::shared_ptr<ManualClock> clock_;
  std::unique_ptr<PostOffice> office_;
};

}  // namespace postal::mail::testing
