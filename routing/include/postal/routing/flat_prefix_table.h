// FlatPrefixTable<V>: values keyed by an id prefix — a proc, an actor or a port — looked up by
// true longest-prefix match (port ⊒ actor ⊒ proc, R-ROUTE-2), laid out for the cache. Router and
// DialRouter keep their routes in one.
//
// Same contract as PrefixTable<V>, the plain three-map table it is tested and measured against:
// add replaces, remove says whether the prefix was routed, lookup returns the value of the longest
// routed prefix or nullptr. Built so that a lookup in a table far larger than the cache costs
// about one cache miss, not one per level:
//
//   * One open-addressing table (linear probing, load ≤ 1/2) holds all three levels. A slot is the
//     compact key — three words and a tag byte, 25 bytes instead of the ids' 24/48/64 — with the
//     value inline, so a probe that hits reads one slot (one line, or two adjacent ones).
//   * A port id is hashed once: the proc prefix's hash is mixed from the proc uid, the actor's
//     from the proc's hash and the actor uid, the port's from the actor's and the port — one
//     64×64→128 multiply each, no pass over the 64-byte id per level.
//   * A filter of 8 bits per slot (1/40 of the slots' bytes for a pointer V: 2 MiB at 1 M routes,
//     small enough to stay mostly in cache) holds one bit per routed prefix. A level whose bit is
//     clear is not probed: most unrouted levels cost a filter read, not a miss in the slots. Bits
//     of removed prefixes stay set (they only cost a probe) until the filter is rebuilt, on growth
//     or once removals reach a quarter of the slots.
//   * lookup prefetches the home slot of every level that passed the filter before it probes the
//     first, so those misses overlap instead of following each other.
//   * Slot arrays (and filters) of 2 MiB or more ask the kernel for transparent huge pages (Linux,
//     MADV_HUGEPAGE), so a random probe misses the TLB less.
//
// Complexity: lookup O(1) expected, at most three probe sequences; add and remove O(1) amortized
// (doubling rehash; remove shifts the probe run back, no tombstones). Memory: 2–4 slots per route
// of sizeof(Slot) = 32 + sizeof(V) rounded to V's alignment (40 bytes for a pointer), plus the
// filter. Pointers returned by lookup stay valid until the next add or remove. Not synchronized:
// its owner locks. Move-only.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <variant>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "postal/routing/route_prefix.h"
#include "postal/runtime/ids.h"

namespace postal::routing {

namespace flat_prefix_internal {

// The levels of a prefix; 0 marks an empty slot.
enum Level : std::uint8_t { kEmpty = 0, kProc = 1, kActor = 2, kPort = 3 };

// A prefix as three words and a tag. uid.h: singletons compare by their interned label, instances
// by number, so a uid is a word (the label's interned text address, or the number) and a bit.
// Words a level does not have are zero.
struct Key {
  std::uint64_t proc = 0;
  std::uint64_t actor = 0;
  std::uint64_t port = 0;
  // level | proc uid is a singleton << 2 | actor uid is a singleton << 3 | port kind << 4.
  std::uint8_t tag = kEmpty;

  Level level() const { return static_cast<Level>(tag & 3); }
  bool operator==(const Key& o) const {
    return ((proc ^ o.proc) | (actor ^ o.actor) | (port ^ o.port) |
            static_cast<std::uint64_t>(tag ^ o.tag)) == 0;
  }
};

inline std::uint64_t uid_word(const runtime::Uid& uid) {
  if (!uid.is_singleton()) return uid.number();
  // The interned label's text never moves and is never freed (label.h).
  return reinterpret_cast<std::uintptr_t>(uid.label()->str().data());
}

inline Key proc_key(const runtime::ProcId& id) {
  return Key{uid_word(id.uid), 0, 0,
             static_cast<std::uint8_t>(kProc | (id.uid.is_singleton() ? 4 : 0))};
}
inline Key actor_key(const runtime::ActorId& id) {
  Key k = proc_key(id.proc);
  k.actor = uid_word(id.uid);
  k.tag = static_cast<std::uint8_t>((k.tag & ~3) | kActor | (id.uid.is_singleton() ? 8 : 0));
  return k;
}
inline Key port_key(const runtime::PortId& id) {
  Key k = actor_key(id.actor);
  k.port = id.port.value();
  k.tag = static_cast<std::uint8_t>((k.tag & ~3) | kPort |
                                    (static_cast<std::uint8_t>(id.port.kind()) << 4));
  return k;
}
// The same key cut back to a shorter prefix.
inline Key cut(Key k, Level level) {
  if (level < kPort) k.port = 0, k.tag &= 0x0f;
  if (level < kActor) k.actor = 0, k.tag &= 0x07;
  k.tag = static_cast<std::uint8_t>((k.tag & ~3) | level);
  return k;
}

// 64×64→128 multiply, folded: the mixing step of wyhash.
inline std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  const unsigned __int128 m = static_cast<unsigned __int128>(a) * b;
  return static_cast<std::uint64_t>(m) ^ static_cast<std::uint64_t>(m >> 64);
}
constexpr std::uint64_t kSeed0 = 0xa0761d6478bd642full;
constexpr std::uint64_t kSeed1 = 0xe7037ed1a0b428dbull;
constexpr std::uint64_t kSeed2 = 0x8ebc6af09c88c6e3ull;
constexpr std::uint64_t kSeed3 = 0x589965cc75374cc3ull;

// The hashes of a key's three prefixes, each derived from the shorter one.
struct Hashes {
  std::uint64_t proc, actor, port;
};
inline Hashes hashes(const Key& k) {
  Hashes h;
  h.proc = mix(k.proc ^ kSeed0, kSeed1 ^ (k.tag & 0x04));
  h.actor = mix(h.proc ^ kSeed2, k.actor ^ kSeed1 ^ (k.tag & 0x08));
  h.port = mix(h.actor ^ kSeed3, k.port ^ kSeed1 ^ (k.tag & 0x30));
  return h;
}
inline std::uint64_t hash_of(const Key& k) {
  const Hashes h = hashes(k);
  switch (k.level()) {
    case kProc:
      return h.proc;
    case kActor:
      return h.actor;
    default:
      return h.port;
  }
}

constexpr std::size_t kHugePage = std::size_t{2} << 20;

// `bytes` (rounded up) of zeroed memory, aligned to a cache line, or to a huge page with the
// transparent-huge-page hint when it is that large. Free with std::free.
inline void* allocate_zeroed(std::size_t bytes) {
  const std::size_t align = bytes >= kHugePage ? kHugePage : 64;
  bytes = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, bytes);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (align == kHugePage) madvise(p, bytes, MADV_HUGEPAGE);  // a hint; failure is harmless
#endif
  std::memset(p, 0, bytes);
  return p;
}

}  // namespace flat_prefix_internal

template <class V>
class FlatPrefixTable {
  using Key = flat_prefix_internal::Key;
  using Level = flat_prefix_internal::Level;

 public:
  FlatPrefixTable() = default;
  FlatPrefixTable(const FlatPrefixTable&) = delete;
  FlatPrefixTable& operator=(const FlatPrefixTable&) = delete;
  FlatPrefixTable(FlatPrefixTable&& o) noexcept { swap(o); }
  FlatPrefixTable& operator=(FlatPrefixTable&& o) noexcept {
    FlatPrefixTable(std::move(o)).swap(*this);
    return *this;
  }
  ~FlatPrefixTable() { release(); }

  void add(const RoutePrefix& prefix, V value) {
    const Key key = key_of(prefix);
    if ((size() + 1) * 2 > capacity_) grow();
    size_t i = flat_prefix_internal::hash_of(key) & mask();
    for (; slots_[i].key.tag != flat_prefix_internal::kEmpty; i = (i + 1) & mask()) {
      if (slots_[i].key == key) {
        *slots_[i].value() = std::move(value);
        return;
      }
    }
    slots_[i].key = key;
    new (slots_[i].storage) V(std::move(value));
    ++count_[key.level()];
    mark(flat_prefix_internal::hash_of(key));
  }

  bool remove(const RoutePrefix& prefix) {
    if (size() == 0) return false;
    const Key key = key_of(prefix);
    size_t i = flat_prefix_internal::hash_of(key) & mask();
    for (;; i = (i + 1) & mask()) {
      if (slots_[i].key.tag == flat_prefix_internal::kEmpty) return false;
      if (slots_[i].key == key) break;
    }
    std::destroy_at(slots_[i].value());
    --count_[key.level()];
    // Backward-shift deletion: pull later entries of the run into the hole when their home slot
    // is not after it (cyclically), so every run stays unbroken and lookups need no tombstones.
    for (size_t j = (i + 1) & mask();; j = (j + 1) & mask()) {
      Slot& s = slots_[j];
      if (s.key.tag == flat_prefix_internal::kEmpty) break;
      const size_t home = flat_prefix_internal::hash_of(s.key) & mask();
      if (((j - home) & mask()) < ((j - i) & mask())) continue;  // home lies in (i, j]
      slots_[i].key = s.key;
      new (slots_[i].storage) V(std::move(*s.value()));
      std::destroy_at(s.value());
      i = j;
    }
    slots_[i].key.tag = flat_prefix_internal::kEmpty;
    // Stale filter bits only cost probes; clear them once removals reach a quarter of the slots.
    if (++removed_since_rebuild_ * 4 > capacity_) rebuild_filter();
    return true;
  }

  // The value of the longest prefix of `id`, or nullptr.
  const V* lookup(const runtime::PortId& id) const {
    if (size() == 0) return nullptr;
    const Key key = flat_prefix_internal::port_key(id);
    const flat_prefix_internal::Hashes h = flat_prefix_internal::hashes(key);
    // The filter (in cache) rules most unrouted levels out without touching their slots.
    const bool ports = count_[flat_prefix_internal::kPort] != 0 && maybe_routed(h.port);
    const bool actors = count_[flat_prefix_internal::kActor] != 0 && maybe_routed(h.actor);
    const bool procs = count_[flat_prefix_internal::kProc] != 0 && maybe_routed(h.proc);
    // Start the slot misses of the levels left now; the probes below then wait for one miss, not
    // for one after the other.
    if (ports) prefetch(h.port);
    if (actors) prefetch(h.actor);
    if (procs) prefetch(h.proc);
    if (ports) {
      if (const V* v = find(key, h.port)) return v;
    }
    if (actors) {
      if (const V* v = find(cut(key, flat_prefix_internal::kActor), h.actor)) return v;
    }
    if (procs) return find(cut(key, flat_prefix_internal::kProc), h.proc);
    return nullptr;
  }

  size_t size() const {
    return count_[flat_prefix_internal::kProc] + count_[flat_prefix_internal::kActor] +
           count_[flat_prefix_internal::kPort];
  }
  // Bytes held by the slot array.
  size_t memory_bytes() const { return capacity_ * sizeof(Slot); }

 private:
  struct Slot {
    Key key;
    alignas(V) unsigned char storage[sizeof(V)];
    V* value() { return std::launder(reinterpret_cast<V*>(storage)); }
    const V* value() const { return std::launder(reinterpret_cast<const V*>(storage)); }
  };
  static_assert(std::is_trivially_copyable_v<Key>);

  static constexpr size_t kMinCapacity = 16;
  // 8 filter bits per slot, at most 4 routes per 8 slots: a level that is not routed passes the
  // filter one time in 16 or less.
  static constexpr size_t kFilterBitsPerSlot = 8;

  static Key key_of(const RoutePrefix& prefix) {
    using namespace flat_prefix_internal;
    return std::visit(
        [](const auto& id) {
          using T = std::decay_t<decltype(id)>;
          if constexpr (std::is_same_v<T, runtime::ProcId>) return proc_key(id);
          if constexpr (std::is_same_v<T, runtime::ActorId>) return actor_key(id);
          if constexpr (std::is_same_v<T, runtime::PortId>) return port_key(id);
        },
        prefix);
  }

  static Key cut(const Key& k, Level level) { return flat_prefix_internal::cut(k, level); }

  size_t mask() const { return capacity_ - 1; }

  // The home slot's line. (Prefetching the next slot's line too measured no faster: the hardware
  // fetches the adjacent line.)
  void prefetch(std::uint64_t h) const { __builtin_prefetch(&slots_[h & mask()]); }

  const V* find(const Key& key, std::uint64_t h) const {
    for (size_t i = h & mask();; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.key == key) return s.value();
      if (s.key.tag == flat_prefix_internal::kEmpty) return nullptr;
    }
  }

  static Slot* allocate(size_t capacity) {  // every tag kEmpty
    return static_cast<Slot*>(flat_prefix_internal::allocate_zeroed(capacity * sizeof(Slot)));
  }

  // The filter: one bit per hash, kFilterBitsPerSlot bits per slot, set for every routed prefix
  // (bits of removed prefixes stay set until the next rebuild).
  bool maybe_routed(std::uint64_t h) const {
    const std::uint64_t bit = h >> filter_shift_;
    return (filter_[bit >> 6] >> (bit & 63)) & 1;
  }
  void mark(std::uint64_t h) {
    const std::uint64_t bit = h >> filter_shift_;
    filter_[bit >> 6] |= std::uint64_t{1} << (bit & 63);
  }
  void rebuild_filter() {
    std::memset(filter_, 0, filter_bytes());
    for (size_t i = 0; i < capacity_; ++i) {
      if (slots_[i].key.tag != flat_prefix_internal::kEmpty) {
        mark(flat_prefix_internal::hash_of(slots_[i].key));
      }
    }
    removed_since_rebuild_ = 0;
  }
  size_t filter_bytes() const { return capacity_ * kFilterBitsPerSlot / 8; }

  void grow() {
    const size_t new_capacity = capacity_ == 0 ? kMinCapacity : capacity_ * 2;
    Slot* old = slots_;
    const size_t old_capacity = capacity_;
    slots_ = allocate(new_capacity);
    capacity_ = new_capacity;
    std::free(filter_);
    filter_ = static_cast<std::uint64_t*>(flat_prefix_internal::allocate_zeroed(filter_bytes()));
    filter_shift_ = 64 - std::countr_zero(capacity_ * kFilterBitsPerSlot);
    for (size_t i = 0; i < old_capacity; ++i) {
      Slot& s = old[i];
      if (s.key.tag == flat_prefix_internal::kEmpty) continue;
      size_t j = flat_prefix_internal::hash_of(s.key) & mask();
      while (slots_[j].key.tag != flat_prefix_internal::kEmpty) j = (j + 1) & mask();
      slots_[j].key = s.key;
      new (slots_[j].storage) V(std::move(*s.value()));
      std::destroy_at(s.value());
    }
    std::free(old);
    rebuild_filter();
  }

  void release() {
    if (slots_ == nullptr) return;
    for (size_t i = 0; i < capacity_; ++i) {
      if (slots_[i].key.tag != flat_prefix_internal::kEmpty) std::destroy_at(slots_[i].value());
    }
    std::free(slots_);
    std::free(filter_);
    slots_ = nullptr;
    filter_ = nullptr;
    capacity_ = 0;
  }

  void swap(FlatPrefixTable& o) noexcept {
    std::swap(slots_, o.slots_);
    std::swap(capacity_, o.capacity_);
    std::swap(count_, o.count_);
    std::swap(filter_, o.filter_);
    std::swap(filter_shift_, o.filter_shift_);
    std::swap(removed_since_rebuild_, o.removed_since_rebuild_);
  }

  Slot* slots_ = nullptr;
  size_t capacity_ = 0;              // a power of two, or 0 before the first add
  size_t count_[4] = {0, 0, 0, 0};   // routes per Level (index 0 unused)
  std::uint64_t* filter_ = nullptr;  // capacity_ * kFilterBitsPerSlot bits
  int filter_shift_ = 64;            // a hash's top bits index the filter
  size_t removed_since_rebuild_ = 0;
};

}  // namespace postal::routing
