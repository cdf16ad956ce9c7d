// ActorHandle<A>: the spawner's handle on an actor — its typed ref plus lifecycle control.
//
// Dropping a handle does not stop the actor. `stop()` drains (R-ACT-5); `wait()` blocks the
// calling fiber until the actor is Stopped or Failed, or the timeout passes.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/actors/actor_ref.h"
#include "postal/actors/actor_status.h"
#include "postal/runtime/proc.h"

namespace postal::actors {

class Context;

class ActorControl {
 public:
  virtual ~ActorControl() = default;
  virtual const runtime::ActorAddr& addr() const = 0;
  virtual std::shared_ptr<runtime::Mailbox> mailbox_ptr() const = 0;
  virtual ActorStatus status() const = 0;
  virtual void stop(std::string reason) = 0;
  virtual absl::StatusOr<ActorStatus> wait(absl::Duration timeout) = 0;
};

namespace internal {
// Creates the actor's cell and mailbox, attaches it to `proc` and schedules its init.
absl::StatusOr<std::shared_ptr<ActorControl>> spawn_cell(runtime::Proc& proc, Context* parent,
                                                         runtime::Uid uid,
                                                         std::unique_ptr<Actor> actor,
                                                         const ActorType& type);
}  // namespace internal

template <ActorClass A>
class ActorHandle {
 public:
  ActorHandle() = default;  // empty until assigned; only `valid()` may be called
  explicit ActorHandle(std::shared_ptr<ActorControl> control)
      : control_(std::move(control)), ref_(control_->addr(), control_->mailbox_ptr()) {}

  bool valid() const { return control_ != nullptr; }
  const ActorRef<A>& ref() const { return ref_; }
  const runtime::ActorAddr& addr() const { return control_->addr(); }
  ActorStatus status() const { return control_->status(); }
  void stop(std::string reason = "stopped") const { control_->stop(std::move(reason)); }
  absl::StatusOr<ActorStatus> wait(absl::Duration timeout) const { return control_->wait(timeout); }

 private:
  std::shared_ptr<ActorControl> control_;
  ActorRef<A> ref_;
};

// Spawns a root actor named `name` on `proc` (a singleton uid: the name is unique per proc).
template <ActorClass A, class... Args>
absl::StatusOr<ActorHandle<A>> spawn(runtime::Proc& proc, std::string_view name, Args&&... args) {
  absl::StatusOr<runtime::Label> label = runtime::Label::parse(name);
  if (!label.ok()) return label.status();
  absl::StatusOr<std::shared_ptr<ActorControl>> control =
      internal::spawn_cell(proc, nullptr, runtime::Uid::singleton(*label),
                           std::make_unique<A>(std::forward<Args>(args)...), actor_type<A>());
  if (!control.ok()) return control.status();
  return ActorHandle<A>(*std::move(control));
}

}  // namespace postal::actors
