// The mem provider's push side: delivery chains, per-delivery broadcast settlement (M-RETRY-1),
// opt-in retries (M-RETRY-2), the settle watchdog and cancellation (M-RETRY-4), and how a push
// consumer's status becomes a disposition (M-ACK-4).
//
// One Chain is one delivery: one subscriber, one letter, every attempt of its retry chain. An
// attempt is dispatched (kQueued: on the subscriber's strand, watchdog running), runs
// (kRunning), and either settles the chain or waits for its next attempt (kBackoff). Every
// attempt gets a fresh token; a timer or task holding an old token finds it stale and does
// nothing, so each chain settles exactly once.
#include <exception>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "mem_state.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::mem_internal {
namespace {

constexpr size_t kMaxErrorLength = 512;

std::string one_line(const absl::Status& status) {
  std::string s = absl::StrReplaceAll(status.ToString(), {{"\n", " "}, {"\r", " "}});
  if (s.size() > kMaxErrorLength) s.resize(kMaxErrorLength);
  return s;
}

absl::Status invoke(MailHandler& handler, const Letter& letter) {
  // Exceptions never cross the API: one escaping a callback is a plain (fatal) error.
  try {
    return handler(letter);
  } catch (const std::exception& e) {
    return absl::UnknownError(absl::StrCat("the callback threw: ", e.what()));
  } catch (...) {
    return absl::UnknownError("the callback threw a non-standard exception");
  }
}

void cancel_timers_locked(BusState& bus, Chain& chain) {
  if (chain.watchdog != 0) bus.clock->cancel(chain.watchdog);
  if (chain.backoff != 0) bus.clock->cancel(chain.backoff);
  chain.watchdog = 0;
  chain.backoff = 0;
}

// A delivery leaves its retry backoff (its next attempt starts, or it is cancelled).
void leave_backoff_locked(BusState& bus, const Chain& chain) {
  if (Topic* topic = bus.find_locked(chain.barrier->topic)) --topic->retry_waiting;
}

DeadLetterReason reason_of(Outcome outcome) {
  return outcome == Outcome::kFatal ? DeadLetterReason::kFatal : DeadLetterReason::kRetriable;
}

// M-RETRY-1: settles a broadcast once every delivery has settled.
void resolve_locked(BusState& bus, Barrier& barrier) {
  Topic* topic = bus.find_locked(barrier.topic);
  if (topic == nullptr) return;
  topic->last_activity = bus.clock->now();
  bool handled = false;
  const DeliveryResult* first_failed = nullptr;
  const DeliveryResult* first_retriable = nullptr;
  uint32_t attempts = 0;
  for (const DeliveryResult& r : barrier.results) {
    if (r.outcome == Outcome::kHandled) {
      handled = true;
      continue;
    }
    if (first_failed == nullptr) first_failed = &r;
    if (first_retriable == nullptr && r.outcome != Outcome::kFatal) first_retriable = &r;
    attempts = std::max(attempts, r.attempts);
  }
  if (handled) ++topic->settled;
  if (first_failed == nullptr) return;  // everyone handled it
  if (handled) {
    // Requeueing would hand a handled letter's side effects to a fetch consumer again: the
    // failed deliveries are given up instead — one record for the letter.
    give_up_locked(bus, barrier.poster, *topic, barrier.letter, reason_of(first_failed->outcome),
                   attempts, first_failed->error);
  } else if (first_retriable != nullptr) {
    requeue_locked(bus, barrier.poster, *topic, barrier.letter, DeadLetterReason::kRetriable,
                   attempts, first_retriable->error);
  } else {
    give_up_locked(bus, barrier.poster, *topic, barrier.letter, DeadLetterReason::kFatal, attempts,
                   first_failed->error);
  }
}

void finish_locked(BusState& bus, std::shared_ptr<Chain> chain, Outcome outcome,
                   std::string error) {
  if (chain->phase == Phase::kDone) return;
  if (chain->phase == Phase::kBackoff) leave_backoff_locked(bus, *chain);
  chain->phase = Phase::kDone;
  chain->token = bus.next_token++;  // whatever still holds the old token is stale now
  cancel_timers_locked(bus, *chain);
  chain->sub->chains.erase(chain);
  if (error.empty() && outcome != Outcome::kHandled) error = chain->last_error;
  std::shared_ptr<Barrier> barrier = chain->barrier;
  barrier->results.push_back(DeliveryResult{outcome, chain->attempt, std::move(error)});
  if (Topic* topic = bus.find_locked(barrier->topic)) --topic->pending_deliveries;
  if (--barrier->remaining == 0) resolve_locked(bus, *barrier);
}

void on_backoff(const std::weak_ptr<BusState>& weak_bus, const std::weak_ptr<Chain>& weak,
                uint64_t token) {
  std::shared_ptr<BusState> bus = weak_bus.lock();
  std::shared_ptr<Chain> chain = weak.lock();
  if (!bus || !chain) return;
  BusLock lock(*bus);
  if (chain->token != token || chain->phase != Phase::kBackoff) return;
  chain->backoff = 0;
  leave_backoff_locked(*bus, *chain);
  start_attempt_locked(*bus, chain);
}

void on_watchdog(const std::weak_ptr<BusState>& weak_bus, const std::weak_ptr<Chain>& weak,
                 uint64_t token) {
  std::shared_ptr<BusState> bus = weak_bus.lock();
  std::shared_ptr<Chain> chain = weak.lock();
  if (!bus || !chain) return;
  BusLock lock(*bus);
  if (chain->token != token) return;
  const bool async_running = chain->phase == Phase::kRunning && chain->sub->async;
  if (chain->phase == Phase::kQueued) {
    --bus->busy;  // the attempt never started; its task will find it stale
  } else if (chain->phase != Phase::kRunning) {
    return;
  }
  if (async_running) {
    // Its window slot ends here, and a late settlement finds the token stale. It still counts
    // as busy until its settle function has run (or is dropped): wait_idle waits for the
    // outcome, e.g. a dead subscriber's push coming back and dropping the subscription.
    --chain->sub->in_flight;
  }
  chain->watchdog = 0;
  const absl::Duration timeout = chain->settle_timeout;
  if (Topic* topic = bus->find_locked(chain->barrier->topic)) ++topic->watchdog_cancelled;
  report(MemEvent::kWatchdogFired,
         absl::StrCat("mem: delivery of ", chain->barrier->letter.headers.get(kSendId).value_or(""),
                      " on ", chain->barrier->topic, " to subscription ", chain->sub->id,
                      " did not settle within ", sv(absl::FormatDuration(timeout)),
                      "; the attempt counts as cancelled"));
  // M-RETRY-4: a stuck subscriber cannot hide a message.
  finish_locked(*bus, chain, Outcome::kCancelled,
                absl::StrCat("cancelled: no settlement within the delivery settle timeout (",
                             sv(absl::FormatDuration(timeout)), ")"));
  if (async_running) release_held_locked(*bus, chain->sub);
}

// M-ACK-4: OK = handled; retriable = unhandled (or retried); anything else = discard.
void on_result_locked(BusState& bus, const std::shared_ptr<Chain>& chain,
                      const absl::Status& result) {
  if (result.ok()) return finish_locked(bus, chain, Outcome::kHandled, "");
  std::string error = one_line(result);
  if (!IsRetriable(result)) return finish_locked(bus, chain, Outcome::kFatal, std::move(error));
  SubscriberState& sub = *chain->sub;
  // M-RETRY-5, M-RETRY-6: the subscription's policy, else its mailbox's, else the provider's.
  const std::optional<RetryPolicy> retry = attempt_policy_locked(bus, sub).retry;
  std::shared_ptr<CoreState> core = sub.core.lock();
  // M-RETRY-2: only this subscriber is re-invoked, after an exponential backoff.
  if (retry.has_value() && chain->attempt < retry->max_attempts && sub.active && core &&
      core->running) {
    chain->phase = Phase::kBackoff;
    if (Topic* topic = bus.find_locked(chain->barrier->topic)) ++topic->retry_waiting;
    chain->token = bus.next_token++;
    chain->last_error = std::move(error);
    absl::Duration delay = next_retry_delay(*retry, chain->attempt);
    chain->backoff = bus.clock->schedule_after(
        delay, [weak_bus = sub.bus, weak = std::weak_ptr<Chain>(chain), token = chain->token] {
          on_backoff(weak_bus, weak, token);
        });
    return;
  }
  finish_locked(bus, chain, Outcome::kRetriable, std::move(error));
}

// Under the lock: the attempt starts running (its callback is about to be invoked); its copy,
// stamped with its attempt number. Null when the attempt is stale (cancelled meanwhile).
std::optional<Letter> begin_attempt_locked(const BusState& bus, Chain& chain, uint64_t token) {
  if (chain.token != token || chain.phase != Phase::kQueued) return std::nullopt;
  SubscriberState& sub = *chain.sub;
  chain.phase = Phase::kRunning;
  sub.running = true;
  sub.running_thread = std::this_thread::get_id();
  if (sub.async) ++sub.in_flight;
  Letter letter = chain.barrier->letter;
  letter.headers.set(kAttempt, uint64_t{chain.attempt});
  if (std::optional<RetryPolicy> retry = attempt_policy_locked(bus, sub).retry) {
    letter.headers.set(kMaxAttempts, uint64_t{retry->max_attempts});
  }
  return letter;
}

// An async attempt's settlement, from whichever thread has it.
void on_async_settled(const std::weak_ptr<BusState>& weak_bus, const std::weak_ptr<Chain>& weak,
                      uint64_t token, const absl::Status& result) {
  std::shared_ptr<BusState> bus = weak_bus.lock();
  std::shared_ptr<Chain> chain = weak.lock();
  if (!bus || !chain) return;
  BusLock lock(*bus);
  if (chain->token != token || chain->phase != Phase::kRunning) return;  // the watchdog had it
  std::shared_ptr<SubscriberState> sub = chain->sub;
  --sub->in_flight;
  if (chain->watchdog != 0) bus->clock->cancel(chain->watchdog);
  chain->watchdog = 0;
  on_result_locked(*bus, chain, result);
  release_held_locked(*bus, sub);
}

// Invokes the attempt's callback, outside the lock, and settles it (sync) or lets it settle later.
void invoke_attempt(BusState& bus, const std::shared_ptr<Chain>& chain, uint64_t token,
                    const Letter& letter) {
  SubscriberState& sub = *chain->sub;
  if (sub.async) {
    // The attempt is busy (wait_idle) until its settle function has run or been dropped,
    // whichever comes first, exactly once.
    struct BusyUntilSettled {
      explicit BusyUntilSettled(std::weak_ptr<BusState> b) : bus(std::move(b)) {}
      BusyUntilSettled(const BusyUntilSettled&) = delete;
      BusyUntilSettled& operator=(const BusyUntilSettled&) = delete;
      std::weak_ptr<BusState> bus;
      ~BusyUntilSettled() {
        if (std::shared_ptr<BusState> b = bus.lock()) {
          BusLock lock(*b);
          --b->busy;
        }
      }
    };
    try {
      sub.async_handler(letter, [weak_bus = sub.bus, weak = std::weak_ptr<Chain>(chain), token,
                                 busy = std::make_shared<BusyUntilSettled>(sub.bus)](
                                    absl::Status result) {
        on_async_settled(weak_bus, weak, token, result);
      });
    } catch (...) {
      // Whether it settled is unknown: the watchdog settles it (M-RETRY-4).
    }
    BusLock lock(bus);
    sub.running = false;
    sub.running_thread = std::thread::id();
    return;
  }
  absl::Status result = invoke(sub.handler, letter);
  BusLock lock(bus);
  sub.running = false;
  sub.running_thread = std::thread::id();
  --bus.busy;
  if (chain->token != token || chain->phase != Phase::kRunning) return;  // the watchdog settled it
  if (chain->watchdog != 0) bus.clock->cancel(chain->watchdog);
  chain->watchdog = 0;
  on_result_locked(bus, chain, result);
}

// Starts held attempts of an async subscription while its window has room and no other thread
// is starting one; on the thread that made room (or started the one before).
void drain_held(const std::shared_ptr<SubscriberState>& sub) {
  std::shared_ptr<BusState> bus = sub->bus.lock();
  if (!bus) return;
  while (true) {
    std::shared_ptr<Chain> chain;
    uint64_t token = 0;
    std::optional<Letter> letter;
    {
      BusLock lock(*bus);
      if (sub->running || sub->in_flight >= sub->max_in_flight || sub->held.empty()) return;
      auto [w, t] = std::move(sub->held.front());
      sub->held.pop_front();
      chain = w.lock();
      token = t;
      if (chain) letter = begin_attempt_locked(*bus, *chain, token);
    }
    if (letter.has_value()) invoke_attempt(*bus, chain, token, *letter);
  }
}

// One attempt, on the subscriber's strand. An async subscription's attempt past its window (or
// behind held ones) is held, in order, until a settlement makes room.
void run_attempt(const std::weak_ptr<Chain>& weak, uint64_t token) {
  std::shared_ptr<Chain> chain = weak.lock();
  if (!chain) return;
  std::shared_ptr<SubscriberState> sub = chain->sub;
  std::shared_ptr<BusState> bus = sub->bus.lock();
  if (!bus) return;
  std::optional<Letter> letter;
  {
    BusLock lock(*bus);
    if (chain->token != token || chain->phase != Phase::kQueued) return;  // cancelled
    if (sub->async &&
        (sub->running || sub->in_flight >= sub->max_in_flight || !sub->held.empty())) {
      // Another thread is starting one (it drains the held ones after), or the window is full.
      sub->held.emplace_back(chain, token);
      return;
    }
    letter = begin_attempt_locked(*bus, *chain, token);
  }
  if (!letter.has_value()) return;
  invoke_attempt(*bus, chain, token, *letter);
  if (sub->async) drain_held(sub);
}

}  // namespace

void start_attempt_locked(BusState& bus, const std::shared_ptr<Chain>& chain) {
  SubscriberState& sub = *chain->sub;
  chain->token = bus.next_token++;
  chain->phase = Phase::kQueued;
  std::shared_ptr<CoreState> core = sub.core.lock();
  bool posted = false;
  if (sub.async && sub.active && core && core->running) {
    // An async attempt only starts a delivery: the thread that releases the lock starts it,
    // with no hand-off to a delivery thread (run_attempt serializes the starts).
    bus.completions.push_back(
        [weak = std::weak_ptr<Chain>(chain), token = chain->token] { run_attempt(weak, token); });
    posted = true;
  } else if (sub.active && core && core->running && core->executor) {
    posted = core->executor->post(sub.strand, [weak = std::weak_ptr<Chain>(chain),
                                               token = chain->token] { run_attempt(weak, token); });
  }
  if (!posted) {
    finish_locked(bus, chain, Outcome::kCancelled, "cancelled: the subscriber is gone");
    return;
  }
  // The task cannot run before `mu` is released, so it sees these.
  ++chain->attempt;
  ++bus.busy;
  // M-RETRY-4: the watchdog covers this attempt only, from dispatch; never a backoff wait.
  const absl::Duration timeout = attempt_policy_locked(bus, sub).settle_timeout;
  chain->settle_timeout = timeout;
  if (timeout > absl::ZeroDuration()) {
    chain->watchdog = bus.clock->schedule_after(
        timeout, [weak_bus = sub.bus, weak = std::weak_ptr<Chain>(chain), token = chain->token] {
          on_watchdog(weak_bus, weak, token);
        });
  }
}

void release_held_locked(BusState& bus, const std::shared_ptr<SubscriberState>& sub) {
  if (sub->held.empty() || sub->running || sub->in_flight >= sub->max_in_flight) return;
  // Started by the thread that releases the lock, once it has.
  bus.completions.push_back([sub] { drain_held(sub); });
}

void cancel_subscriber(BusState& bus, const std::shared_ptr<SubscriberState>& sub, bool wait) {
  MailHandler released;  // destroyed after the lock is released: it may own anything
  MemProvider::AsyncMailHandler released_async;
  BusLock lock(bus);
  if (sub->active) {
    sub->active = false;
    if (Topic* topic = bus.find_locked(sub->topic)) {
      std::erase(topic->subscribers, sub);
    }
    if (std::shared_ptr<CoreState> core = sub->core.lock()) core->subscribers.erase(sub->id);
    // M-RETRY-4: only deliveries that are not running are cancelled.
    std::vector<std::shared_ptr<Chain>> chains(sub->chains.begin(), sub->chains.end());
    for (const std::shared_ptr<Chain>& chain : chains) {
      if (chain->phase == Phase::kQueued) {
        --bus.busy;
        finish_locked(bus, chain, Outcome::kCancelled,
                      "cancelled: unsubscribed before the attempt started");
      } else if (chain->phase == Phase::kBackoff) {
        finish_locked(bus, chain, Outcome::kCancelled,
                      absl::StrCat("cancelled: unsubscribed during a retry backoff after: ",
                                   chain->last_error));
      }
    }
  }
  if (!wait) return;
  // A running callback is never cancelled; wait for it, unless this is it — and for every
  // started async delivery to settle (or its watchdog to fire).
  if (sub->running && sub->running_thread != std::this_thread::get_id()) {
    bus.mu.Await(absl::Condition(
        +[](SubscriberState* s) { return !s->running; }, sub.get()));
  }
  if (sub->async && !sub->running) {
    bus.mu.Await(absl::Condition(
        +[](SubscriberState* s) { return s->in_flight == 0; }, sub.get()));
  }
  // Never called again: let go of what it captured (not while it runs on this very thread).
  if (!sub->running) {
    released = std::move(sub->handler);
    released_async = std::move(sub->async_handler);
  }
}

}  // namespace postal::mail::mem_internal
