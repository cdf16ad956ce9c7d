#include "postal/runtime/mailbox.h"

#include "absl/strings/str_cat.h"
#include "postal/runtime/mailbox_bound.h"
#include "postal/runtime/proc.h"

namespace postal::runtime {
namespace {

InvalidReason closed_reason(MailboxState s) {
  return s == MailboxState::kFailed ? InvalidReason::kActorFailed : InvalidReason::kActorStopped;
}

}  // namespace

Mailbox::Mailbox(Proc& proc, ActorAddr owner, const HandlerTable* handlers,
                 std::shared_ptr<PortSink> handler_sink)
    : proc_(proc),
      owner_(std::move(owner)),
      handlers_(handlers),
      sink_owner_(std::move(handler_sink)),
      handler_sink_(sink_owner_.get()) {}

Mailbox::~Mailbox() { delete ephemeral_.load(std::memory_order_acquire); }

absl::Status Mailbox::validate(const HandlerTable& table) {
  for (size_t i = 0; i < table.size(); ++i) {
    for (size_t j = i + 1; j < table.size(); ++j) {
      if (table[i].type_hash == table[j].type_hash) {
        return absl::AlreadyExistsError(absl::StrCat(
            "handler port ", Port::handler(table[i].type_hash).to_string(), " for ",
            wire::TypeRegistry::global().name_of(table[i].type_hash),
            " is bound twice; bind one handler per message type"));
      }
    }
  }
  return absl::OkStatus();
}

bool Mailbox::has_handler(uint64_t type_hash) const {
  if (handlers_ == nullptr) return false;
  for (const HandlerPort& p : *handlers_) {
    if (p.type_hash == type_hash) return true;
  }
  return false;
}

uint64_t Mailbox::open_port(uint64_t type_hash, DecodeFn decode, std::weak_ptr<PortSink> sink,
                            bool once) {
  EphemeralTable* table = ephemeral_.load(std::memory_order_acquire);
  if (table == nullptr) {
    auto* fresh = new EphemeralTable();
    if (ephemeral_.compare_exchange_strong(table, fresh, std::memory_order_acq_rel)) {
      table = fresh;
    } else {
      delete fresh;
    }
  }
  absl::MutexLock lock(&table->mu);
  uint64_t index = table->next++;  // R-PORT-1: never reused
  table->ports.emplace(index, EphemeralPort{type_hash, decode, std::move(sink), once});
  return index;
}

void Mailbox::close_port(uint64_t index) {
  EphemeralTable* table = ephemeral_.load(std::memory_order_acquire);
  if (table == nullptr) return;
  absl::MutexLock lock(&table->mu);
  table->ports.erase(index);
}

void Mailbox::close_ephemeral_ports() {
  EphemeralTable* table = ephemeral_.load(std::memory_order_acquire);
  if (table == nullptr) return;
  absl::MutexLock lock(&table->mu);
  table->ports.clear();
}

PortAddr Mailbox::port_addr(Port port) const { return owner_.port(port); }

void Mailbox::set_state(MailboxState s) { state_.store(s, std::memory_order_seq_cst); }

bool Mailbox::begin_stopping(std::string_view why) {
  {
    absl::MutexLock lock(&why_mu_);
    if (stopping_why_.empty()) stopping_why_ = std::string(why);
  }
  MailboxState open = MailboxState::kOpen;
  return state_.compare_exchange_strong(open, MailboxState::kStopping, std::memory_order_seq_cst);
}

void Mailbox::close(MailboxState final_state, std::string_view why) {
  const absl::Time closed = proc_.now();
  {
    absl::MutexLock lock(&why_mu_);
    closed_why_ = std::string(why);
    closed_at_ = closed;
  }
  set_state(final_state);
  detach_handler_sink();
  proc_.tombstoned(*this, closed);  // R-ACT-7: reaped after the proc's grace period
}

std::optional<absl::Time> Mailbox::closed_at() const {
  absl::MutexLock lock(&why_mu_);
  return closed_at_;
}

bool Mailbox::reapable() const {
  const MailboxState s = state();
  if (s != MailboxState::kStopped && s != MailboxState::kFailed) return false;
  absl::MutexLock lock(&why_mu_);
  return sink_owner_ == nullptr || sink_owner_->finished();
}

std::shared_ptr<PortSink> Mailbox::handler_sink_owner() const {
  absl::MutexLock lock(&why_mu_);
  return sink_owner_;
}

bool Mailbox::release_finished_sink() {
  const MailboxState s = state();
  if (s != MailboxState::kStopped && s != MailboxState::kFailed) return false;
  std::shared_ptr<PortSink> gone;  // freed after the lock: a sink's destructor may call back
  {
    absl::MutexLock lock(&why_mu_);
    if (sink_owner_ == nullptr || !sink_owner_->finished()) return false;
    gone = std::move(sink_owner_);  // leaves sink_owner_ null
    sink_released_ = true;
  }
  return true;
}

bool Mailbox::sink_released() const {
  absl::MutexLock lock(&why_mu_);
  return sink_released_;
}

std::string Mailbox::closed_why() const {
  absl::MutexLock lock(&why_mu_);
  return closed_why_;
}

std::string Mailbox::closed_detail() const {
  const MailboxState s = state();
  absl::MutexLock lock(&why_mu_);
  switch (s) {
    case MailboxState::kOpen:
      return {};
    case MailboxState::kStopping:
      return DeliveryFailure::clip_detail(
          stopping_why_.empty() ? std::string("the actor is stopping")
                                : absl::StrCat("the actor is stopping: ", stopping_why_));
    case MailboxState::kStopped:
      // "stopped" is the default reason: do not say it twice.
      return DeliveryFailure::clip_detail(
          closed_why_.empty() || closed_why_ == "stopped"
              ? std::string("the actor stopped")
              : absl::StrCat("the actor stopped: ", closed_why_));
    case MailboxState::kFailed:
      return DeliveryFailure::clip_detail(
          closed_why_.empty() ? std::string() : absl::StrCat("the actor failed: ", closed_why_));
  }
  return {};
}

void Mailbox::detach_handler_sink() { handler_sink_.store(nullptr, std::memory_order_release); }

void Mailbox::fail(EnvelopePtr env, DeliveryFailure f, ReturnHandle& ret) {
  MessageEnvelope::undeliverable(std::move(env), std::move(f), ret);
}

void Mailbox::post_unchecked(EnvelopePtr env, ReturnHandle& ret) {
  const PortId& dest = env->dest().id;
  if (!(dest.actor == owner_.id)) {  // R-MBX-1
    std::string target = env->dest().to_string();
    fail(std::move(env),
         DeliveryFailure::invalid_reference(
             std::move(target), InvalidReason::kWrongMailboxOwner,
             absl::StrCat("mailbox belongs to ", owner_.id.to_string())),
         ret);
    return;
  }
  MailboxState state = state_.load(std::memory_order_acquire);
  if (state == MailboxState::kStopped || state == MailboxState::kFailed) {  // R-MBX-3, R-ACT-6
    std::string target = env->dest().to_string();
    if (proc_.reaped(*this)) {  // R-ACT-7: past its grace, even through a resolved reference
      fail(std::move(env),
           DeliveryFailure::invalid_reference(std::move(target), InvalidReason::kActorNotExist),
           ret);
      return;
    }
    fail(std::move(env),
         DeliveryFailure::invalid_reference(std::move(target), closed_reason(state),
                                            closed_detail()),
         ret);
    return;
  }
  switch (dest.port.kind()) {
    case Port::Kind::kHandler:
      deliver_handler(std::move(env), ret);
      return;
    case Port::Kind::kEphemeral:
      deliver_ephemeral(std::move(env), dest.port.value(), ret);
      return;
    case Port::Kind::kControl:
      break;
  }
  std::string target = env->dest().to_string();
  fail(std::move(env),
       DeliveryFailure::invalid_reference(std::move(target), InvalidReason::kHandlerNotBound,
                                          "control ports are not bound on this mailbox"),
       ret);
}

void Mailbox::deliver_handler(EnvelopePtr env, ReturnHandle& ret) {
  const uint64_t hash = env->dest().id.port.value();
  const HandlerPort* port = nullptr;
  if (handlers_ != nullptr) {
    for (const HandlerPort& p : *handlers_) {
      if (p.type_hash == hash) {
        port = &p;
        break;
      }
    }
  }
  if (port == nullptr) {  // R-MBX-2
    std::string target = env->dest().to_string();
    fail(std::move(env),
         DeliveryFailure::invalid_reference(std::move(target), InvalidReason::kHandlerNotBound,
                                            wire::TypeRegistry::global().name_of(hash)),
         ret);
    return;
  }
  if (absl::Status s = port->decode(env->data()); !s.ok()) {  // R-MBX-4
    std::string target = env->dest().to_string();
    fail(std::move(env),
         DeliveryFailure::invalid_reference(std::move(target), InvalidReason::kProtocolMismatch,
                                            std::string(s.message())),
         ret);
    return;
  }
  if (hash == wire::type_hash<UndeliverableEnvelope>()) {
    const EnvelopePtr& returned = env->data().get<UndeliverableEnvelope>()->envelope;
    if (returned && complete_failed_request(*returned)) {
      proc_.counters().add(Counter::kDelivered);
      return;
    }
  }
  std::optional<absl::Time> deadline;  // R-FLOW-1: set once a kBlock sender starts waiting
  for (;;) {
    // R-ACT-5: register the admission before reading the state, so a stopping sink either sees
    // this delivery in flight (and waits for it) or this delivery sees the mailbox stopping.
    admitting_.fetch_add(1, std::memory_order_seq_cst);
    PortSink* sink = handler_sink_.load(std::memory_order_seq_cst);
    const MailboxState now = state_.load(std::memory_order_seq_cst);
    if (sink == nullptr || now != MailboxState::kOpen) {
      admitting_.fetch_sub(1, std::memory_order_seq_cst);
      // R-ACT-5: a stopping actor refuses new handler messages.
      std::string target = env->dest().to_string();
      const bool closed = now == MailboxState::kStopped || now == MailboxState::kFailed;
      std::string why = closed_detail();  // R-ACT-6
      if (why.empty() && !closed) why = "the actor is stopping";
      fail(std::move(env),
           DeliveryFailure::invalid_reference(
               std::move(target), closed ? closed_reason(now) : InvalidReason::kActorStopped,
               std::move(why)),
           ret);
      return;
    }
    Admission admission = sink->admit(*env);  // R-FLOW-1: room is reserved, or refused
    if (admission.admitted) {
      proc_.counters().add(Counter::kDelivered);
      proc_.trace(TraceEventKind::kDelivered, *env);
      sink->deliver(std::move(env));
      admitting_.fetch_sub(1, std::memory_order_seq_cst);
      if (admission.dropped) {
        return_dropped(std::move(admission.dropped), std::move(*admission.full));
      }
      return;
    }
    // R-FLOW-1: full. A kBlock sender that may wait does so outside the admission (a stop or
    // a failure of the actor never waits for a blocked sender, R-ACT-5), then tries again; a
    // returned undeliverable never waits (it would be dropped by a full sender anyway).
    admitting_.fetch_sub(1, std::memory_order_seq_cst);
    if (admission.may_wait && env->return_undeliverable() && may_block_here(proc_.scheduler())) {
      if (!deadline) deadline = absl::Now() + admission.wait;
      // Keeps the sink alive while waiting, whatever happens to the mailbox's owner.
      std::shared_ptr<PortSink> keep = handler_sink_owner();
      if (keep != nullptr && absl::Now() < *deadline && keep->wait_for_room(*deadline)) continue;
    }
    proc_.counters().add(Counter::kOverloaded);
    fail(std::move(env), std::move(*admission.full), ret);
    return;
  }
}

// R-FLOW-1, kDropOldest: the dropped envelope goes back to its sender as Overloaded, through
// the proc (the envelope's own return handle is gone with the call that delivered it), and is
// counted.
void Mailbox::return_dropped(EnvelopePtr env, DeliveryFailure why) {
  proc_.counters().add(Counter::kDroppedOldest);
  NoBlockScope no_block;  // the return never waits for room (R-FLOW-1)
  MessageEnvelope::undeliverable(std::move(env), std::move(why), proc_);
}

void Mailbox::deliver_ephemeral(EnvelopePtr env, uint64_t index, ReturnHandle& ret) {
  EphemeralTable* table = ephemeral_.load(std::memory_order_acquire);
  std::shared_ptr<PortSink> sink;
  DeliveryFailure failure;
  bool ok = false;
  if (table == nullptr) {
    failure = DeliveryFailure::invalid_reference(env->dest().to_string(),
                                                 InvalidReason::kPortNeverAllocated);
  } else {
    absl::MutexLock lock(&table->mu);
    auto it = table->ports.find(index);
    if (index >= table->next) {
      failure = DeliveryFailure::invalid_reference(env->dest().to_string(),
                                                   InvalidReason::kPortNeverAllocated);
    } else if (it == table->ports.end() || !(sink = it->second.sink.lock())) {
      failure = DeliveryFailure::port_gone(env->dest().to_string(),
                                           wire::TypeRegistry::global().name_of(
                                               env->data().type_hash()));
      if (it != table->ports.end()) table->ports.erase(it);
    } else if (absl::Status s = it->second.decode(env->data()); !s.ok()) {
      failure = DeliveryFailure::invalid_reference(
          env->dest().to_string(), InvalidReason::kProtocolMismatch, std::string(s.message()));
    } else {
      ok = true;
      if (it->second.once) table->ports.erase(it);  // R-MBX-5
    }
  }
  if (!ok) {
    fail(std::move(env), std::move(failure), ret);
    return;
  }
  proc_.counters().add(Counter::kDelivered);
  proc_.trace(TraceEventKind::kDelivered, *env);
  sink->deliver(std::move(env));
}

bool Mailbox::complete_failed_request(const MessageEnvelope& returned) {
  std::optional<uint64_t> index = returned.headers().get(kReplyPortHeader);
  EphemeralTable* table = ephemeral_.load(std::memory_order_acquire);
  if (!index || table == nullptr || returned.delivery_failures().empty()) return false;
  std::shared_ptr<PortSink> sink;
  {
    absl::MutexLock lock(&table->mu);
    auto it = table->ports.find(*index);
    if (it == table->ports.end() || !(sink = it->second.sink.lock())) return false;
    table->ports.erase(it);
  }
  sink->fail_port(*index, *returned.root_failure());
  return true;
}

}  // namespace postal::runtime
