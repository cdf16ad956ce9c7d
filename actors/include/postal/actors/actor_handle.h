// ActorHandle<A>: the spawner's handle on an actor — its typed ref plus lifecycle control.
//
// Dropping a handle does not stop the actor. `stop()` drains (R-ACT-5); `wait()` blocks the
// calling fiber until the actor is Stopped or Failed — and its `on_stop` has run and the actor
// object is destroyed, so what they touch is the caller's again — or the timeout passes.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <type_traits>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/actors/actor_ref.h"
#include "postal/actors/actor_status.h"
#include "postal/actors/supervision.h"
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

// Re-creates an actor from its spawn arguments (R-SUP-1).
using ActorMaker = std::function<std::unique_ptr<Actor>()>;

namespace internal {
// Creates the actor's cell and mailbox, attaches it to `proc` and schedules its init. `remake`
// re-creates the actor for a restart; a restart policy without it is refused.
absl::StatusOr<std::shared_ptr<ActorControl>> spawn_cell(runtime::Proc& proc, Context* parent,
                                                         runtime::Uid uid,
                                                         std::unique_ptr<Actor> actor,
                                                         const ActorType& type,
                                                         const SpawnOptions& options = {},
                                                         ActorMaker remake = {});
// InvalidArgument when `options` cannot be honoured (see supervision.h).
absl::Status check_supervision(const SpawnOptions& options, bool has_parent, bool can_remake);

// The first incarnation and, under a restart policy when the arguments can be copied, the maker
// of the next ones (without a restart policy nothing is kept: spawning stays one construction).
template <class A, class... Args>
std::pair<std::unique_ptr<Actor>, ActorMaker> make_actor(const SpawnOptions& options,
                                                         Args&&... args) {
  if constexpr ((std::is_copy_constructible_v<std::decay_t<Args>> && ...)) {
    if (options.supervision.restarts()) {
      ActorMaker remake = [... kept = std::forward<Args>(args)]() -> std::unique_ptr<Actor> {
        return std::make_unique<A>(kept...);
      };
      std::unique_ptr<Actor> first = remake();
      return {std::move(first), std::move(remake)};
    }
  }
  return {std::make_unique<A>(std::forward<Args>(args)...), ActorMaker()};
}

template <class A, class... Args>
absl::StatusOr<std::shared_ptr<ActorControl>> spawn_as(runtime::Proc& proc, Context* parent,
                                                       runtime::Uid uid,
                                                       const SpawnOptions& options,
                                                       Args&&... args) {
  auto [actor, remake] = make_actor<A>(options, std::forward<Args>(args)...);
  return spawn_cell(proc, parent, std::move(uid), std::move(actor), actor_type<A>(), options,
                    std::move(remake));
}
}  // namespace internal

// Unconstrained for the same reason as ActorRef (an actor may keep a handle of its own class);
// handles are made by `spawn`, which requires an ActorClass.
template <class A>
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
// With `options`, a root actor may restart one-for-one (R-SUP-1); past its limit it fails and
// the failure is logged, as any root actor's.
template <ActorClass A, class... Args>
absl::StatusOr<ActorHandle<A>> spawn(runtime::Proc& proc, const SpawnOptions& options,
                                     std::string_view name, Args&&... args) {
  absl::StatusOr<runtime::Label> label = runtime::Label::parse(name);
  if (!label.ok()) return label.status();
  absl::StatusOr<std::shared_ptr<ActorControl>> control = internal::spawn_as<A>(
      proc, nullptr, runtime::Uid::singleton(*label), options, std::forward<Args>(args)...);
  if (!control.ok()) return control.status();
  return ActorHandle<A>(*std::move(control));
}

template <ActorClass A, class... Args>
absl::StatusOr<ActorHandle<A>> spawn(runtime::Proc& proc, std::string_view name, Args&&... args) {
  return spawn<A>(proc, SpawnOptions{}, name, std::forward<Args>(args)...);
}

}  // namespace postal::actors
