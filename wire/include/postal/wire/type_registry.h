// Message type registry.
//
// Every message type that crosses a port is registered once under a stable name:
//
//   struct Ping { int n; template <class A> void serialize(A& a) { a(n); } };
//   POSTAL_MESSAGE(Ping, "examples.Ping");
//
// The type hash is the 64-bit FNV-1a hash of that name: the same in every process, build and
// platform (never std::hash). It is what a port of type T is keyed by and what travels on the
// wire next to a payload's bytes.
//
// The registry (`TypeRegistry::global()`) is the one documented process-wide table of postal:
// it maps a hash back to its name for diagnostics and detects two names colliding on one hash.
// Registration happens at static-initialization time through POSTAL_MESSAGE; it is thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace postal::wire {

// 64-bit FNV-1a: stable across processes and builds.
constexpr uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Specialized by POSTAL_MESSAGE; holds the registered name.
template <class T>
struct MessageName;

template <class T>
concept RegisteredMessage = requires {
  { MessageName<T>::value } -> std::convertible_to<std::string_view>;
};

template <RegisteredMessage T>
constexpr std::string_view type_name() {
  return MessageName<T>::value;
}

template <RegisteredMessage T>
constexpr uint64_t type_hash() {
  return fnv1a64(MessageName<T>::value);
}

class TypeRegistry {
 public:
  static TypeRegistry& global();

  // Records `name` under its hash. Returns false (and remembers the collision, reported by
  // `collisions()`) when another name already holds the same hash.
  bool add(std::string_view name);

  // The registered name of `hash`, or "<unregistered 0x…>" when unknown.
  std::string name_of(uint64_t hash) const;
  bool contains(uint64_t hash) const;
  size_t collisions() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::string> names_ ABSL_GUARDED_BY(mu_);
  size_t collisions_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace postal::wire

// Registers `Type` under `Name` (a string literal). Use at global namespace scope, once per type.
#define POSTAL_MESSAGE(Type, Name)                                                    \
  template <>                                                                         \
  struct postal::wire::MessageName<Type> {                                            \
    static constexpr std::string_view value = Name;                                   \
    inline static const bool registered = ::postal::wire::TypeRegistry::global().add(Name); \
  }
