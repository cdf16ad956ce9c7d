// ActorType: the per-type table an actor is spawned with (actors internal).
//
// Built once per actor class from its `handled_messages`: the handler ports its mailbox binds
// (plus the built-in UndeliverableEnvelope, Down and SupervisionEvent ports) and, for each, the thunk
// that calls the right `Handler<M>::handle`.
#pragma once

#include <tuple>
#include <vector>

#include "postal/actors/actor.h"
#include "postal/runtime/mailbox.h"

namespace postal::actors {

using DispatchFn = absl::Status (*)(Actor&, Context&, wire::Any&);

struct ActorType {
  runtime::HandlerTable ports;
  std::vector<std::pair<uint64_t, DispatchFn>> dispatch;

  DispatchFn find(uint64_t hash) const {
    for (const auto& [h, fn] : dispatch) {
      if (h == hash) return fn;
    }
    return nullptr;
  }
};

template <class A>
concept ActorClass = std::is_base_of_v<Actor, A> && requires { typename A::handled_messages; };

template <class A, class M>
concept HandlesMessage = ActorClass<A> && std::is_base_of_v<Handler<M>, A>;

namespace internal {

void add_builtin_ports(ActorType& type);

template <class A, class M>
void add_port(ActorType& type) {
  type.ports.push_back({wire::type_hash<M>(), &runtime::decode_as<M>});
  type.dispatch.emplace_back(wire::type_hash<M>(), [](Actor& a, Context& cx, wire::Any& any) {
    return static_cast<Handler<M>&>(static_cast<A&>(a)).handle(cx, std::move(*any.get<M>()));
  });
}

template <class A, class... Ms>
void add_ports(ActorType& type, std::tuple<Ms...>*) {
  (add_port<A, Ms>(type), ...);
}

}  // namespace internal

template <ActorClass A>
const ActorType& actor_type() {
  static const ActorType type = [] {
    ActorType t;
    internal::add_ports<A>(t, static_cast<typename A::handled_messages*>(nullptr));
    internal::add_builtin_ports(t);
    return t;
  }();
  return type;
}

}  // namespace postal::actors
