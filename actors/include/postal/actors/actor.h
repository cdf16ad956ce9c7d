// Actor and Handler<M>: what users write.
//
//   struct Counter : postal::actors::Actor, postal::actors::Handles<Add, Get> {
//     int total = 0;
//     absl::Status handle(Context& cx, Add m) override { total += m.n; return absl::OkStatus(); }
//     absl::Status handle(Context& cx, Get m) override { m.reply_to.send(cx, total); return ...; }
//   };
//
// `Handles<Ms...>` binds one handler port per message type when the actor is spawned (R-PORT-2).
// An actor handles one message at a time (R-ACT-2). A handler that returns an error, or lets an
// exception escape, fails the actor (R-ACT-3).
//
// Every actor also has a handler port for returned envelopes (`UndeliverableEnvelope`). The
// default policy (R-FAIL-5) reads the root failure: InvalidReference, Expired and
// Transport(OversizedFrame) fail the actor; other transport failures and PortGone are absorbed.
// Each class has a hook to override. Child failures arrive at `on_child_failed`, which by default
// fails this actor in turn.
#pragma once

#include <tuple>

#include "absl/status/status.h"
#include "postal/actors/actor_status.h"
#include "postal/actors/down.h"
#include "postal/actors/supervision_event.h"
#include "postal/runtime/message_envelope.h"

namespace postal::actors {

class Context;

template <wire::RegisteredMessage M>
class Handler {
 public:
  virtual ~Handler() = default;
  virtual absl::Status handle(Context& cx, M message) = 0;
};

template <wire::RegisteredMessage... Ms>
class Handles : public Handler<Ms>... {
 public:
  using handled_messages = std::tuple<Ms...>;
};

class Actor {
 public:
  virtual ~Actor() = default;

  // Runs once before the first message; an error fails the actor.
  virtual absl::Status init(Context&) { return absl::OkStatus(); }
  // Runs once when the actor reaches Stopped or Failed, or — supervised with a restart policy —
  // when this incarnation failed and is about to be replaced (R-SUP-1).
  virtual void on_stop(Context&, const ActorStatus&) {}

  // R-FAIL-5: dispatches on the root failure to the hooks below.
  virtual absl::Status handle_undeliverable(Context& cx, const runtime::MessageEnvelope& env);
  virtual absl::Status on_invalid_reference(Context& cx, const runtime::MessageEnvelope& env);
  virtual absl::Status on_expired(Context& cx, const runtime::MessageEnvelope& env);
  virtual absl::Status on_oversized_frame(Context& cx, const runtime::MessageEnvelope& env);
  virtual absl::Status on_transport_failure(Context& cx, const runtime::MessageEnvelope& env);
  virtual absl::Status on_port_gone(Context& cx, const runtime::MessageEnvelope& env);

  // R-ACT-3: a child failed. The default fails this actor too.
  virtual absl::Status on_child_failed(Context& cx, const SupervisionEvent& event);
  // R-SUP-2: an actor this one watches stopped or failed (see down.h). The default does nothing.
  virtual absl::Status on_down(Context&, const Down&) { return absl::OkStatus(); }

  // R-SUP-1: a child supervised with a restart policy failed and is being restarted (its
  // strategy decided it; nothing to do). The default does nothing.
  virtual absl::Status on_child_restarted(Context&, const SupervisionEvent&) {
    return absl::OkStatus();
  }
};

}  // namespace postal::actors
