// ActorCell: the runtime side of one actor — its queue, its state, its place in the scheduler.
//
// The cell is the sink of the actor's handler ports: the mailbox decodes and hands envelopes to
// `deliver`, which pushes them on an intrusive MPSC queue and makes the cell runnable once
// (`scheduled_`). A runner fiber then calls `run_slice`, which handles queued messages one at a
// time (R-ACT-2). The mailbox owns the cell, and the proc's muxer keeps the mailbox as a
// tombstone after the actor ends (R-ACT-4) until it is reaped (R-ACT-7); the user's Actor object
// is freed at the end.
//
// Lifetime (R-ACT-7): a reaped mailbox — and with it the cell — may be freed as soon as the cell
// says it is `finished()`. So the slice that terminates the cell is its last: after it nothing
// schedules the cell again (`scheduled_` stays true, deliveries are refused by the closed
// mailbox and the ones in flight are waited for), `finished_` is its very last write, and no
// pointer to a cell outlives it unowned (children are weak, the parent is an address).
#include <algorithm>
#include <exception>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "postal/wire/absl_compat.h"
#include "absl/synchronization/mutex.h"
#include "postal/actors/context.h"
#include "postal/runtime/logger.h"
#include "postal/runtime/mpsc_queue.h"

namespace postal::actors {
namespace {

using runtime::DeliveryFailure;
using runtime::EnvelopePtr;
using runtime::Logger;
using runtime::InvalidReason;
using runtime::MailboxState;
using runtime::MessageEnvelope;

class ActorCell final : public Context,
                        public runtime::Schedulable,
                        public runtime::PortSink,
                        public ActorControl {
 public:
  ActorCell(runtime::Proc& proc, std::optional<runtime::ActorAddr> parent,
            std::unique_ptr<Actor> actor, const ActorType& type)
      : proc_(proc), parent_(std::move(parent)), actor_(std::move(actor)), type_(type) {}

  void bind(const std::shared_ptr<runtime::Mailbox>& mailbox) {
    mailbox_ = mailbox.get();
    weak_mailbox_ = mailbox;
    addr_ = mailbox->owner();
  }
  // Runs on this actor's runner (its handler or init). Dead children are pruned as the list
  // doubles, so a long-lived parent of short-lived children stays small (R-ACT-7).
  void add_child(const std::shared_ptr<ActorCell>& child) {
    if (children_.size() >= prune_at_) {
      std::erase_if(children_, [](const std::weak_ptr<ActorCell>& c) { return c.expired(); });
      prune_at_ = std::max<size_t>(64, 2 * children_.size());
    }
    children_.push_back(child);
  }

  // Schedules the first slice, which runs init.
  void start() {
    scheduled_.store(true, std::memory_order_release);
    proc_.scheduler().schedule(this);
  }

  // --- SendContext / Context ---
  runtime::Proc& proc() override { return proc_; }
  std::shared_ptr<runtime::Mailbox> mailbox() override { return mailbox_->shared_from_this(); }
  const runtime::ActorAddr& self_addr() const override { return addr_; }
  const MessageEnvelope* envelope() const override { return current_; }

  ActorStatus status() const override {
    absl::MutexLock lock(&mu_);
    return ActorStatus{state_.load(std::memory_order_acquire), reason_};
  }

  void stop(std::string reason) override {
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
    // Never schedules a cell that ran its last slice (R-ACT-7): terminating leaves `scheduled_`
    // set for good, so this finds it set and does nothing.
    wake();
  }

  // --- ActorControl ---
  const runtime::ActorAddr& addr() const override { return addr_; }
  // Null once the tombstone was reaped and nobody else holds the mailbox (R-ACT-7).
  std::shared_ptr<runtime::Mailbox> mailbox_ptr() const override { return weak_mailbox_.lock(); }

  absl::StatusOr<ActorStatus> wait(absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    auto done = [this] { return is_terminal(state_.load(std::memory_order_acquire)); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat("actor ", addr().id.to_string(), " still ",
                       sv(to_string(state_.load())), " after ", absl::FormatDuration(timeout)));
    }
    return ActorStatus{state_.load(), reason_};
  }

  // --- PortSink: any thread ---
  void deliver(EnvelopePtr env) override {
    queued_.fetch_add(1, std::memory_order_relaxed);
    queue_.push(env.release());
    wake();
  }

  // R-ACT-7: the last slice has ended; the cell may be freed.
  bool finished() const override { return finished_.load(std::memory_order_acquire); }

  runtime::SinkInfo info() const override {
    return runtime::SinkInfo{std::string(to_string(state_.load(std::memory_order_relaxed))),
                             queued_.load(std::memory_order_relaxed)};
  }

  // --- Schedulable: one runner at a time ---
  // After a call that terminated the cell, nothing here touches it again (R-ACT-7).
  void run_slice(size_t budget) override {
    ActorState s = state_.load(std::memory_order_acquire);
    if (is_terminal(s)) return;  // not reached: a terminated cell is never scheduled again
    if (s == ActorState::kCreated) {
      if (!run_init()) return;
    }
    for (size_t n = 0; n < budget; ++n) {
      MessageEnvelope* raw = queue_.pop();
      if (raw == nullptr) break;
      queued_.fetch_sub(1, std::memory_order_relaxed);
      if (!process(EnvelopePtr(raw))) return;
    }
    // R-ACT-5: finish stopping only when no delivery is between its admission and this queue
    // (checked before the queue: a delivery leaves `admitting` after its push). Otherwise
    // release() makes the cell runnable again and the next slice handles what was admitted.
    if (stop_requested() && !mailbox_->admitting() && !queue_.maybe_nonempty()) {
      terminate(ActorState::kStopped, {});
      return;
    }
    release();
  }

 private:
  bool stop_requested() const { return stop_requested_.load(std::memory_order_acquire); }

  // Makes the cell runnable unless it already is.
  void wake() {
    if (!scheduled_.exchange(true, std::memory_order_acq_rel)) proc_.scheduler().schedule(this);
  }

  // Ends a slice: runnable again only if work arrived meanwhile.
  void release() {
    if (queue_.maybe_nonempty()) {
      proc_.scheduler().schedule(this);
      return;
    }
    scheduled_.store(false, std::memory_order_seq_cst);
    if (queue_.maybe_nonempty() || (stop_requested() && !is_terminal(state_.load()))) wake();
  }

  // False when init failed and the cell terminated.
  bool run_init() {
    state_.store(ActorState::kInitializing, std::memory_order_release);
    absl::Status s = guarded([&] { return actor_->init(*this); });
    if (!s.ok()) {
      terminate(ActorState::kFailed, absl::StrCat("init: ", s.ToString()));
      return false;
    }
    state_.store(ActorState::kIdle, std::memory_order_release);
    return true;
  }

  // False when the handler failed and the cell terminated.
  bool process(EnvelopePtr env) {
    state_.store(ActorState::kProcessing, std::memory_order_relaxed);
    current_ = env.get();
    DispatchFn fn = type_.find(env->data().type_hash());
    absl::Status s = fn == nullptr ? absl::InternalError("no handler for a bound port")
                                   : guarded([&] { return fn(*actor_, *this, env->data()); });
    current_ = nullptr;
    if (!s.ok()) {  // R-ACT-3
      terminate(ActorState::kFailed, s.ToString());
      return false;
    }
    state_.store(ActorState::kIdle, std::memory_order_relaxed);
    return true;
  }

  template <class F>
  static absl::Status guarded(F&& f) {
    try {
      return f();
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("exception escaped a handler: ", e.what()));
    } catch (...) {
      return absl::InternalError("exception of unknown type escaped a handler");
    }
  }

  // The cell's last slice ends here: the caller returns without touching the cell.
  void terminate(ActorState final_state, std::string error) {
    for (const std::weak_ptr<ActorCell>& weak : children_) {  // R-ACT-3
      if (std::shared_ptr<ActorCell> child = weak.lock()) child->stop("parent stopped");
    }
    children_.clear();
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
    absl::Status stopped = guarded([&] {
      actor_->on_stop(*this, status);
      return absl::OkStatus();
    });
    if (!stopped.ok()) {
      Logger::actors().error(
          absl::StrCat("on_stop of ", self_addr().id.to_string(), ": ", stopped.ToString()));
    }
    if (failed) report_failure(status.reason);
    actor_.reset();
    // R-ACT-7: deliveries admitted before the close may still be pushing; wait for them (they
    // do not block), so the backlog returned below is complete and nothing wakes the cell later.
    while (mailbox_->admitting()) std::this_thread::yield();
    return_queued();
    // `scheduled_` stays true: a stray wake() can never schedule this cell again.
    finished_.store(true, std::memory_order_release);  // the last write: the cell may be freed
  }

  void report_failure(const std::string& error) {
    if (parent_) {
      // R-ACT-3: the parent hears of it as a message on its supervision port.
      auto env = MessageEnvelope::make(
          self_addr(), parent_->port(runtime::Port::handler(
                           wire::type_hash<SupervisionEvent>())),
          wire::Any::make(SupervisionEvent{self_addr(), error}), proc_.default_ttl());
      proc_.send(std::move(env));
      return;
    }
    Logger::actors().error(
        absl::StrCat("root actor ", self_addr().id.to_string(), " failed: ", error));
  }

  // Envelopes still queued when the actor ended go back to their senders, never vanish.
  void return_queued() {
    const InvalidReason reason = state_.load() == ActorState::kFailed
                                     ? InvalidReason::kActorFailed
                                     : InvalidReason::kActorStopped;
    std::string why;  // R-ACT-6: the error (or stop reason), computed once per backlog
    while (MessageEnvelope* raw = queue_.pop()) {
      queued_.fetch_sub(1, std::memory_order_relaxed);
      if (why.empty()) why = mailbox_->closed_detail();
      EnvelopePtr env(raw);
      std::string target = env->dest().to_string();
      MessageEnvelope::undeliverable(
          std::move(env), DeliveryFailure::invalid_reference(std::move(target), reason, why),
          proc_);
    }
  }

  runtime::Proc& proc_;
  std::optional<runtime::ActorAddr> parent_;  // where SupervisionEvents go (R-ACT-3)
  std::unique_ptr<Actor> actor_;
  const ActorType& type_;
  runtime::Mailbox* mailbox_ = nullptr;  // owns this cell
  std::weak_ptr<runtime::Mailbox> weak_mailbox_;
  runtime::ActorAddr addr_;
  runtime::MpscQueue queue_;
  std::atomic<bool> scheduled_{false};
  std::atomic<uint64_t> queued_{0};
  std::atomic<ActorState> state_{ActorState::kCreated};
  const MessageEnvelope* current_ = nullptr;
  std::vector<std::weak_ptr<ActorCell>> children_;  // a reaped child is simply gone (R-ACT-7)
  size_t prune_at_ = 64;
  std::atomic<bool> finished_{false};

  mutable absl::Mutex mu_;
  std::atomic<bool> stop_requested_{false};
  std::string reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

namespace internal {

absl::StatusOr<std::shared_ptr<ActorControl>> spawn_cell(runtime::Proc& proc, Context* parent,
                                                         runtime::Uid uid,
                                                         std::unique_ptr<Actor> actor,
                                                         const ActorType& type) {
  if (absl::Status s = runtime::Mailbox::validate(type.ports); !s.ok()) return s;
  auto* parent_cell = static_cast<ActorCell*>(parent);
  std::optional<runtime::ActorAddr> parent_addr;
  if (parent_cell != nullptr) parent_addr = parent_cell->addr();
  auto cell = std::make_shared<ActorCell>(proc, std::move(parent_addr), std::move(actor), type);
  auto mailbox = std::make_shared<runtime::Mailbox>(proc, proc.actor_addr(std::move(uid)),
                                                    &type.ports, cell);
  cell->bind(mailbox);
  if (absl::Status s = proc.attach(mailbox); !s.ok()) return s;
  if (parent_cell != nullptr) parent_cell->add_child(cell);
  cell->start();
  return std::shared_ptr<ActorControl>(cell, static_cast<ActorControl*>(cell.get()));
}

}  // namespace internal
}  // namespace postal::actors
