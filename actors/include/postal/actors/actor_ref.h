// ActorRef<A>: a typed, serializable reference to an actor of class A.
//
// `send(cx, m)` posts `m` to A's handler port for M; only message types A handles compile.
// `try_send(cx, m)` (R-FAIL-6) reports a local refusal (the actor does not exist, stopped or
// failed, …) as its absl::Status instead of returning the envelope later (runtime/port.h).
// `port<M>()` gives the PortRef to hand to others. A reference made in the actor's own process
// carries the resolved mailbox, so local sends skip the muxer lookup.
//
// The class template itself is unconstrained, so an actor may hold an `ActorRef` to its own
// class (a member of `A` names `ActorRef<A>` while `A` is still incomplete); what `A` handles is
// checked where a message is sent, when `A` is complete. (Constraining the class made GCC check
// `ActorClass<A>` on the incomplete type — an error — and cache the failure, so later, unrelated
// uses of `ActorRef<A>` in the same file broke far from the cause.)
#pragma once

#include <memory>

#include "postal/actors/actor_type.h"
#include "postal/runtime/port.h"

namespace postal::actors {

template <class A>
class ActorRef {
 public:
  ActorRef() = default;
  explicit ActorRef(runtime::ActorAddr addr, std::shared_ptr<runtime::Mailbox> local = nullptr)
      : addr_(std::move(addr)), local_(std::move(local)) {}

  const runtime::ActorAddr& addr() const { return addr_; }

  template <wire::RegisteredMessage M>
    requires HandlesMessage<A, M>
  runtime::PortRef<M> port() const {
    return runtime::PortRef<M>(addr_.port(runtime::Port::handler(wire::type_hash<M>())), local_);
  }

  template <wire::RegisteredMessage M>
    requires HandlesMessage<A, M>
  void send(runtime::SendContext& cx, M message, wire::Headers headers = {}) const {
    cx.proc().send(envelope(cx, std::move(message), std::move(headers)), local_.get());
  }

  template <wire::RegisteredMessage M>
    requires HandlesMessage<A, M>
  absl::Status try_send(runtime::SendContext& cx, M message, wire::Headers headers = {}) const {
    return cx.proc().try_post(envelope(cx, std::move(message), std::move(headers)), local_.get());
  }

  // Request/reply (see runtime::request).
  template <wire::RegisteredMessage M>
    requires HandlesMessage<A, M>
  absl::StatusOr<typename M::Reply> request(runtime::SendContext& cx, M message,
                                            absl::Duration timeout) const {
    return runtime::request(cx, port<M>(), std::move(message), timeout);
  }

  bool operator==(const ActorRef& o) const { return addr_ == o.addr_; }

  template <class Archive>
  void save(Archive& ar) const {
    ar(addr_);
  }
  template <class Archive>
  void load(Archive& ar) {
    ar(addr_);
    local_.reset();
  }

 private:
  template <class M>
  runtime::EnvelopePtr envelope(runtime::SendContext& cx, M message, wire::Headers headers) const {
    auto env = runtime::MessageEnvelope::make(
        cx.self_addr(), addr_.port(runtime::Port::handler(wire::type_hash<M>())),
        wire::Any::make(std::move(message)), cx.proc().default_ttl());
    if (!headers.empty()) env->headers() = std::move(headers);
    return env;
  }

  runtime::ActorAddr addr_;
  std::shared_ptr<runtime::Mailbox> local_;
};

}  // namespace postal::actors
