// The mem provider's state and the functions that work on it (internal).
//
// One mutex per bus (`BusState::mu`) guards everything below: mailboxes, subscribers, delivery
// chains, broadcast barriers and the providers' running flags. It is never held while a user
// callback runs. Lock order: BusState::mu → Clock / DeliveryExecutor locks; clocks and executors
// never call back into the bus while holding their own lock.
//
// Ownership (no cycles survive a stop or an unsubscribe):
//   BusState ─ topics ─ Topic ─ subscribers ─▶ SubscriberState ─ chains ─▶ Chain ─▶ Barrier
//   CoreState (one per provider) ─ subscribers ─▶ SubscriberState
//   SubscriberState ─ weak ─▶ CoreState, BusState;  timers and executor tasks ─ weak ─▶ Chain
//
// Functions named `*_locked` require `mu`.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "delivery_executor.h"
#include "postal/mail/clock.h"
#include "postal/mail/delivery.h"
#include "postal/mail/letter.h"
#include "postal/mail/mail_address.h"
#include "postal/mail/mail_provider.h"
#include "postal/mail/mailbox_policy.h"
#include "postal/mail/mem_provider.h"
#include "postal/mail/system_headers.h"

namespace postal::mail::mem_internal {

class BusState;
class CoreState;
struct Chain;

// A provider's immutable delivery configuration.
struct Config {
  std::optional<RetryPolicy> retry;
  std::optional<DeadLetterOptions> dead_letter;
  absl::Duration settle_timeout;
  uint64_t max_rounds = 0;
};

struct Lease {
  Letter letter;  // as handed out (mbx-round stamped)
  uint64_t lease_id = 0;
  std::optional<absl::Time> expires;  // nullopt: never
  absl::Duration timeout = absl::ZeroDuration();  // what renew() starts over
};

// A fetch_batch waiting for its first copy (the long poll): served in arrival order by
// whatever queues a copy, or answered by its timer at its deadline.
struct FetchWaiter {
  uint64_t id = 0;
  std::weak_ptr<CoreState> core;
  FetchOptions options;
  MailProvider::FetchDone done;
  absl::Time deadline;    // on the bus clock
  Clock::TimerId timer = 0;  // at the deadline, or earlier to look again (a lease or a delay ends)
};

struct SubscriberState {
  uint64_t id = 0;
  std::string topic;  // canonical address
  std::string label;
  MailHandler handler;  // invoked only by its strand, never under `mu`; released by unsubscribe
  // Or, for subscribe_async: started by the strand, settled later; at most max_in_flight
  // unsettled, the attempts past it held in order until one settles.
  MemProvider::AsyncMailHandler async_handler;
  bool async = false;  // set at creation: which of the two it is
  size_t max_in_flight = 1;
  std::shared_ptr<const Config> config;  // the provider's
  // M-RETRY-5: the subscription's own redelivery, ahead of the mailbox's and the provider's.
  std::optional<RetryPolicy> own_retry;
  std::optional<absl::Duration> own_settle_timeout;
  std::weak_ptr<CoreState> core;
  std::weak_ptr<BusState> bus;
  std::shared_ptr<DeliveryExecutor::Strand> strand;
  // Guarded by BusState::mu.
  bool active = true;
  bool running = false;  // its callback is running
  std::thread::id running_thread;
  absl::flat_hash_set<std::shared_ptr<Chain>> chains;  // deliveries not settled yet
  size_t in_flight = 0;                                // async attempts started, not settled
  std::deque<std::pair<std::weak_ptr<Chain>, uint64_t>> held;  // async attempts past the window
};

struct Topic {
  explicit Topic(MailAddress a) : address(std::move(a)) {}
  MailAddress address;
  std::deque<Letter> queue;
  absl::flat_hash_map<std::string, Lease> in_flight;  // by mbx-send-id
  std::vector<Letter> parked;
  std::multimap<absl::Time, Letter> delayed;  // nacked with a delay, by when fetches may see them
  std::deque<FetchWaiter> waiters;            // only while the queue is empty
  uint64_t terminated = 0;                    // settled kTerminate
  // Totals since the mailbox was first used (M-STAT-3): every post accepted; every copy settled
  // handled (a fetch's ack, an auto fetch, a broadcast someone handled); every give-up recorded
  // as a dead letter or parked.
  uint64_t accepted = 0;
  uint64_t settled = 0;
  uint64_t dead_lettered = 0;
  uint64_t retry_waiting = 0;  // push deliveries waiting in a retry backoff
  std::vector<std::shared_ptr<SubscriberState>> subscribers;
  std::optional<absl::Time> last_activity;
  uint64_t pending_deliveries = 0;  // chains not settled
  uint64_t dropped = 0;             // given up with no dead-letter queue
  uint64_t watchdog_cancelled = 0;
};

// The outcome of one delivery (one subscriber, one letter, its whole retry chain).
enum class Outcome : uint8_t { kHandled, kFatal, kRetriable, kCancelled };

struct DeliveryResult {
  Outcome outcome = Outcome::kHandled;
  uint32_t attempts = 0;
  std::string error;
};

// One broadcast: settled when every delivery has settled (M-RETRY-1).
struct Barrier {
  std::string topic;
  Letter letter;                         // the copy as pushed (mbx-send-id, mbx-round)
  std::shared_ptr<const Config> poster;  // whose give-up policy applies
  size_t remaining = 0;
  std::vector<DeliveryResult> results;
};

enum class Phase : uint8_t { kQueued, kRunning, kBackoff, kDone };

struct Chain {
  std::shared_ptr<Barrier> barrier;
  std::shared_ptr<SubscriberState> sub;
  uint32_t attempt = 0;
  uint64_t token = 0;  // identifies the current attempt; stale timers and tasks compare it
  Phase phase = Phase::kQueued;
  Clock::TimerId watchdog = 0;
  absl::Duration settle_timeout;  // the current attempt's watchdog
  Clock::TimerId backoff = 0;
  std::string last_error;  // of the last failed attempt, for a chain cancelled in its backoff
};

class BusState : public std::enable_shared_from_this<BusState> {
 public:
  explicit BusState(std::shared_ptr<Clock> c) : clock(std::move(c)) {}

  absl::Mutex mu;
  const std::shared_ptr<Clock> clock;
  std::map<std::string, Topic> topics ABSL_GUARDED_BY(mu);  // sorted: snapshots are sorted
  // M-RETRY-6: mailbox policies by canonical address; apart from `topics`, so setting one does
  // not make a mailbox known, and it outlives the mailbox's content.
  absl::flat_hash_map<std::string, MailboxPolicy> policies ABSL_GUARDED_BY(mu);
  uint64_t next_lease ABSL_GUARDED_BY(mu) = 1;
  uint64_t next_token ABSL_GUARDED_BY(mu) = 1;
  uint64_t next_subscriber ABSL_GUARDED_BY(mu) = 1;
  uint64_t busy ABSL_GUARDED_BY(mu) = 0;  // attempts queued or running (wait_idle)
  uint64_t next_waiter ABSL_GUARDED_BY(mu) = 1;
  // Answers to run once `mu` is released (a served FetchWaiter's `done`): BusLock runs them.
  std::vector<absl::AnyInvocable<void() &&>> completions ABSL_GUARDED_BY(mu);

  Topic& topic_locked(const MailAddress& address) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  Topic* find_locked(std::string_view canonical) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
};

// Holds `bus.mu`; on release runs the completions queued meanwhile, unlocked, in order.
class ABSL_SCOPED_LOCKABLE BusLock {
 public:
  explicit BusLock(BusState& bus) ABSL_EXCLUSIVE_LOCK_FUNCTION(bus.mu) : bus_(bus) {
    bus_.mu.Lock();
  }
  ~BusLock() ABSL_UNLOCK_FUNCTION() {
    std::vector<absl::AnyInvocable<void() &&>> ready;
    ready.swap(bus_.completions);
    bus_.mu.Unlock();
    for (auto& fn : ready) std::move(fn)();
  }
  BusLock(const BusLock&) = delete;
  BusLock& operator=(const BusLock&) = delete;

 private:
  BusState& bus_;
};

// One provider's engine: its configuration, executor and subscriptions. It settles the leases
// its fetches hand out, so it outlives the provider while a Delivery does.
class CoreState final : public LeaseSettler, public std::enable_shared_from_this<CoreState> {
 public:
  CoreState(std::shared_ptr<BusState> b, std::shared_ptr<const Config> c, size_t threads)
      : bus(std::move(b)), config(std::move(c)), max_threads(threads) {}

  bool settle(const CopyKey& key, Disposition disposition) override;
  using LeaseSettler::settle;
  std::vector<bool> settle_all(std::span<const CopyKey> keys, Disposition disposition) override;
  std::optional<std::optional<absl::Time>> renew(const CopyKey& key) override;
  bool nack(const CopyKey& key, absl::Duration delay) override;

  const std::shared_ptr<BusState> bus;
  const std::shared_ptr<const Config> config;
  const size_t max_threads;
  // Guarded by bus->mu.
  bool running = false;
  std::unique_ptr<DeliveryExecutor> executor;
  absl::flat_hash_map<uint64_t, std::shared_ptr<SubscriberState>> subscribers;
  Clock::TimerId sweeper = 0;
  uint64_t sweeper_generation = 0;
};

// ---- mem_queue.cc: the queue, leases and status ----
// Mints nothing: `letter` arrives stamped. Pushes to every subscriber, or queues (M-KIND-1).
PostReceipt post_locked(BusState& bus, const std::shared_ptr<const Config>& poster, Topic& topic,
                        Letter letter);
std::optional<Delivery> fetch_locked(BusState& bus, const std::shared_ptr<CoreState>& core,
                                     Topic& topic, const FetchOptions& options);

// ---- mem_fetch.cc: batches, the long poll, delayed redelivery (M-RECV-6, M-ACK-6) ----
// Up to options.max_messages (and max_bytes) copies, after releasing the delayed copies due.
std::vector<Delivery> take_batch_locked(BusState& bus, const std::shared_ptr<CoreState>& core,
                                        Topic& topic, const FetchOptions& options);
// Answers the waiters of `topic` in order while copies are queued (after anything queued one).
void serve_waiters_locked(BusState& bus, Topic& topic);
// Answers `core`'s waiters on every topic with `why` (its provider stops).
void fail_waiters_locked(BusState& bus, const CoreState& core, const absl::Status& why);
// Delayed copies whose time has come go to the head of the queue, the earliest first.
void release_due_locked(BusState& bus, Topic& topic);
// The live lease `key` names, or null (unknown, another lease of the copy, expired).
Lease* live_lease_locked(BusState& bus, Topic* topic, const CopyKey& key);
bool settle_locked(BusState& bus, const std::shared_ptr<const Config>& config, const CopyKey& key,
                   Disposition disposition);
// Back to the head of the queue unless already queued or in flight (never queued twice), or
// given up with `cap_reason` past the round cap. True when it was queued.
bool requeue_locked(BusState& bus, const std::shared_ptr<const Config>& config, Topic& topic,
                    Letter letter, DeadLetterReason cap_reason, uint32_t attempts,
                    std::string_view error);
uint64_t reclaim_expired_locked(BusState& bus, const std::shared_ptr<const Config>& config,
                                Topic& topic);
MailboxStatus status_locked(const BusState& bus, const Topic& topic, bool running);
uint64_t clear_topic_locked(Topic& topic);
uint64_t round_of(const Letter& letter);

// ---- mem_push.cc: push deliveries, retries, the watchdog (M-RETRY-1…4) ----
void start_attempt_locked(BusState& bus, const std::shared_ptr<Chain>& chain);
// Starts held attempts of an async subscription, once the lock is released, when its window has
// room and no thread is starting one.
void release_held_locked(BusState& bus, const std::shared_ptr<SubscriberState>& sub);
// Unsubscribes: cancels queued and backoff deliveries, then waits for a running callback
// (unless it is the caller's). Takes `mu` itself.
// `wait` false: cancels and returns without waiting (and keeps the handler for a later call).
void cancel_subscriber(BusState& bus, const std::shared_ptr<SubscriberState>& sub,
                       bool wait = true);

// ---- mem_dead_letter.cc: give-ups, dead-letter records, parking (M-DLQ-1…3) ----
void give_up_locked(BusState& bus, const std::shared_ptr<const Config>& config, Topic& from,
                    Letter letter, DeadLetterReason reason, uint32_t attempts,
                    std::string_view error);
// How many times `suffix` ends `address`'s path: the address's dead-letter depth.
size_t dead_letter_depth(const MailAddress& address, std::string_view suffix);
// Where a give-up from `address` lands: address + suffix, or `address` itself at the cap.
absl::StatusOr<MailAddress> dead_letter_topic_of(const DeadLetterOptions& options,
                                                 const MailAddress& address);

// ---- mem_policy.cc: which settings govern a delivery (M-RETRY-5, M-RETRY-6) ----
// Field by field: the subscription's own, else the mailbox's, else the provider's.
struct AttemptPolicy {
  std::optional<RetryPolicy> retry;
  absl::Duration settle_timeout;
};
AttemptPolicy attempt_policy_locked(const BusState& bus, const SubscriberState& sub);
// The mailbox's round cap, else the provider's (0: unlimited).
uint64_t max_rounds_locked(const BusState& bus, const Config& config, const Topic& topic);
// Whether and how a give-up from `topic` is dead-lettered: the mailbox's choice (with the
// provider's options, or the defaults), else the provider's.
std::optional<DeadLetterOptions> dead_letter_locked(const BusState& bus, const Config& config,
                                                    const Topic& topic);

// A letter as stored: `letter` with fresh system headers minted at the send boundary.
Letter stamp_for_send(Letter letter, const MailAddress& to, absl::Time now);
// Something the provider did on its own; logged on `postal.mail`, at most one line a second per
// kind (input can repeat them).
enum class MemEvent : uint8_t { kWatchdogFired, kParked, kDeadLetterFailed };
void report(MemEvent event, std::string_view what);

}  // namespace postal::mail::mem_internal
