#include "postal/actors/actor_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "postal/wire/absl_compat.h"

namespace postal::actors {

ActorRegistry& ActorRegistry::global() {
  static ActorRegistry* registry = new ActorRegistry();  // never destroyed
  return *registry;
}

bool ActorRegistry::add(std::string_view type_name, ActorFactory factory) {
  absl::MutexLock lock(&mu_);
  return factories_.try_emplace(std::string(type_name), std::move(factory)).second;
}

absl::StatusOr<ActorFactory> ActorRegistry::find(std::string_view type_name) const {
  {
    absl::MutexLock lock(&mu_);
    auto it = factories_.find(std::string(type_name));
    if (it != factories_.end()) return it->second;
  }
  std::vector<std::string> known = names();
  return absl::NotFoundError(absl::StrCat(
      "no actor type \"", sv(type_name), "\" is registered in this program (registered: ",
      known.empty() ? std::string("none") : absl::StrJoin(known, ", "),
      "); register it with POSTAL_ACTOR(Type, \"name\")"));
}

std::vector<std::string> ActorRegistry::names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [name, f] : factories_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<std::shared_ptr<ActorControl>> spawn_by_type(runtime::Proc& proc,
                                                            std::string_view type_name,
                                                            std::string_view name,
                                                            const SpawnParams& params) {
  absl::StatusOr<runtime::Label> label = runtime::Label::parse(name);
  if (!label.ok()) return label.status();
  absl::StatusOr<ActorFactory> factory = ActorRegistry::global().find(type_name);
  if (!factory.ok()) return factory.status();
  return (*factory)(proc, nullptr, runtime::Uid::singleton(*label), params);
}

}  // namespace postal::actors
