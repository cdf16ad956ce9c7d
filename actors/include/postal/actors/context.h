// Context: what a handler can do — send as this actor, spawn children, make requests, stop.
//
// A Context is handed to every handler and hook; it is valid during that call. It is a
// runtime::SendContext, so ports and actor refs send "as" this actor: the envelope's sender is
// this actor and undeliverables come back to it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "postal/actors/actor_handle.h"
#include "postal/actors/actor_type.h"
#include "postal/runtime/send_context.h"

namespace postal::actors {

class Context : public runtime::SendContext {
 public:
  // The envelope being handled (nullptr in init / on_stop).
  virtual const runtime::MessageEnvelope* envelope() const = 0;
  virtual ActorStatus status() const = 0;

  // R-ACT-5: refuse new handler messages, finish those already queued, then stop.
  virtual void stop(std::string reason = "stopped") = 0;

  // Spawns a child named `name` (a label; the child's uid is a fresh instance with that label).
  // The child stops when this actor stops or fails; its failure reaches `on_child_failed`
  // (escalate, R-ACT-3).
  template <ActorClass A, class... Args>
  absl::StatusOr<ActorHandle<A>> spawn(std::string_view name, Args&&... args) {
    return spawn<A>(SpawnOptions{}, name, std::forward<Args>(args)...);
  }
  // The same with a supervision strategy (R-SUP-1) or detached (supervision.h).
  template <ActorClass A, class... Args>
  absl::StatusOr<ActorHandle<A>> spawn(const SpawnOptions& options, std::string_view name,
                                       Args&&... args) {
    absl::StatusOr<runtime::Label> label = runtime::Label::parse(name);
    if (!label.ok()) return label.status();
    absl::StatusOr<std::shared_ptr<ActorControl>> control = internal::spawn_as<A>(
        proc(), this, runtime::Uid::random(*label), options, std::forward<Args>(args)...);
    if (!control.ok()) return control.status();
    return ActorHandle<A>(*std::move(control));
  }

  // The ActorRef of this actor, typed as A (A must be this actor's class).
  template <ActorClass A>
  ActorRef<A> self() {
    return ActorRef<A>(self_addr(), mailbox());
  }
};

}  // namespace postal::actors
