// The mem provider's batch fetch and long poll (M-RECV-6), batched settlement, and lease control:
// renew (in progress) and nack with a delay (M-ACK-6).
//
// A fetch_batch that finds nothing and may wait becomes a FetchWaiter on its topic. Whatever
// queues a copy there (a post, a requeue, a reclaimed lease) serves the waiters in arrival order
// under the bus lock and queues their answers as completions, which the BusLock runs once the
// lock is released. A waiter's timer answers it at its deadline — or fires earlier, when a lease
// it could reclaim ends or a delayed copy falls due, to look again — so nothing polls.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "mem_state.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/mem_provider.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace mem_internal {
namespace {

// Waiters one mailbox holds at most; past it a long poll fails at once (input bounds it).
constexpr size_t kMaxWaitersPerTopic = 1024;

void complete_locked(BusState& bus, MailProvider::FetchDone done,
                     absl::StatusOr<std::vector<Delivery>> result) {
  bus.completions.push_back([done = std::move(done), result = std::move(result)]() mutable {
    std::move(done)(std::move(result));
  });
}

void arm_locked(BusState& bus, Topic& topic, FetchWaiter& waiter);

// The waiter's timer: answer it when there is something (or at its deadline), else look again.
void on_waiter_timer(const std::weak_ptr<BusState>& weak, const std::string& topic_name,
                     uint64_t id) {
  std::shared_ptr<BusState> bus = weak.lock();
  if (!bus) return;
  BusLock lock(*bus);
  Topic* topic = bus->find_locked(topic_name);
  if (topic == nullptr) return;
  auto it = std::find_if(topic->waiters.begin(), topic->waiters.end(),
                         [&](const FetchWaiter& w) { return w.id == id; });
  if (it == topic->waiters.end()) return;  // served meanwhile
  it->timer = 0;
  std::shared_ptr<CoreState> core = it->core.lock();
  std::vector<Delivery> batch;
  if (core && core->running) batch = take_batch_locked(*bus, core, *topic, it->options);
  if (batch.empty() && bus->clock->now() < it->deadline && core && core->running) {
    arm_locked(*bus, *topic, *it);
    return;
  }
  FetchWaiter waiter = std::move(*it);
  topic->waiters.erase(it);
  complete_locked(*bus, std::move(waiter.done), std::move(batch));
}

// Wakes at the deadline, or earlier when the topic changes by time alone: a lease a manual
// fetch would reclaim ends, or a delayed copy falls due.
void arm_locked(BusState& bus, Topic& topic, FetchWaiter& waiter) {
  absl::Time wake = waiter.deadline;
  if (waiter.options.ack == AckMode::kManual) {
    for (const auto& [send_id, lease] : topic.in_flight) {
      if (lease.expires.has_value()) wake = std::min(wake, *lease.expires);
    }
  }
  if (!topic.delayed.empty()) wake = std::min(wake, topic.delayed.begin()->first);
  if (waiter.timer != 0) bus.clock->cancel(waiter.timer);
  // The bus owns its clock: a timer holds the bus weakly and finds its waiter by id.
  waiter.timer = bus.clock->schedule_at(
      wake, [weak = bus.weak_from_this(), name = topic.address.canonical(), id = waiter.id] {
        on_waiter_timer(weak, name, id);
      });
}

}  // namespace

void release_due_locked(BusState& bus, Topic& topic) {
  if (topic.delayed.empty()) return;
  const auto end = topic.delayed.upper_bound(bus.clock->now());
  if (end == topic.delayed.begin()) return;
  // The latest due first, each to the head: the earliest due ends up first in the queue.
  for (auto it = end; it != topic.delayed.begin();) {
    --it;
    topic.queue.push_front(std::move(it->second));
  }
  topic.delayed.erase(topic.delayed.begin(), end);
}

void serve_waiters_locked(BusState& bus, Topic& topic) {
  while (!topic.waiters.empty() && !topic.queue.empty()) {
    FetchWaiter waiter = std::move(topic.waiters.front());
    topic.waiters.pop_front();
    if (waiter.timer != 0) bus.clock->cancel(waiter.timer);
    std::shared_ptr<CoreState> core = waiter.core.lock();
    if (!core || !core->running) {
      complete_locked(bus, std::move(waiter.done),
                      absl::FailedPreconditionError("fetch: the mem provider stopped"));
      continue;
    }
    std::vector<Delivery> batch = take_batch_locked(bus, core, topic, waiter.options);
    complete_locked(bus, std::move(waiter.done), std::move(batch));
  }
}

void fail_waiters_locked(BusState& bus, const CoreState& core, const absl::Status& why) {
  for (auto& [name, topic] : bus.topics) {
    for (auto it = topic.waiters.begin(); it != topic.waiters.end();) {
      std::shared_ptr<CoreState> owner = it->core.lock();
      if (owner && owner.get() != &core) {
        ++it;
        continue;
      }
      if (it->timer != 0) bus.clock->cancel(it->timer);
      complete_locked(bus, std::move(it->done), why);
      it = topic.waiters.erase(it);
    }
  }
}

std::vector<bool> CoreState::settle_all(std::span<const CopyKey> keys, Disposition disposition) {
  std::vector<bool> took(keys.size(), false);
  BusLock lock(*bus);
  // Unhandled copies each go to the head: the last first, so the batch comes back in its order.
  const bool reverse = disposition == Disposition::kUnhandled;
  for (size_t n = 0; n < keys.size(); ++n) {
    const size_t i = reverse ? keys.size() - 1 - n : n;
    took[i] = settle_locked(*bus, config, keys[i], disposition);
  }
  return took;
}

std::optional<std::optional<absl::Time>> CoreState::renew(const CopyKey& key) {
  BusLock lock(*bus);
  Lease* lease = live_lease_locked(*bus, bus->find_locked(key.address), key);
  if (lease == nullptr) return std::nullopt;
  if (!lease->expires.has_value()) return std::optional<absl::Time>();  // never expires anyway
  lease->expires = bus->clock->now() + lease->timeout;
  return std::optional<absl::Time>(lease->expires);
}

bool CoreState::nack(const CopyKey& key, absl::Duration delay) {
  if (delay <= absl::ZeroDuration()) return settle(key, Disposition::kUnhandled);
  BusLock lock(*bus);
  Topic* topic = bus->find_locked(key.address);
  Lease* lease = live_lease_locked(*bus, topic, key);
  if (lease == nullptr) return false;
  Letter letter = std::move(lease->letter);
  topic->in_flight.erase(key.send_id);
  const absl::Time now = bus->clock->now();
  topic->last_activity = now;
  // The round cap (the mailbox's, else the provider's) holds for a delayed redelivery as for
  // any other (M-RETRY-2, M-RETRY-6).
  const uint64_t max_rounds = max_rounds_locked(*bus, *config, *topic);
  if (max_rounds > 0 && round_of(letter) >= max_rounds) {
    give_up_locked(*bus, config, *topic, std::move(letter), DeadLetterReason::kConsumerNack, 1,
                   absl::StrCat("nacked by the consumer; delivery round cap (", max_rounds,
                                ") reached"));
    return true;
  }
  letter.headers.erase(kAttempt.name);
  letter.headers.erase(kMaxAttempts.name);
  topic->delayed.emplace(now + delay, std::move(letter));
  for (FetchWaiter& waiter : topic->waiters) arm_locked(*bus, *topic, waiter);  // wake when due
  return true;
}

}  // namespace mem_internal

using mem_internal::BusLock;
using mem_internal::BusState;

namespace {

absl::Status check_fetch_options(const FetchOptions& o, const MailAddress& address) {
  if (o.max_messages == 0 || o.max_messages > kMaxFetchBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("fetch ", address.canonical(), ": max_messages is ", o.max_messages,
                     "; ask for 1 to ", kMaxFetchBatch, " copies"));
  }
  if (o.max_wait < absl::ZeroDuration() || o.ack_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fetch ", address.canonical(), ": max_wait and ack_timeout must not be negative"));
  }
  return absl::OkStatus();
}

}  // namespace

void MemProvider::fetch_batch_async(const MailAddress& address, const FetchOptions& options,
                                    FetchDone done) {
  if (absl::Status s = check_fetch_options(options, address); !s.ok()) {
    return std::move(done)(s);
  }
  BusState& bus = *core_->bus;
  BusLock lock(bus);
  if (!core_->running) {
    return mem_internal::complete_locked(bus, std::move(done),
                                                absl::FailedPreconditionError(absl::StrCat(
                                                    "fetch ", address.canonical(),
                                                    ": the mem provider is stopped; start() it")));
  }
  const bool may_wait = options.max_wait > absl::ZeroDuration();
  mem_internal::Topic* topic =
      may_wait ? &bus.topic_locked(address) : bus.find_locked(address.canonical());
  std::vector<Delivery> batch;
  if (topic != nullptr) batch = mem_internal::take_batch_locked(bus, core_, *topic, options);
  if (!batch.empty() || !may_wait) {
    return mem_internal::complete_locked(bus, std::move(done), std::move(batch));
  }
  if (topic->waiters.size() >= mem_internal::kMaxWaitersPerTopic) {
    return mem_internal::complete_locked(
        bus, std::move(done),
        absl::ResourceExhaustedError(absl::StrCat(
            "fetch ", address.canonical(), ": ", mem_internal::kMaxWaitersPerTopic,
            " fetches already wait on this mailbox; wait with fewer consumers or subscribe")));
  }
  mem_internal::FetchWaiter& waiter = topic->waiters.emplace_back();
  waiter.id = bus.next_waiter++;
  waiter.core = core_;
  waiter.options = options;
  waiter.done = std::move(done);
  waiter.deadline = bus.clock->now() + options.max_wait;
  mem_internal::arm_locked(bus, *topic, waiter);
}

std::vector<bool> MemProvider::settle_all(std::span<const CopyKey> keys, Disposition disposition) {
  return core_->settle_all(keys, disposition);
}

std::optional<std::optional<absl::Time>> MemProvider::renew(const CopyKey& key) {
  return core_->renew(key);
}

bool MemProvider::nack(const CopyKey& key, absl::Duration delay) { return core_->nack(key, delay); }

absl::StatusOr<std::vector<Delivery>> MemProvider::fetch_batch(const MailAddress& address,
                                                               const FetchOptions& options) {
  struct Slot {
    absl::Mutex mu;
    bool done = false;
    absl::StatusOr<std::vector<Delivery>> result;
  };
  auto slot = std::make_shared<Slot>();
  fetch_batch_async(address, options, [slot](absl::StatusOr<std::vector<Delivery>> r) {
    absl::MutexLock lock(&slot->mu);
    slot->result = std::move(r);
    slot->done = true;
  });
  absl::MutexLock lock(&slot->mu);
  slot->mu.Await(absl::Condition(&slot->done));
  return std::move(slot->result);
}

}  // namespace postal::mail
