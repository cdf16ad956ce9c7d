// ActorCell: the runtime side of one actor — its queue, its state, its place in the scheduler.
//
// The cell is the sink of the actor's handler ports: the mailbox decodes and hands envelopes to
// `deliver`, which pushes them on an intrusive MPSC queue and makes the cell runnable once
// (`scheduled_`). A runner fiber then calls `run_slice`, which handles queued messages one at a
// time (R-ACT-2). The mailbox owns the cell, and the proc's muxer keeps the mailbox as a
// tombstone after the actor ends (R-ACT-4); the user's Actor object is freed at the end.
#include <exception>
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
  ActorCell(runtime::Proc& proc, ActorCell* parent, std::unique_ptr<Actor> actor,
            const ActorType& type)
      : proc_(proc), parent_(parent), actor_(std::move(actor)), type_(type) {}

  void bind(runtime::Mailbox* mailbox) { mailbox_ = mailbox; }
  void add_child(ActorCell* child) { children_.push_back(child); }

  // Schedules the first slice, which runs init.
  void start() {
    scheduled_.store(true, std::memory_order_release);
    proc_.scheduler().schedule(this);
  }

  // --- SendContext / Context ---
  runtime::Proc& proc() override { return proc_; }
  std::shared_ptr<runtime::Mailbox> mailbox() override { return mailbox_->shared_from_this(); }
  const runtime::ActorAddr& self_addr() const override { return mailbox_->owner(); }
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
    wake();
  }

  // --- ActorControl ---
  const runtime::ActorAddr& addr() const override { return mailbox_->owner(); }
  std::shared_ptr<runtime::Mailbox> mailbox_ptr() const override {
    return mailbox_->shared_from_this();
  }

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

  runtime::SinkInfo info() const override {
    return runtime::SinkInfo{std::string(to_string(state_.load(std::memory_order_relaxed))),
                             queued_.load(std::memory_order_relaxed)};
  }

  // --- Schedulable: one runner at a time ---
  void run_slice(size_t budget) override {
    ActorState s = state_.load(std::memory_order_acquire);
    if (is_terminal(s)) {
      return_queued();
      release();
      return;
    }
    if (s == ActorState::kCreated) {
      run_init();
      if (is_terminal(state_.load())) return;
    }
    for (size_t n = 0; n < budget; ++n) {
      MessageEnvelope* raw = queue_.pop();
      if (raw == nullptr) break;
      queued_.fetch_sub(1, std::memory_order_relaxed);
      process(EnvelopePtr(raw));
      if (is_terminal(state_.load(std::memory_order_acquire))) return;
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

  void run_init() {
    state_.store(ActorState::kInitializing, std::memory_order_release);
    absl::Status s = guarded([&] { return actor_->init(*this); });
    if (!s.ok()) {
      terminate(ActorState::kFailed, absl::StrCat("init: ", s.ToString()));
      return;
    }
    state_.store(ActorState::kIdle, std::memory_order_release);
  }

  void process(EnvelopePtr env) {
    state_.store(ActorState::kProcessing, std::memory_order_relaxed);
    current_ = env.get();
    DispatchFn fn = type_.find(env->data().type_hash());
    absl::Status s = fn == nullptr ? absl::InternalError("no handler for a bound port")
                                   : guarded([&] { return fn(*actor_, *this, env->data()); });
    current_ = nullptr;
    if (!s.ok()) {  // R-ACT-3
      terminate(ActorState::kFailed, s.ToString());
      return;
    }
    state_.store(ActorState::kIdle, std::memory_order_relaxed);
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

  void terminate(ActorState final_state, std::string error) {
    for (ActorCell* child : children_) child->stop("parent stopped");  // R-ACT-3
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
    return_queued();
    release();
  }

  void report_failure(const std::string& error) {
    if (parent_ != nullptr) {
      // R-ACT-3: the parent hears of it as a message on its supervision port.
      auto env = MessageEnvelope::make(
          self_addr(), parent_->addr().port(runtime::Port::handler(
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
  ActorCell* parent_;
  std::unique_ptr<Actor> actor_;
  const ActorType& type_;
  runtime::Mailbox* mailbox_ = nullptr;  // owns this cell
  runtime::MpscQueue queue_;
  std::atomic<bool> scheduled_{false};
  std::atomic<uint64_t> queued_{0};
  std::atomic<ActorState> state_{ActorState::kCreated};
  const MessageEnvelope* current_ = nullptr;
  std::vector<ActorCell*> children_;  // cells live as long as their mailboxes (tombstones)

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
  auto cell = std::make_shared<ActorCell>(proc, parent_cell, std::move(actor), type);
  auto mailbox = std::make_shared<runtime::Mailbox>(proc, proc.actor_addr(std::move(uid)),
                                                    &type.ports, cell);
  cell->bind(mailbox.get());
  if (absl::Status s = proc.attach(mailbox); !s.ok()) return s;
  if (parent_cell != nullptr) parent_cell->add_child(cell.get());
  cell->start();
  return std::shared_ptr<ActorControl>(cell, static_cast<ActorControl*>(cell.get()));
}

}  // namespace internal
}  // namespace postal::actors
