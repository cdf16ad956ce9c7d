#include "postal/actors/actor.h"

#include "absl/strings/str_cat.h"
#include "postal/wire/absl_compat.h"
#include "postal/actors/actor_type.h"
#include "postal/actors/context.h"

namespace postal::actors {

using runtime::DeliveryFailure;
using runtime::FailureKind;
using runtime::MessageEnvelope;
using runtime::TransportReason;

std::string_view to_string(ActorState state) {
  switch (state) {
    case ActorState::kCreated: return "created";
    case ActorState::kInitializing: return "initializing";
    case ActorState::kIdle: return "idle";
    case ActorState::kProcessing: return "processing";
    case ActorState::kRestarting: return "restarting";
    case ActorState::kStopping: return "stopping";
    case ActorState::kStopped: return "stopped";
    case ActorState::kFailed: return "failed";
  }
  return "unknown";
}

std::string ActorStatus::to_string() const {
  if (reason.empty()) return std::string(actors::to_string(state));
  return absl::StrCat(sv(actors::to_string(state)), "(", reason, ")");
}

namespace {

absl::Status fail_with(const MessageEnvelope& env) {
  const DeliveryFailure* root = env.root_failure();
  return absl::AbortedError(
      absl::StrCat("undeliverable message: ", root ? root->to_string() : "no failure recorded"));
}

}  // namespace

absl::Status Actor::handle_undeliverable(Context& cx, const MessageEnvelope& env) {
  const DeliveryFailure* root = env.root_failure();  // R-FAIL-2: policy reads the root
  if (root == nullptr) return absl::OkStatus();
  switch (root->kind) {
    case FailureKind::kInvalidReference: return on_invalid_reference(cx, env);
    case FailureKind::kExpired: return on_expired(cx, env);
    case FailureKind::kPortGone: return on_port_gone(cx, env);
    case FailureKind::kTransport:
      if (root->transport == TransportReason::kOversizedFrame) return on_oversized_frame(cx, env);
      return on_transport_failure(cx, env);
  }
  return absl::OkStatus();
}

absl::Status Actor::on_invalid_reference(Context&, const MessageEnvelope& env) {
  return fail_with(env);
}
absl::Status Actor::on_expired(Context&, const MessageEnvelope& env) { return fail_with(env); }
absl::Status Actor::on_oversized_frame(Context&, const MessageEnvelope& env) {
  return fail_with(env);
}
absl::Status Actor::on_transport_failure(Context&, const MessageEnvelope&) {
  return absl::OkStatus();
}
absl::Status Actor::on_port_gone(Context&, const MessageEnvelope&) { return absl::OkStatus(); }

absl::Status Actor::on_child_failed(Context&, const SupervisionEvent& event) {
  return absl::AbortedError(
      absl::StrCat("child ", event.child.id.to_string(), " failed: ", event.error));
}

namespace internal {

void add_builtin_ports(ActorType& type) {
  using runtime::UndeliverableEnvelope;
  type.ports.push_back(
      {wire::type_hash<UndeliverableEnvelope>(), &runtime::decode_as<UndeliverableEnvelope>});
  type.dispatch.emplace_back(
      wire::type_hash<UndeliverableEnvelope>(), [](Actor& a, Context& cx, wire::Any& any) {
        const auto& returned = any.get<UndeliverableEnvelope>()->envelope;
        if (!returned) return absl::OkStatus();
        return a.handle_undeliverable(cx, *returned);
      });
  type.ports.push_back({wire::type_hash<Down>(), &runtime::decode_as<Down>});
  type.dispatch.emplace_back(wire::type_hash<Down>(), [](Actor& a, Context& cx, wire::Any& any) {
    return a.on_down(cx, *any.get<Down>());
  });
  type.ports.push_back({wire::type_hash<SupervisionEvent>(), &runtime::decode_as<SupervisionEvent>});
  type.dispatch.emplace_back(wire::type_hash<SupervisionEvent>(),
                             [](Actor& a, Context& cx, wire::Any& any) {
                               const SupervisionEvent& event = *any.get<SupervisionEvent>();
                               return event.restarting ? a.on_child_restarted(cx, event)
                                                       : a.on_child_failed(cx, event);
                             });
}

}  // namespace internal
}  // namespace postal::actors
