// ActorCell's event-based requests (R-ACT-10, pending_request.h). A reply port's sink forwards
// the reply — or a ReplyFailed for a bounced request or a timeout — into the actor's own queue,
// so its continuation runs on the actor like a handler. The first outcome wins; the port is
// closed then, so a later reply gets PortGone. The sink reaches the cell through a pointer the
// cell clears (under the sink's lock) before it restarts or ends, so nothing is pushed into a
// cell that no longer expects it.
#include "absl/strings/str_cat.h"
#include "actor_cell.h"

namespace postal::actors::internal {

using runtime::EnvelopePtr;
using runtime::MessageEnvelope;

class ReplySink final : public runtime::PortSink {
 public:
  explicit ReplySink(ActorCell* cell) : cell_(cell) {}
  // Set once the port is open, before the request is sent (nothing can fail before that).
  void set_port(runtime::PortAddr port) {
    absl::MutexLock lock(&mu_);
    port_ = std::move(port);
  }

  void deliver(EnvelopePtr env) override {
    absl::MutexLock lock(&mu_);
    if (cell_ != nullptr) cell_->deliver(std::move(env));
  }
  // A bounced request (Mailbox::complete_failed_request).
  void fail(const runtime::DeliveryFailure& failure) override {
    fail_with(absl::UnavailableError(failure.to_string()));
  }
  void fail_with(const absl::Status& status) {
    runtime::PortAddr port;
    {
      absl::MutexLock lock(&mu_);
      port = port_;
    }
    deliver(MessageEnvelope::make(port.actor_addr(), port,
                                  wire::Any::make(ReplyFailed{static_cast<int>(status.code()),
                                                              std::string(status.message())}),
                                  1));
  }
  void detach() {
    absl::MutexLock lock(&mu_);
    cell_ = nullptr;
  }

 private:
  absl::Mutex mu_;
  ActorCell* cell_ ABSL_GUARDED_BY(mu_);
  runtime::PortAddr port_ ABSL_GUARDED_BY(mu_);
};

runtime::PortAddr ActorCell::open_reply(uint64_t type_hash, runtime::DecodeFn decode,
                                        absl::Duration timeout, ReplyContinuation cont,
                                        uint64_t* index) {
  auto sink = std::make_shared<ReplySink>(this);
  *index = mailbox_->open_port(type_hash, decode, sink, /*once=*/true);
  runtime::PortAddr addr = mailbox_->port_addr(runtime::Port::ephemeral(*index));
  sink->set_port(addr);
  PendingReply& pending = replies_[*index];
  pending.cont = std::move(cont);
  pending.sink = sink;
  std::weak_ptr<ReplySink> weak = sink;
  pending.timer = proc_.timers().schedule(proc_.now() + timeout, [weak, timeout] {
    if (std::shared_ptr<ReplySink> s = weak.lock()) {
      s->fail_with(absl::DeadlineExceededError(
          absl::StrCat("no reply within ", absl::FormatDuration(timeout))));
    }
  });
  return addr;
}

bool ActorCell::complete_reply(EnvelopePtr env) {
  const uint64_t index = env->dest().id.port.value();
  auto it = replies_.find(index);
  if (it == replies_.end()) return true;  // an outcome after the first: nothing waits for it
  PendingReply pending = std::move(it->second);
  replies_.erase(it);
  proc_.timers().cancel(pending.timer);
  pending.sink->detach();
  mailbox_->close_port(index);  // a reply after a timeout gets PortGone
  current_ = env.get();
  absl::Status s = guarded([&] {
    if (const ReplyFailed* f = env->data().get<ReplyFailed>()) {
      return pending.cont(*this, nullptr,
                          absl::Status(static_cast<absl::StatusCode>(f->code), f->message));
    }
    return pending.cont(*this, &env->data(), absl::OkStatus());
  });
  current_ = nullptr;
  if (!s.ok()) return on_failure(s.ToString());
  return true;
}

void ActorCell::drop_replies() {
  for (auto& [index, pending] : replies_) {
    proc_.timers().cancel(pending.timer);
    pending.sink->detach();
    mailbox_->close_port(index);
  }
  replies_.clear();
}

}  // namespace postal::actors::internal
