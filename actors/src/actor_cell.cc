// ActorCell's life: delivery, slices, init, handling, stopping and terminating (see
// actor_cell.h; restarts are in cell_supervision.cc).
#include "actor_cell.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>

#include "absl/strings/str_cat.h"
#include "boost/fiber/operations.hpp"
#include "postal/runtime/deferred_flush.h"
#include "postal/runtime/logger.h"
#include "postal/runtime/scheduler.h"
#include "postal/wire/absl_compat.h"

namespace postal::actors::internal {

using runtime::DeliveryFailure;
using runtime::EnvelopePtr;
using runtime::InvalidReason;
using runtime::Logger;
using runtime::MailboxState;
using runtime::MessageEnvelope;

void ActorCell::bind(const std::shared_ptr<runtime::Mailbox>& mailbox) {
  mailbox_ = mailbox.get();
  weak_mailbox_ = mailbox;
  addr_ = mailbox->owner();
}

// Runs on this actor's runner (its handler or init). Dead children are pruned as the list
// doubles, so a long-lived parent of short-lived children stays small (R-ACT-7).
void ActorCell::add_child(const std::shared_ptr<ActorCell>& child) {
  if (children_.size() >= prune_at_) {
    std::erase_if(children_, [](const std::weak_ptr<ActorCell>& c) { return c.expired(); });
    prune_at_ = std::max<size_t>(64, 2 * children_.size());
  }
  children_.push_back(child);
}

void ActorCell::start() {
  scheduled_.store(true, std::memory_order_release);
  proc_.scheduler().schedule(this);
}

ActorStatus ActorCell::status() const {
  absl::MutexLock lock(&mu_);
  return ActorStatus{state_.load(std::memory_order_acquire), reason_};
}

void ActorCell::stop(std::string reason) {
  {
    absl::MutexLock lock(&mu_);
    if (stop_requested_.load() || is_terminal(state_.load())) return;
    // R-ACT-5: refuse new handler messages before anyone can see the stop requested, so the
    // runner's "nothing admitted, queue empty" check (run_slice) covers every later sender.
    // A mailbox already closed (the actor is failing) stays closed.
    mailbox_->begin_stopping(reason);  // R-ACT-6: refusals say why
    reason_ = std::move(reason);
    stop_requested_.store(true, std::memory_order_seq_cst);
  }
  cancel_timers();  // R-SUP-3: a stopping actor sets no more and receives none
  // R-FLOW-1: senders blocked for room look again, and fail as the actor is stopping.
  if (blocked_senders_.load(std::memory_order_seq_cst) != 0) wake_blocked_senders();
  // R-SUP-1: a stop ends a restart's backoff early (the new incarnation drains, then stops).
  if (backoff_pending_.load(std::memory_order_seq_cst)) {
    proc_.timers().cancel(backoff_timer_.load());
    end_backoff();
  }
  // Never schedules a cell that ran its last slice (R-ACT-7): terminating leaves `scheduled_`
  // set for good, so this finds it set and does nothing.
  wake();
}

absl::StatusOr<ActorStatus> ActorCell::wait(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  // Past on_stop and the actor object's destructor: what they touch is the waiter's again.
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("actor ", addr().id.to_string(), " still ", sv(to_string(state_.load())),
                     " after ", absl::FormatDuration(timeout)));
  }
  return ActorStatus{state_.load(), reason_};
}

// Counting happened in admit (R-FLOW-1; replies to the actor's requests are not counted).
void ActorCell::deliver(EnvelopePtr env) {
  runtime::MpscQueue::push(queue_head_, env.release());
  wake();
}

runtime::SinkInfo ActorCell::info() const {
  return runtime::SinkInfo{std::string(to_string(state_.load(std::memory_order_relaxed))),
                           queued(), queued_bytes(), bound_.max_messages,
                           bound_.max_bytes, watcher_count()};
}

void ActorCell::run_slice(size_t budget) {
  ActorState s = state_.load(std::memory_order_acquire);
  if (is_terminal(s)) return;  // not reached: a terminated cell is never scheduled again
  if (s == ActorState::kCreated || s == ActorState::kRestarting) {
    if (!run_init()) return;
  }
  for (size_t n = 0; n < budget; ++n) {
    if (restart_requested_.load(std::memory_order_relaxed) &&  // no RMW on the hot path
        restart_requested_.exchange(false, std::memory_order_acq_rel) && !stop_requested()) {
      std::string why;
      {
        absl::MutexLock lock(&mu_);
        why = restart_reason_;
      }
      restart(why, absl::ZeroDuration(), /*failed=*/false);  // R-SUP-1: all-for-one
      return;
    }
    EnvelopePtr env = next_message();
    if (env == nullptr) {
      // A slice that handled nothing (a fresh actor's init) does not wait: a burst of spawns
      // would pay the linger once per actor.
      if (n == 0 || !linger()) break;
      env = next_message();
      if (env == nullptr) continue;  // a sender between its push and its link: look again
    }
    if (!process(std::move(env))) return;
  }
  // R-ACT-5: finish stopping only when no delivery is between its admission and this queue
  // (checked before the queue: a delivery leaves `admitting` after its push). Otherwise
  // release() makes the cell runnable again and the next slice handles what was admitted.
  if (stop_requested() && !mailbox_->admitting() && !queue_maybe_nonempty() && !has_replay()) {
    terminate(ActorState::kStopped, {});
    return;
  }
  release();
}

void ActorCell::request_restart(std::string why) {
  {
    absl::MutexLock lock(&mu_);
    restart_reason_ = std::move(why);
  }
  restart_requested_.store(true, std::memory_order_seq_cst);
  wake();
}

// R-SCHED-1: the worker's own back-off, beside each cell's. A wait that ran out makes the
// worker let its next 1, 3, 7, … up to kMaxWorkerLingerSkip chances to linger go by, whichever
// actors they come from; a wait that pays off halves that. The cells' back-off alone does not
// stop a workload of many actors that each wait in vain a few times (Savina's Banking: 1,000
// accounts ran out ~3,400 waits per run, ~7 ms of a ~75 ms run), and fan-out, whose waits pay
// off (~365,000 against ~860 that ran out in a FanOut4 run), keeps lingering. Worker threads
// only: linger() runs nowhere else.
namespace {
constexpr int kMaxWorkerLingerSkip = 4095;
struct WorkerLingerBackoff {
  int countdown = 0;
  int skip = 0;
};
thread_local WorkerLingerBackoff worker_linger;
}  // namespace

// The queue ran dry within the budget: waits up to the scheduler's `linger` for the next message
// while this worker has nothing else queued (scheduler.h, "Linger"). True when one came. A cell
// whose wait ran out waits again only after 1, 3, 7, … up to kMaxLingerSkip dry slices, and a
// wait that pays off halves that: an actor whose next message usually comes later than the
// linger (a reply after a round trip through others) would otherwise spend it on every slice
// while work queued on other workers waits (Savina's Big: +40 % with a plain 5 µs linger). The
// worker backs off likewise (worker_linger above).
bool ActorCell::linger() {
  if (linger_countdown_ > 0) {
    --linger_countdown_;
    return false;
  }
  if (worker_linger.countdown > 0) {
    --worker_linger.countdown;
    return false;
  }
  runtime::Scheduler& sched = proc_.scheduler();
  const absl::Duration limit = sched.options().linger;
  if (limit <= absl::ZeroDuration() || !sched.worker_has_nothing_queued()) return false;
  // What this slice sent goes out first: the worker flushes its deferred sends when a slice
  // ends, and a reply waiting behind the linger would wait for it (deferred_flush.h).
  runtime::internal::run_deferred_flushes();
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(limit);
  for (int i = 1;; ++i) {
    if (queue_maybe_nonempty()) {
      linger_skip_ >>= 1;
      worker_linger.skip >>= 1;
      return true;
    }
    if (stop_requested() || restart_requested_.load(std::memory_order_relaxed)) return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 15) == 0) {
      boost::this_fiber::yield();  // a resumed waiter on this thread runs (and shows as work)
      if (!sched.worker_has_nothing_queued()) return false;
      if (std::chrono::steady_clock::now() >= deadline) {
        linger_skip_ = static_cast<uint8_t>(std::min(2 * linger_skip_ + 1, kMaxLingerSkip));
        linger_countdown_ = linger_skip_;
        worker_linger.skip = std::min(2 * worker_linger.skip + 1, kMaxWorkerLingerSkip);
        worker_linger.countdown = worker_linger.skip;
        return false;
      }
    }
  }
}

// Makes the cell runnable unless it already is. A cell that is runnable already (queued, running,
// lingering) is only read, not written: the senders of a busy actor do not pull its flag's line to
// themselves one after the other. The seq_cst load pairs with release()'s seq_cst store and
// re-check (every push and every flag a waker sets before calling here is seq_cst too): either this
// load sees the flag cleared, or release() sees what the caller pushed or set.
void ActorCell::wake() {
  if (scheduled_.load(std::memory_order_seq_cst)) {
    runtime::internal::busy_slice_send();
    return;
  }
  if (!scheduled_.exchange(true, std::memory_order_acq_rel)) proc_.scheduler().schedule(this);
}

// Ends a slice: runnable again only if work arrived meanwhile.
void ActorCell::release() {
  if (queue_maybe_nonempty() || has_replay()) {
    proc_.scheduler().schedule(this);
    return;
  }
  // From the store on, another worker may run this cell, end it and let it be reaped: the
  // re-check below holds `releasing_` so finished() stays false until it is done (R-ACT-7).
  releasing_.fetch_add(1, std::memory_order_relaxed);
  scheduled_.store(false, std::memory_order_seq_cst);
  if (queue_maybe_nonempty() || restart_requested_.load(std::memory_order_seq_cst) ||
      (stop_requested_.load(std::memory_order_seq_cst) && !is_terminal(state_.load()))) {
    wake();
  }
  releasing_.fetch_sub(1, std::memory_order_release);  // the last touch of this cell
}

// False when init failed and the slice ended (the cell terminated or restarts).
bool ActorCell::run_init() {
  state_.store(ActorState::kInitializing, std::memory_order_release);
  restart_requested_.store(false, std::memory_order_relaxed);  // this is the fresh incarnation
  absl::Status s = guarded([&] {
    if (!actor_) actor_ = remake_();  // R-SUP-1: re-created from the spawn arguments
    return actor_->init(*this);
  });
  if (!s.ok()) return on_failure(absl::StrCat("init: ", s.ToString()));
  state_.store(ActorState::kIdle, std::memory_order_release);
  return true;
}

// False when the handler failed and the slice ended (the cell terminated or restarts).
bool ActorCell::process(EnvelopePtr env) {
  state_.store(ActorState::kProcessing, std::memory_order_relaxed);
  if (env->dest().id.port.kind() == runtime::Port::Kind::kEphemeral) {  // R-ACT-10
    if (!complete_reply(std::move(env))) return false;
    state_.store(ActorState::kIdle, std::memory_order_relaxed);
    return true;
  }
  const uint64_t hash = env->data().type_hash();
  if ((hash == wire::type_hash<SupervisionEvent>() &&
       !supervise(*env->data().get<SupervisionEvent>())) ||
      (hash == wire::type_hash<Down>() && !accept_down(*env->data().get<Down>()))) {
    release_room(*env);  // R-FLOW-1
    state_.store(ActorState::kIdle, std::memory_order_relaxed);
    return true;
  }
  if (held_back(hash)) {  // R-ACT-9: selective receive; the message keeps its room (R-FLOW-1)
    stash_.push_back(Stashed{hash, std::move(env)});
    state_.store(ActorState::kIdle, std::memory_order_relaxed);
    return true;
  }
  current_ = env.get();
  handling_ = env.get();
  DispatchFn fn = type_.find(hash);
  absl::Status s = fn == nullptr ? absl::InternalError("no handler for a bound port")
                                 : guarded([&] { return fn(*actor_, *this, env->data()); });
  current_ = nullptr;
  handling_ = nullptr;
  const bool stashed = std::exchange(stash_current_, false);
  // R-FLOW-1: a handled message frees its room; a stashed one keeps it (the stash is bounded by
  // the mailbox's bound). Before on_failure: a slice that terminates touches nothing after.
  if (!s.ok() || !stashed) release_room(*env);
  if (!s.ok()) return on_failure(s.ToString());  // R-ACT-3, R-SUP-1
  if (stashed) stash_.push_back(Stashed{hash, std::move(env)});  // kept until unstash_all
  state_.store(ActorState::kIdle, std::memory_order_relaxed);
  return true;
}

EnvelopePtr ActorCell::next_message() {
  while (!replay_.empty() && held_back(replay_.back().type_hash)) {  // R-ACT-9
    stash_.push_back(std::move(replay_.back()));
    replay_.pop_back();
  }
  if (!replay_.empty()) {
    EnvelopePtr env = std::move(replay_.back().env);
    replay_.pop_back();
    // A replayed stash is cold and replayed whole, and what comes next is known: start loading
    // the envelope a few ahead (its first lines: the link, the addresses, the data).
    if (replay_.size() > kReplayPrefetch) {
      const char* ahead =
          reinterpret_cast<const char*>(replay_[replay_.size() - 1 - kReplayPrefetch].env.get());
      for (int line = 0; line < 4; ++line) __builtin_prefetch(ahead + 64 * line);
    }
    return env;
  }
  return EnvelopePtr(pop_queue());
}

absl::Status ActorCell::stash_current(uint64_t type_hash, wire::Any** slot) {
  if (handling_ == nullptr) {  // outside a handler, or in a reply's continuation
    return absl::FailedPreconditionError("stash keeps the message being handled; none is");
  }
  if (type_hash != handling_->data().type_hash()) {
    return absl::InvalidArgumentError("stash takes the message being handled, of its own type");
  }
  if (stash_current_) return absl::FailedPreconditionError("this message is stashed already");
  stash_current_ = true;
  *slot = &handling_->data();
  return absl::OkStatus();
}

void ActorCell::set_receive_only(const uint64_t* type_hashes, size_t n) {
  if (only_ == nullptr) only_ = std::make_unique<std::vector<uint64_t>>();
  only_->assign(type_hashes, type_hashes + n);
}

void ActorCell::receive_all() {
  if (only_ != nullptr) only_->clear();
  unstash_all();
}

void ActorCell::unstash_all() {
  // Oldest first, ahead of what was unstashed before (replay_'s next is its back).
  for (auto it = stash_.rbegin(); it != stash_.rend(); ++it) replay_.push_back(std::move(*it));
  stash_.clear();
}

void ActorCell::stop_children(const std::string& reason) {
  for (const std::weak_ptr<ActorCell>& weak : children_) {  // R-ACT-3
    if (std::shared_ptr<ActorCell> child = weak.lock()) child->stop(reason);
  }
  children_.clear();
}

void ActorCell::run_on_stop(const ActorStatus& status) {
  if (!actor_) return;  // re-creating it failed (R-SUP-1)
  absl::Status stopped = guarded([&] {
    actor_->on_stop(*this, status);
    return absl::OkStatus();
  });
  if (!stopped.ok()) {
    Logger::actors().error(
        absl::StrCat("on_stop of ", self_addr().id.to_string(), ": ", stopped.ToString()));
  }
}

namespace {

// Waits out another thread's short critical step (a delivery between its admission and its sink,
// the tail of a release). That step can itself be a fiber of this very thread, suspended on a
// contended fiber mutex inside a wake-up: yield the fiber first, so it can finish, then the thread.
template <class Busy>
void wait_out(Busy busy) {
  while (busy()) {
    boost::this_fiber::yield();
    std::this_thread::yield();
  }
}

}  // namespace

// The cell's last slice ends here: the caller returns without touching the cell.
void ActorCell::terminate(ActorState final_state, std::string error) {
  cancel_timers();  // R-SUP-3
  drop_replies();   // R-ACT-10: no reply reaches the queue after this
  stop_children("parent stopped");
  const bool failed = final_state == ActorState::kFailed;
  ActorStatus status;
  {
    absl::MutexLock lock(&mu_);
    if (failed) reason_ = std::move(error);
    if (reason_.empty()) reason_ = "stopped";
    // R-ACT-6: later sends, and the queued envelopes returned below, carry the reason.
    mailbox_->close(failed ? MailboxState::kFailed : MailboxState::kStopped, reason_);
    state_.store(final_state, std::memory_order_release);
    status = ActorStatus{final_state, reason_};
  }
  notify_watchers(status);  // R-SUP-2
  end_watches();
  run_on_stop(status);
  if (failed) report(SupervisionEvent{self_addr(), status.reason, false, 0});
  actor_.reset();
  {
    absl::MutexLock lock(&mu_);
    ended_ = true;  // wait() returns
  }
  // R-ACT-7: deliveries admitted before the close may still be pushing; wait for them (they
  // do not block), so the backlog returned below is complete and nothing wakes the cell later.
  wait_out([&] { return mailbox_->admitting(); });
  return_queued();
  wake_blocked_senders();  // R-FLOW-1: they see the actor ended and fail (R-ACT-6)
  // `scheduled_` stays true: a stray wake() can never schedule this cell again. An earlier
  // slice's release() may still be in its tail on another worker (it let this slice be
  // scheduled); it is a few stores and at most a schedule: wait for it, so the cell is
  // finished() below and the mailbox can let it go.
  wait_out([&] { return releasing_.load(std::memory_order_acquire) != 0; });
  // Held across the last write, after which a reaper may free the mailbox (and this cell).
  const std::shared_ptr<runtime::Mailbox> mailbox = weak_mailbox_.lock();
  finished_.store(true, std::memory_order_release);  // the last write: the cell may be freed
  // R-ACT-7: the tombstone keeps the mailbox alone; this cell goes now, while its lines are in
  // this core's cache, unless a handle still holds it (then it goes with the last handle). From
  // here on `this` may be gone: only locals are touched.
  if (mailbox != nullptr) mailbox->release_finished_sink();
}

void ActorCell::abandon() {
  if (finished_.load(std::memory_order_acquire)) return;  // terminate() freed it all already
  cancel_timers();
  drop_replies();
  mailbox_->close(MailboxState::kStopped, "its proc was destroyed");
  wait_out([&] { return mailbox_->admitting(); });  // as in terminate()
  actor_.reset();
  stash_.clear();
  replay_.clear();
  {
    absl::MutexLock lock(&drop_mu_);
    spared_.clear();
  }
  while (EnvelopePtr env = EnvelopePtr(pop_queue())) release_room(*env);
  wake_blocked_senders();
  finished_.store(true, std::memory_order_release);
}

void ActorCell::report(SupervisionEvent event) {
  event.parent_incarnation = parent_incarnation_;
  if (parent_) {
    // R-ACT-3: the parent hears of it as a message on its supervision port.
    auto env = MessageEnvelope::make(
        self_addr(), parent_->port(runtime::Port::handler(wire::type_hash<SupervisionEvent>())),
        wire::Any::make(std::move(event)), proc_.default_ttl());
    proc_.send(std::move(env));
    return;
  }
  if (event.restarting) return;  // logged by restart()
  Logger::actors().error(
      absl::StrCat("root actor ", self_addr().id.to_string(), " failed: ", event.error));
}

// Envelopes still queued when the actor ended go back to their senders, never vanish.
void ActorCell::return_queued() {
  const InvalidReason reason = state_.load() == ActorState::kFailed ? InvalidReason::kActorFailed
                                                                    : InvalidReason::kActorStopped;
  std::string why;  // R-ACT-6: the error (or stop reason), computed once per backlog
  receive_all();    // everything put aside goes back too, whatever the actor waited for
  while (EnvelopePtr env = next_message()) return_one(std::move(env), reason, why);
}

void ActorCell::return_one(EnvelopePtr env, InvalidReason reason, std::string& why) {
  release_room(*env);  // R-FLOW-1
  if (why.empty()) why = mailbox_->closed_detail();
  std::string target = env->dest().to_string();
  MessageEnvelope::undeliverable(
      std::move(env), DeliveryFailure::invalid_reference(std::move(target), reason, why), proc_);
}

// Bytes per idle actor (benchmarks.md): the cell is made with make_shared, so it shares one block
// with its 16-byte control block, and mimalloc (which the postal command and the benchmarks
// link) rounds that block up to a size class — 896 bytes, where 1,040 cost 1,280 before the cell
// kept only the supervision of its SpawnOptions, put its small fields together and moved the
// state of event-based requests behind a pointer (ActorCell::Requests). A new member that does
// not fit: put it where only the actors that use it pay for it.
static_assert(sizeof(ActorCell) + 16 <= 896,
              "ActorCell outgrew mimalloc's 896-byte size class (see above)");

absl::StatusOr<std::shared_ptr<ActorControl>> spawn_cell(runtime::Proc& proc, Context* parent,
                                                         runtime::Uid uid,
                                                         std::unique_ptr<Actor> actor,
                                                         const ActorType& type,
                                                         const SpawnOptions& options,
                                                         ActorMaker remake) {
  if (absl::Status s = runtime::Mailbox::validate(type.ports); !s.ok()) return s;
  auto* parent_cell = options.detached ? nullptr : static_cast<ActorCell*>(parent);
  if (absl::Status s = check_supervision(options, parent_cell != nullptr, remake != nullptr);
      !s.ok()) {
    return s;
  }
  std::optional<runtime::ActorAddr> parent_addr;
  if (parent_cell != nullptr) parent_addr = parent_cell->addr();
  auto cell = std::make_shared<ActorCell>(proc, std::move(parent_addr), std::move(actor), type,
                                          options, std::move(remake));
  auto mailbox = std::make_shared<runtime::Mailbox>(proc, proc.actor_addr(std::move(uid)),
                                                    &type.ports, cell);
  cell->bind(mailbox);
  if (absl::Status s = proc.attach(mailbox); !s.ok()) return s;
  if (parent_cell != nullptr) {
    cell->set_parent_incarnation(parent_cell->incarnation());
    parent_cell->add_child(cell);
  }
  cell->start();
  return std::shared_ptr<ActorControl>(cell, static_cast<ActorControl*>(cell.get()));
}

}  // namespace postal::actors::internal
