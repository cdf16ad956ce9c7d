// MemProvider and MemBus: the public face of the mem engine (mem_state.h).
#include "postal/mail/mem_provider.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "mem_state.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {

using mem_internal::BusLock;
using mem_internal::BusState;
using mem_internal::CoreState;
using mem_internal::SubscriberState;
using mem_internal::Topic;

// ---- MemBus ----------------------------------------------------------------------------------

MemBus::MemBus(std::shared_ptr<Clock> clock)
    : state_(std::make_shared<BusState>(std::move(clock))) {}
MemBus::~MemBus() = default;

std::shared_ptr<MemBus> MemBus::shared() {
  // The documented process-wide bus: never destroyed, so it outlives every static user.
  static auto* bus = new std::shared_ptr<MemBus>(new MemBus(std::make_shared<SystemClock>()));
  return *bus;
}

std::shared_ptr<MemBus> MemBus::for_scope(std::string_view scope) {
  static absl::Mutex mu;
  static auto* scopes = new std::map<std::string, std::shared_ptr<MemBus>, std::less<>>();
  absl::MutexLock lock(&mu);
  auto it = scopes->find(scope);
  if (it != scopes->end()) return it->second;
  std::shared_ptr<MemBus> bus(new MemBus(std::make_shared<SystemClock>()));
  scopes->emplace(std::string(scope), bus);
  return bus;
}

std::shared_ptr<MemBus> MemBus::isolated(std::shared_ptr<Clock> clock) {
  if (clock == nullptr) clock = std::make_shared<SystemClock>();
  return std::shared_ptr<MemBus>(new MemBus(std::move(clock)));
}

Clock& MemBus::clock() const { return *state_->clock; }

uint64_t MemBus::clear() {
  absl::MutexLock lock(&state_->mu);
  uint64_t n = 0;
  for (auto& [address, topic] : state_->topics) n += mem_internal::clear_topic_locked(topic);
  return n;
}

absl::StatusOr<uint64_t> MemBus::clear(std::string_view address) {
  absl::StatusOr<MailAddress> parsed = MailAddress::parse(address);
  if (!parsed.ok()) return parsed.status();
  absl::MutexLock lock(&state_->mu);
  Topic* topic = state_->find_locked(parsed->canonical());
  return topic == nullptr ? 0 : mem_internal::clear_topic_locked(*topic);
}

// ---- CoreState -------------------------------------------------------------------------------

namespace mem_internal {

bool CoreState::settle(const CopyKey& key, Disposition disposition) {
  BusLock lock(*bus);
  return settle_locked(*bus, config, key, disposition);
}

namespace {

class MemSubscriptionControl final : public SubscriptionControl {
 public:
  explicit MemSubscriptionControl(std::shared_ptr<SubscriberState> sub) : sub_(std::move(sub)) {}
  void unsubscribe() override {
    if (std::shared_ptr<BusState> bus = sub_->bus.lock()) cancel_subscriber(*bus, sub_);
  }
  void detach() override {
    if (std::shared_ptr<BusState> bus = sub_->bus.lock()) cancel_subscriber(*bus, sub_, false);
  }
  bool active() const override {
    std::shared_ptr<BusState> bus = sub_->bus.lock();
    if (!bus) return false;
    BusLock lock(*bus);
    return sub_->active;
  }

 private:
  std::shared_ptr<SubscriberState> sub_;
};

void schedule_sweep_locked(const std::shared_ptr<CoreState>& core, absl::Duration interval) {
  uint64_t generation = core->sweeper_generation;
  core->sweeper = core->bus->clock->schedule_after(
      interval, [weak = std::weak_ptr<CoreState>(core), generation, interval] {
        std::shared_ptr<CoreState> c = weak.lock();
        if (!c) return;
        BusLock lock(*c->bus);
        if (!c->running || c->sweeper_generation != generation) return;
        for (auto& [address, topic] : c->bus->topics) {
          reclaim_expired_locked(*c->bus, c->config, topic);
        }
        schedule_sweep_locked(c, interval);
      });
}

}  // namespace
}  // namespace mem_internal

// ---- MemProvider -----------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<MemProvider>> MemProvider::create(MemOptions options) {
  if (options.retry.has_value()) {
    if (absl::Status s = options.retry->validate(); !s.ok()) return s;
  }
  if (options.delivery_settle_timeout < absl::ZeroDuration() ||
      options.lease_sweep_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "MemOptions: delivery_settle_timeout and lease_sweep_interval must not be negative "
        "(0 turns them off)");
  }
  if (options.max_delivery_threads == 0) {
    return absl::InvalidArgumentError("MemOptions.max_delivery_threads is 0; use 1 or more");
  }
  if (options.dead_letter.has_value()) {
    // M-DLQ-3: a suffix canonicalization would rewrite is refused.
    absl::StatusOr<MailAddress> sample = MailAddress::parse("mem://probe@example.invalid/inbox");
    absl::StatusOr<MailAddress> dlq = sample->with_path_suffix(options.dead_letter->suffix);
    if (!dlq.ok()) return dlq.status();
  }
  if (options.bus == nullptr) options.bus = MemBus::shared();
  return std::unique_ptr<MemProvider>(new MemProvider(std::move(options)));
}

MemProvider::MemProvider(MemOptions options) : options_(std::move(options)) {
  auto config = std::make_shared<mem_internal::Config>();
  config->retry = options_.retry;
  config->dead_letter = options_.dead_letter;
  config->settle_timeout = options_.delivery_settle_timeout;
  config->max_rounds = options_.max_delivery_rounds;
  core_ = std::make_shared<CoreState>(options_.bus->state_, std::move(config),
                                      options_.max_delivery_threads);
}

MemProvider::~MemProvider() { stop(StopOptions{}); }

bool MemProvider::can(Capability op, const MailAddress*) const {
  if (op == Capability::kDeadLetter) return options_.dead_letter.has_value();
  if (op == Capability::kRetained) return options_.retained != nullptr;
  return true;
}

absl::StatusOr<Subscription> MemProvider::subscribe(const MailAddress& address, MailHandler handler,
                                                    const SubscribeOptions& options) {
  if (std::optional<std::string> name = retained_name(address)) {
    return subscribe_retained(*name, address, std::move(handler), options);
  }
  if (absl::Status s = no_queue_groups(address, options); !s.ok()) return s;
  auto sub = std::make_shared<SubscriberState>();
  sub->label = options.label;
  sub->handler = std::move(handler);
  return add_subscriber(address, std::move(sub), options);
}

absl::StatusOr<Subscription> MemProvider::subscribe_async(const MailAddress& address,
                                                          AsyncMailHandler handler,
                                                          const SubscribeOptions& options,
                                                          size_t max_in_flight) {
  if (std::optional<std::string> name = retained_name(address)) {
    // Retained deliveries run one at a time (replay, then live): each waits for its settlement.
    auto shared = std::make_shared<AsyncMailHandler>(std::move(handler));
    MailHandler wait_for_settlement = [shared](const Letter& letter) {
      absl::Notification settled;
      absl::Status result;
      (*shared)(letter, [&](absl::Status s) {
        result = std::move(s);
        settled.Notify();
      });
      settled.WaitForNotification();
      return result;
    };
    return subscribe_retained(*name, address, std::move(wait_for_settlement), options);
  }
  if (absl::Status s = no_queue_groups(address, options); !s.ok()) return s;
  auto sub = std::make_shared<SubscriberState>();
  sub->label = options.label;
  sub->async_handler = std::move(handler);
  sub->async = true;
  sub->max_in_flight = std::max<size_t>(max_in_flight, 1);
  return add_subscriber(address, std::move(sub), options);
}

absl::StatusOr<Subscription> MemProvider::add_subscriber(const MailAddress& address,
                                                         std::shared_ptr<SubscriberState> sub,
                                                         const SubscribeOptions& options) {
  sub->topic = address.canonical();
  sub->config = core_->config;
  // M-RETRY-5: this subscription's own redelivery, ahead of its mailbox's and the provider's;
  // give-ups still follow the mailbox's and the poster's.
  if (options.retry.has_value()) {
    if (absl::Status s = options.retry->validate(); !s.ok()) return s;
  }
  if (options.settle_timeout.value_or(absl::ZeroDuration()) < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "subscribe ", address.canonical(), ": settle_timeout must not be negative (0: none)"));
  }
  sub->own_retry = options.retry;
  sub->own_settle_timeout = options.settle_timeout;
  sub->core = core_;
  sub->bus = core_->bus;
  {
    BusLock lock(*core_->bus);
    if (!core_->running || !core_->executor) {
      return absl::FailedPreconditionError(absl::StrCat(
          "subscribe ", address.canonical(), ": the mem provider is stopped; start() it first"));
    }
    sub->id = core_->bus->next_subscriber++;
    sub->strand = core_->executor->make_strand();
    // M-RECV-2: established once registered; a letter posted after this returns is pushed.
    core_->bus->topic_locked(address).subscribers.push_back(sub);
    core_->subscribers[sub->id] = sub;
  }
  std::string id = absl::StrCat("mem-sub-", sub->id);
  return Subscription(std::move(id), address.canonical(),
                      std::make_unique<mem_internal::MemSubscriptionControl>(std::move(sub)));
}

absl::Status MemProvider::start() {
  BusLock lock(*core_->bus);
  if (core_->running) return absl::OkStatus();
  core_->running = true;
  core_->executor = std::make_unique<mem_internal::DeliveryExecutor>(core_->max_threads);
  if (options_.lease_sweep_interval > absl::ZeroDuration()) {
    ++core_->sweeper_generation;
    mem_internal::schedule_sweep_locked(core_, options_.lease_sweep_interval);
  }
  return absl::OkStatus();
}

void MemProvider::stop(const StopOptions& options) {
  BusState& bus = *core_->bus;
  std::vector<std::shared_ptr<SubscriberState>> subs;
  // Taken out with `running`: no new attempt is dispatched to it, and a concurrent start()
  // makes a fresh one instead of replacing this one under the lock.
  std::unique_ptr<mem_internal::DeliveryExecutor> executor;
  {
    BusLock lock(bus);
    core_->running = false;
    // Long polls of this provider end now, answered once the lock is released.
    mem_internal::fail_waiters_locked(
        bus, *core_, absl::FailedPreconditionError("fetch: the mem provider stopped"));
    executor = std::move(core_->executor);
    ++core_->sweeper_generation;
    if (core_->sweeper != 0) bus.clock->cancel(core_->sweeper);
    core_->sweeper = 0;
    for (const auto& [id, sub] : core_->subscribers) subs.push_back(sub);
  }
  // Tears every subscription down; running callbacks finish first (M-RETRY-4).
  for (const std::shared_ptr<SubscriberState>& sub : subs)
    mem_internal::cancel_subscriber(bus, sub);
  if (executor) executor->shutdown();
  executor.reset();
  if (options.purge) {
    BusLock lock(bus);
    for (auto& [address, topic] : bus.topics) mem_internal::clear_topic_locked(topic);
  }
}

}  // namespace postal::mail
