// ActorCell's mailbox bound (R-FLOW-1; runtime/mailbox_bound.h has the contract): room is
// reserved when the mailbox admits an envelope and freed when the envelope leaves the actor
// (handled, returned, dropped); a full mailbox refuses, drops its oldest, or lets a kBlock
// sender wait for room.
#include <chrono>

#include "actor_cell.h"
#include "boost/fiber/condition_variable.hpp"
#include "boost/fiber/mutex.hpp"
#include "postal/actors/down.h"
#include "postal/actors/supervision_event.h"

namespace postal::actors::internal {

using runtime::Admission;
using runtime::DeliveryFailure;
using runtime::EnvelopePtr;
using runtime::MessageEnvelope;
using runtime::OverloadBound;
using runtime::OverloadPolicy;

// Senders waiting for room. Fiber primitives: a waiter may be a fiber on a worker (its worker
// keeps running other fibers) or an ordinary thread.
struct ActorCell::RoomWaiters {
  boost::fibers::mutex mu;
  boost::fibers::condition_variable cv;
};

ActorCell::~ActorCell() {
  queue_.drain(queue_head_);
  delete room_.load(std::memory_order_acquire);
}

namespace {

// Handler-port envelopes are the ones the mailbox admitted against the bound.
bool counted(const MessageEnvelope& env) {
  return env.dest().id.port.kind() == runtime::Port::Kind::kHandler;
}

// Never refused (mailbox_bound.h): losing them would break supervision and watches.
bool exempt(const MessageEnvelope& env) {
  const uint64_t hash = env.data().type_hash();
  return hash == wire::type_hash<SupervisionEvent>() || hash == wire::type_hash<Down>();
}

}  // namespace

MessageEnvelope* ActorCell::pop_queue() {
  if (bound_.policy != OverloadPolicy::kDropOldest) return queue_.pop(queue_head_);
  absl::MutexLock lock(&drop_mu_);
  if (!spared_.empty()) {
    MessageEnvelope* env = spared_.front().release();
    spared_.erase(spared_.begin());
    return env;
  }
  return queue_.pop(queue_head_);
}

bool ActorCell::queue_maybe_nonempty() {
  if (bound_.policy != OverloadPolicy::kDropOldest) return queue_.maybe_nonempty(queue_head_);
  absl::MutexLock lock(&drop_mu_);
  return !spared_.empty() || queue_.maybe_nonempty(queue_head_);
}

EnvelopePtr ActorCell::pop_droppable(DeliveryFailure* why) {
  absl::MutexLock lock(&drop_mu_);
  while (MessageEnvelope* raw = queue_.pop(queue_head_)) {
    EnvelopePtr old(raw);
    if (!counted(*old) || exempt(*old)) {  // never dropped: kept for the runner, in order
      spared_.push_back(std::move(old));
      continue;
    }
    *why = overloaded(*old, 0, "dropped as the oldest");
    return old;
  }
  return nullptr;
}

// One add per counter, taken back when it went past the bound: with several senders a
// compare-exchange loop retried (and moved the counters' line) once per sender that got in
// between. A sender refused at the bound may briefly have counted itself, so a concurrent one
// near the bound can be refused where it would have fit a moment later — as it could be by a
// message that was being handled.
//
// The room is judged first against released_seen_, a lower bound of what the runner released,
// kept on the senders' line: only when that says the mailbox may be full does a send read the
// runner's line (and refresh the bound). The count it judges by is never below the true one.
bool ActorCell::try_reserve(uint64_t bytes) {
  // Never below zero: senders admitted after this one may have been released already.
  auto held = [](uint64_t in, uint64_t out) { return in >= out ? in - out : uint64_t{0}; };
  const uint64_t n = admitted_.fetch_add(1, std::memory_order_seq_cst);
  if (held(n, released_seen_.load(std::memory_order_relaxed)) >= bound_.max_messages) {
    const uint64_t out = released_.load(std::memory_order_seq_cst);
    released_seen_.store(out, std::memory_order_relaxed);  // any past value is a lower bound
    if (held(n, out) >= bound_.max_messages) {
      admitted_.fetch_sub(1, std::memory_order_seq_cst);
      return false;
    }
  }
  const uint64_t b = admitted_bytes_.fetch_add(bytes, std::memory_order_seq_cst) + bytes;
  if (held(b, released_bytes_seen_.load(std::memory_order_relaxed)) > bound_.max_bytes) {
    const uint64_t out = released_bytes_.load(std::memory_order_seq_cst);
    released_bytes_seen_.store(out, std::memory_order_relaxed);
    if (held(b, out) > bound_.max_bytes) {
      admitted_bytes_.fetch_sub(bytes, std::memory_order_seq_cst);
      admitted_.fetch_sub(1, std::memory_order_seq_cst);
      return false;
    }
  }
  return true;
}

DeliveryFailure ActorCell::overloaded(const MessageEnvelope& env, uint64_t bytes,
                                      std::string detail) const {
  const uint64_t n = queued();
  std::string target = env.dest().to_string();
  if (bytes > bound_.max_bytes) {
    return DeliveryFailure::overloaded(std::move(target), OverloadBound::kMailboxBytes, bytes,
                                       bound_.max_bytes, "larger than the mailbox's byte bound");
  }
  if (n >= bound_.max_messages) {
    return DeliveryFailure::overloaded(std::move(target), OverloadBound::kMailboxMessages, n,
                                       bound_.max_messages, std::move(detail));
  }
  return DeliveryFailure::overloaded(std::move(target), OverloadBound::kMailboxBytes,
                                     queued_bytes(), bound_.max_bytes, std::move(detail));
}

Admission ActorCell::admit(MessageEnvelope& env) {
  Admission a;
  const uint64_t bytes = env.data().known_size();
  env.set_held_bytes(bytes);
  if (exempt(env)) {  // counted, never refused
    admitted_.fetch_add(1, std::memory_order_seq_cst);
    admitted_bytes_.fetch_add(env.held_bytes(), std::memory_order_seq_cst);
    return a;
  }
  if (bytes > bound_.max_bytes) {  // no amount of room would take it
    a.admitted = false;
    a.full = overloaded(env, bytes, {});
    return a;
  }
  if (try_reserve(env.held_bytes())) return a;
  if (bound_.policy == OverloadPolicy::kDropOldest) {
    // Drops the oldest queued envelopes until this one fits (usually one); when nothing queued
    // is left to drop, what fills the bound is being handled or stashed: refuse.
    DeliveryFailure why;
    while (EnvelopePtr old = pop_droppable(&why)) {
      release_room(*old);
      if (a.dropped) {  // a second one: returned here, the first by the mailbox
        runtime::NoBlockScope no_block;
        proc_.counters().add(runtime::Counter::kDroppedOldest);
        MessageEnvelope::undeliverable(std::move(a.dropped), std::move(*a.full), proc_);
      }
      a.dropped = std::move(old);
      a.full = std::move(why);
      if (try_reserve(env.held_bytes())) return a;
    }
  }
  if (a.dropped) {  // dropped some, still no room: the dropped one still goes back
    runtime::NoBlockScope no_block;
    proc_.counters().add(runtime::Counter::kDroppedOldest);
    MessageEnvelope::undeliverable(std::move(a.dropped), std::move(*a.full), proc_);
  }
  a.admitted = false;
  a.full = overloaded(env, bytes, "the mailbox is full");
  a.may_wait = bound_.policy == OverloadPolicy::kBlock;
  a.wait = bound_.block_timeout;
  return a;
}

void ActorCell::release_room(const MessageEnvelope& env) {
  if (!counted(env)) return;
  // Only the runner releases, unless senders drop the oldest (admit): the bytes take a plain add
  // unless they do. The count's locked add after it publishes the bytes and orders both before
  // the look at the blocked senders below.
  if (bound_.policy == OverloadPolicy::kDropOldest) {
    released_bytes_.fetch_add(env.held_bytes(), std::memory_order_seq_cst);
  } else {
    released_bytes_.store(released_bytes_.load(std::memory_order_relaxed) + env.held_bytes(),
                          std::memory_order_relaxed);
  }
  released_.fetch_add(1, std::memory_order_seq_cst);
  // Seen by a sender that registered before its last look at the counts (both seq_cst). One
  // wake-up per wait is enough: the waiters re-check the room when they wake, and clear
  // `room_signalled_` before they look and wait again (wait_for_room), so a release after their
  // look signals again. Without it, a consumer draining a full mailbox locked the waiters' fiber
  // mutex and notified on every message (Count: a million times).
  if (blocked_senders_.load(std::memory_order_seq_cst) != 0 &&
      !room_signalled_.exchange(true, std::memory_order_seq_cst)) {
    wake_blocked_senders();
  }
  if (room_listeners_.load(std::memory_order_seq_cst) != 0 && credit_room()) {
    call_room_listeners();
  }
}

bool ActorCell::credit_room() const {
  // Half the bound: the sender that was paused gets room for a burst, and the actor still has
  // half a mailbox to work on while that burst crosses the channel.
  return (queued() <= bound_.max_messages / 2 && queued_bytes() <= bound_.max_bytes / 2) ||
         stop_requested() || is_terminal(state_.load());
}

bool ActorCell::notify_on_room(std::function<void()> on_room) {
  {
    absl::MutexLock lock(&listeners_mu_);
    if (listeners_.size() >= kMaxRoomListeners) return false;
    listeners_.push_back(std::move(on_room));
    room_listeners_.store(static_cast<uint32_t>(listeners_.size()), std::memory_order_seq_cst);
  }
  // Registered before this look (seq_cst both): a release that drained the mailbox meanwhile
  // either saw the listener or is seen here.
  if (credit_room()) call_room_listeners();
  return true;
}

void ActorCell::call_room_listeners() {
  std::vector<std::function<void()>> due;
  {
    absl::MutexLock lock(&listeners_mu_);
    due.swap(listeners_);
    room_listeners_.store(0, std::memory_order_seq_cst);
  }
  for (std::function<void()>& f : due) f();
}

void ActorCell::wake_blocked_senders() {
  RoomWaiters* w = room_.load(std::memory_order_acquire);
  if (w == nullptr) return;
  std::unique_lock<boost::fibers::mutex> lock(w->mu);
  w->cv.notify_all();
}

bool ActorCell::wait_for_room(absl::Time deadline) {
  RoomWaiters* w = room_.load(std::memory_order_acquire);
  if (w == nullptr) {
    auto* fresh = new RoomWaiters();
    if (room_.compare_exchange_strong(w, fresh, std::memory_order_acq_rel)) {
      w = fresh;
    } else {
      delete fresh;
    }
  }
  // A fiber on a worker waits inside its scheduler's BlockingScope: the worker keeps running
  // other actors (maybe this very consumer) meanwhile.
  runtime::Scheduler* current = runtime::Scheduler::current();
  std::optional<runtime::Scheduler::BlockingScope> blocking;
  if (current != nullptr) blocking.emplace(*current);
  auto room = [&] { return queued() < bound_.max_messages && queued_bytes() < bound_.max_bytes; };
  auto give_up = [&] {
    return proc_.scheduler().stopping() || (current != nullptr && current->stopping());
  };
  std::unique_lock<boost::fibers::mutex> lock(w->mu);
  blocked_senders_.fetch_add(1, std::memory_order_seq_cst);
  bool ok = false;
  for (;;) {
    room_signalled_.store(false, std::memory_order_seq_cst);  // before the look (release_room)
    // A stopping or ended actor: the retry fails it with the stop's reason (R-ACT-5).
    if (room() || stop_requested() || is_terminal(state_.load())) {
      ok = true;
      break;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline || give_up()) break;
    // Short slices: a stopping scheduler is noticed without a registration.
    const absl::Duration slice = std::min(deadline - now, absl::Milliseconds(50));
    w->cv.wait_for(lock, absl::ToChronoNanoseconds(slice));
  }
  blocked_senders_.fetch_sub(1, std::memory_order_seq_cst);
  return ok;
}

}  // namespace postal::actors::internal
