// ActorRegistry: actor classes by registered type name, for spawning by name (remote spawn,
// topology files).
//
//   class Pinger : public postal::Actor, public postal::Handles<Ball> {
//    public:
//     static absl::StatusOr<std::unique_ptr<Pinger>> create(const postal::actors::SpawnParams& p);
//     ...
//   };
//   POSTAL_ACTOR(Pinger, "demo.Pinger");
//
// Parameters are a flat map of typed attributes (wire::Headers: bool, int64, uint64, double,
// string) so that topology files and remote callers can fill them without knowing the class;
// `create` validates them and says what is wrong. Like the type registry, this is a documented
// process-wide table, filled at static-initialization time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "postal/actors/actor_handle.h"
#include "postal/wire/headers.h"

namespace postal::actors {

using SpawnParams = wire::Headers;

// Creates and starts an actor of one class on `proc` (parent may be null) under `uid`.
using ActorFactory = std::function<absl::StatusOr<std::shared_ptr<ActorControl>>(
    runtime::Proc& proc, Context* parent, runtime::Uid uid, const SpawnParams& params)>;

class ActorRegistry {
 public:
  static ActorRegistry& global();

  bool add(std::string_view type_name, ActorFactory factory);
  // The factory for `type_name`; NotFound lists the registered names.
  absl::StatusOr<ActorFactory> find(std::string_view type_name) const;
  std::vector<std::string> names() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, ActorFactory> factories_ ABSL_GUARDED_BY(mu_);
};

// Spawns a registered actor class by name as a root actor named `name` (a singleton uid).
absl::StatusOr<std::shared_ptr<ActorControl>> spawn_by_type(runtime::Proc& proc,
                                                            std::string_view type_name,
                                                            std::string_view name,
                                                            const SpawnParams& params);

template <ActorClass A>
ActorFactory factory_for() {
  return [](runtime::Proc& proc, Context* parent, runtime::Uid uid,
            const SpawnParams& params) -> absl::StatusOr<std::shared_ptr<ActorControl>> {
    absl::StatusOr<std::unique_ptr<A>> actor = A::create(params);
    if (!actor.ok()) return actor.status();
    return internal::spawn_cell(proc, parent, std::move(uid), *std::move(actor), actor_type<A>());
  };
}

}  // namespace postal::actors

#define POSTAL_ACTOR_CONCAT_(a, b) a##b
#define POSTAL_ACTOR_CONCAT(a, b) POSTAL_ACTOR_CONCAT_(a, b)
// Registers actor class `Type` (with a static `create(const SpawnParams&)`) under `Name`.
#define POSTAL_ACTOR(Type, Name)                                                      \
  [[maybe_unused]] static const bool POSTAL_ACTOR_CONCAT(postal_actor_registered_, __LINE__) = \
      ::postal::actors::ActorRegistry::global().add(Name, ::postal::actors::factory_for<Type>())
