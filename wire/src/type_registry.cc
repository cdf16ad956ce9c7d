#include "postal/wire/type_registry.h"

#include "absl/strings/str_format.h"

namespace postal::wire {

TypeRegistry& TypeRegistry::global() {
  static TypeRegistry* registry = new TypeRegistry();  // never destroyed: used from static dtors
  return *registry;
}

bool TypeRegistry::add(std::string_view name) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = names_.try_emplace(fnv1a64(name), name);
  if (inserted || it->second == name) return true;
  ++collisions_;
  return false;
}

std::string TypeRegistry::name_of(uint64_t hash) const {
  absl::MutexLock lock(&mu_);
  auto it = names_.find(hash);
  if (it != names_.end()) return it->second;
  return absl::StrFormat("<unregistered 0x%016x>", hash);
}

bool TypeRegistry::contains(uint64_t hash) const {
  absl::MutexLock lock(&mu_);
  return names_.contains(hash);
}

size_t TypeRegistry::collisions() const {
  absl::MutexLock lock(&mu_);
  return collisions_;
}

}  // namespace postal::wire
