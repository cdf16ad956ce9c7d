// The mem provider's queue: the two exclusive paths of a post (M-KIND-1), leases and their
// settlement (M-ACK-1…3), requeue without duplicates (M-RETRY-2), status (M-STAT-1).
#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "mem_state.h"
#include "postal/runtime/log_rate_limit.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::mem_internal {

Topic& BusState::topic_locked(const MailAddress& address) {
  auto [it, inserted] = topics.try_emplace(address.canonical(), address);
  return it->second;
}

Topic* BusState::find_locked(std::string_view canonical) {
  auto it = topics.find(std::string(canonical));
  return it == topics.end() ? nullptr : &it->second;
}

uint64_t round_of(const Letter& letter) { return letter.headers.get(kRound).value_or(0); }

Letter stamp_for_send(Letter letter, const MailAddress& to, absl::Time now) {
  // M-RETRY-3: system headers are minted here and never taken from the sender.
  strip_system_headers(letter.headers);
  if (letter.id.empty()) letter.id = mint_send_id();
  letter.to = to.canonical();
  letter.headers.set(kSendId, mint_send_id());
  letter.headers.set(kSentAt, format_iso8601(now));
  return letter;
}

void report(MemEvent event, std::string_view what) {
  using runtime::LogLevel;
  using runtime::LogRateLimit;
  static LogRateLimit limits[] = {LogRateLimit(absl::Seconds(1)), LogRateLimit(absl::Seconds(1)),
                                  LogRateLimit(absl::Seconds(1))};
  static constexpr LogLevel kLevels[] = {LogLevel::kWarn, LogLevel::kCritical, LogLevel::kError};
  const auto i = static_cast<size_t>(event);
  limits[i].log(runtime::Logger::mail(), kLevels[i], what);
}

PostReceipt post_locked(BusState& bus, const std::shared_ptr<const Config>& poster, Topic& topic,
                        Letter letter) {
  PostReceipt receipt;
  receipt.address = topic.address.canonical();
  receipt.message_id = letter.id;
  receipt.send_id = letter.headers.get(kSendId).value_or("");
  topic.last_activity = bus.clock->now();
  ++topic.accepted;
  // M-KIND-1: with no subscriber the letter is queued for fetch; otherwise it is pushed to every
  // subscriber and not queued. The two paths are exclusive.
  if (topic.subscribers.empty()) {
    topic.queue.push_back(std::move(letter));
    receipt.path = PostPath::kQueued;
    serve_waiters_locked(bus, topic);
    return receipt;
  }
  letter.headers.set(kRound, round_of(letter) + 1);
  auto barrier = std::make_shared<Barrier>();
  barrier->topic = receipt.address;
  barrier->letter = std::move(letter);
  barrier->poster = poster;
  std::vector<std::shared_ptr<SubscriberState>> subs = topic.subscribers;
  barrier->remaining = subs.size();
  receipt.path = PostPath::kPushed;
  receipt.deliveries = subs.size();
  topic.pending_deliveries += subs.size();
  for (const std::shared_ptr<SubscriberState>& sub : subs) {
    auto chain = std::make_shared<Chain>();
    chain->barrier = barrier;
    chain->sub = sub;
    sub->chains.insert(chain);
    start_attempt_locked(bus, chain);
  }
  return receipt;
}

namespace {

// Pops the head of the queue for a fetch: stamped, and leased when manual (M-ACK-1: the lease is
// fixed here, by this fetch's own timeout).
Delivery take_head_locked(BusState& bus, const std::shared_ptr<CoreState>& core, Topic& topic,
                          const FetchOptions& options) {
  Letter letter = std::move(topic.queue.front());
  topic.queue.pop_front();
  letter.headers.set(kRound, round_of(letter) + 1);
  letter.headers.set(kAttempt, uint64_t{1});
  absl::Time now = bus.clock->now();
  topic.last_activity = now;
  CopyKey key{topic.address.canonical(), letter.headers.get(kSendId).value_or(""), 0};
  if (options.ack != AckMode::kManual) {
    ++topic.settled;  // an auto fetch is handled at hand-out
    return Delivery::settled(std::move(letter), std::move(key));
  }
  const bool expiring = options.ack_timeout > absl::ZeroDuration() &&
                        options.ack_timeout != absl::InfiniteDuration();
  std::optional<absl::Time> expires;
  if (expiring) expires = now + options.ack_timeout;
  key.lease_id = bus.next_lease++;
  topic.in_flight[key.send_id] =
      Lease{letter, key.lease_id, expires, expiring ? options.ack_timeout : absl::ZeroDuration()};
  return Delivery(std::move(letter), std::move(key), expires, core);
}

}  // namespace

std::vector<Delivery> take_batch_locked(BusState& bus, const std::shared_ptr<CoreState>& core,
                                        Topic& topic, const FetchOptions& options) {
  release_due_locked(bus, topic);
  // M-ACK-3: the next manual fetch reclaims expired leases first.
  if (options.ack == AckMode::kManual) reclaim_expired_locked(bus, core->config, topic);
  std::vector<Delivery> out;
  size_t bytes = 0;
  while (!topic.queue.empty() && out.size() < std::max<size_t>(options.max_messages, 1)) {
    if (options.max_bytes > 0) {
      const size_t next = topic.queue.front().body.byte_size();
      // The first copy is always taken: one larger than the bound is not stuck.
      if (!out.empty() && bytes + next > options.max_bytes) break;
      bytes += next;
    }
    out.push_back(take_head_locked(bus, core, topic, options));
  }
  return out;
}

std::optional<Delivery> fetch_locked(BusState& bus, const std::shared_ptr<CoreState>& core,
                                     Topic& topic, const FetchOptions& options) {
  FetchOptions one = options;
  one.max_messages = 1;
  one.max_bytes = 0;
  std::vector<Delivery> batch = take_batch_locked(bus, core, topic, one);
  if (batch.empty()) return std::nullopt;
  return std::move(batch.front());
}

Lease* live_lease_locked(BusState& bus, Topic* topic, const CopyKey& key) {
  // M-ACK-2: keyed by the copy and its lease, never by the sender-chosen id.
  if (topic == nullptr || key.lease_id == 0) return nullptr;
  auto it = topic->in_flight.find(key.send_id);
  if (it == topic->in_flight.end() || it->second.lease_id != key.lease_id) return nullptr;
  // A late settlement does not take effect: the lease is over, the copy waits for its reclaim.
  if (it->second.expires.has_value() && *it->second.expires <= bus.clock->now()) return nullptr;
  return &it->second;
}

bool settle_locked(BusState& bus, const std::shared_ptr<const Config>& config, const CopyKey& key,
                   Disposition disposition) {
  Topic* topic = bus.find_locked(key.address);
  Lease* lease = live_lease_locked(bus, topic, key);
  if (lease == nullptr) return false;
  Letter letter = std::move(lease->letter);
  topic->in_flight.erase(key.send_id);
  topic->last_activity = bus.clock->now();
  switch (disposition) {
    case Disposition::kHandled:
      ++topic->settled;
      break;
    case Disposition::kDiscard:
      // Disposed first, archived after: the copy is never in the queue and the DLQ at once.
      give_up_locked(bus, config, *topic, std::move(letter), DeadLetterReason::kConsumerNack, 1,
                     "discarded by the consumer");
      break;
    case Disposition::kUnhandled:
      requeue_locked(bus, config, *topic, std::move(letter), DeadLetterReason::kConsumerNack, 1,
                     "returned unhandled by the consumer");
      break;
    case Disposition::kTerminate:
      ++topic->terminated;  // removed for good, and no dead letter
      break;
  }
  return true;
}

bool requeue_locked(BusState& bus, const std::shared_ptr<const Config>& config, Topic& topic,
                    Letter letter, DeadLetterReason cap_reason, uint32_t attempts,
                    std::string_view error) {
  std::string send_id = letter.headers.get(kSendId).value_or("");
  // M-RETRY-2: a message is never queued twice.
  if (topic.in_flight.contains(send_id)) return false;
  for (const Letter& queued : topic.queue) {
    if (queued.headers.get(kSendId) == send_id) return false;
  }
  for (const auto& [due, waiting] : topic.delayed) {
    if (waiting.headers.get(kSendId) == send_id) return false;
  }
  // M-RETRY-6: the mailbox's round cap, else the provider's.
  const uint64_t max_rounds = max_rounds_locked(bus, *config, topic);
  if (max_rounds > 0 && round_of(letter) >= max_rounds) {
    give_up_locked(bus, config, topic, std::move(letter), cap_reason, attempts,
                   absl::StrCat(sv(error), "; delivery round cap (", max_rounds, ") reached"));
    return false;
  }
  letter.headers.erase(kAttempt.name);
  letter.headers.erase(kMaxAttempts.name);
  topic.queue.push_front(std::move(letter));
  serve_waiters_locked(bus, topic);
  return true;
}

uint64_t reclaim_expired_locked(BusState& bus, const std::shared_ptr<const Config>& config,
                                Topic& topic) {
  absl::Time now = bus.clock->now();
  std::vector<Lease> expired;
  for (auto it = topic.in_flight.begin(); it != topic.in_flight.end();) {
    if (it->second.expires.has_value() && *it->second.expires <= now) {
      expired.push_back(std::move(it->second));
      topic.in_flight.erase(it++);
    } else {
      ++it;
    }
  }
  // Newest lease first, each to the head: the oldest ends up first in the queue.
  std::sort(expired.begin(), expired.end(),
            [](const Lease& a, const Lease& b) { return a.lease_id > b.lease_id; });
  for (Lease& lease : expired) {
    requeue_locked(bus, config, topic, std::move(lease.letter), DeadLetterReason::kExpiredLease, 1,
                   "the lease expired");
  }
  if (!expired.empty()) topic.last_activity = now;
  return expired.size();
}

uint64_t clear_topic_locked(Topic& topic) {
  uint64_t n = topic.queue.size() + topic.in_flight.size() + topic.delayed.size();
  topic.queue.clear();
  topic.in_flight.clear();
  topic.delayed.clear();
  return n;
}

MailboxStatus status_locked(const BusState& bus, const Topic& topic, bool running) {
  MailboxStatus s;
  s.address = topic.address.canonical();
  s.state = running ? MailboxState::kOnline : MailboxState::kOffline;
  s.exists = true;
  s.unread_count = topic.queue.size();
  s.in_flight_count = topic.in_flight.size();
  s.last_activity_time = topic.last_activity;
  absl::Time now = bus.clock->now();
  int64_t overdue = 0;
  absl::Duration oldest = absl::ZeroDuration();
  for (const auto& [send_id, lease] : topic.in_flight) {
    if (!lease.expires.has_value() || *lease.expires > now) continue;
    ++overdue;
    oldest = std::max(oldest, now - *lease.expires);
  }
  auto count = [](size_t n) { return StatusValue(static_cast<int64_t>(n)); };
  s.extensions["mem.subscriberCount"] = count(topic.subscribers.size());
  s.extensions["mem.parkedCount"] = count(topic.parked.size());
  s.extensions["mem.overdueInFlightCount"] = StatusValue(overdue);
  s.extensions["mem.oldestOverdueMs"] = StatusValue(absl::ToInt64Milliseconds(oldest));
  s.extensions["mem.pendingDeliveryCount"] = count(topic.pending_deliveries);
  s.extensions["mem.droppedCount"] = count(topic.dropped);
  s.extensions["mem.watchdogCancelledCount"] = count(topic.watchdog_cancelled);
  // Counted apart from the queue: nacked with a delay (due ones count as unread), fetches
  // waiting for mail, copies terminated by their consumers.
  size_t due = 0;
  for (auto it = topic.delayed.begin(); it != topic.delayed.end() && it->first <= now; ++it) ++due;
  s.unread_count += due;
  s.extensions["mem.delayedCount"] = count(topic.delayed.size() - due);
  s.extensions["mem.waitingFetchCount"] = count(topic.waiters.size());
  s.extensions["mem.terminatedCount"] = count(topic.terminated);
  s.extensions["mem.retryWaitingCount"] = count(topic.retry_waiting);
  // Totals (M-STAT-3): what came in, and the three ways a copy leaves for good.
  s.extensions["mem.acceptedCount"] = count(topic.accepted);
  s.extensions["mem.settledCount"] = count(topic.settled);
  s.extensions["mem.deadLetteredCount"] = count(topic.dead_lettered);
  return s;
}

}  // namespace postal::mail::mem_internal
