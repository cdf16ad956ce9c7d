// Any: a message payload, either the typed value or its bytes.
//
// An Any always carries the stable type hash of its registered type (R-ENV-4). Inside one
// process it holds the typed value and is moved, never serialized. When it first leaves the
// process `bytes()` serializes it — at most once; the bytes are cached. On the receiving side
// `from_bytes` keeps the bytes until a port of the right type calls `decode<T>()`.
//
// Failures are statuses, never exceptions: a type mismatch is FailedPrecondition naming both
// types, undecodable bytes are DataLoss (see codec.h). A failed decode leaves the Any as it was.
//
// Small values (≤ 48 bytes, nothrow-movable) live inline; larger ones on the heap.
//
// The bytes are a PayloadBytes (payload_bytes.h): large SharedBytes fields of the value are
// referenced by the bytes rather than copied into them, and bytes received as a slice of a
// reference-counted buffer stay that slice; decoding such bytes makes large SharedBytes fields
// slices too. Ownership is shared, so the bytes outlive the value (`take`, `keep_bytes_only`).
//
// A third form exists only inside gateways: `from_stream`, the bytes of a large payload still
// arriving in chunks (byte_stream.h, docs/wire.md §9.7). It has a type hash and a size but
// neither a value nor bytes: `bytes()` and `decode()` fail on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "postal/wire/byte_stream.h"
#include "postal/wire/codec.h"
#include "postal/wire/payload_bytes.h"
#include "postal/wire/type_registry.h"

namespace postal::wire {

class Any {
 public:
  Any() = default;
  Any(Any&& other) noexcept { move_from(other); }
  Any& operator=(Any&& other) noexcept {
    if (this != &other) {
      reset();
      move_from(other);
    }
    return *this;
  }
  Any(const Any&) = delete;
  Any& operator=(const Any&) = delete;
  ~Any() { reset(); }

  template <RegisteredMessage T>
  static Any make(T value) {
    Any a;
    a.emplace<T>(std::move(value));
    return a;
  }

  // Bytes received for `hash`; decoded on first use by a port of that type.
  static Any from_bytes(uint64_t hash, std::string bytes) {
    Any a;
    a.hash_ = hash;
    a.bytes_ = std::make_unique<PayloadBytes>(std::move(bytes));
    return a;
  }
  // Bytes received for `hash` that `owner` keeps alive (a slice of a receive buffer, no copy).
  static Any from_slice(uint64_t hash, std::shared_ptr<const void> owner, std::string_view bytes) {
    Any a;
    a.hash_ = hash;
    a.bytes_ = std::make_unique<PayloadBytes>(std::move(owner), bytes);
    return a;
  }

  // Bytes of `hash` still arriving (§9.7); a gateway's channel client forwards them as they come.
  static Any from_stream(uint64_t hash, std::shared_ptr<ByteStream> stream) {
    Any a;
    a.hash_ = hash;
    if (stream) a.stream_ = std::make_unique<std::shared_ptr<ByteStream>>(std::move(stream));
    return a;
  }
  // The arriving bytes of a `from_stream` Any; null for the other forms.
  const std::shared_ptr<ByteStream>& stream() const {
    static const std::shared_ptr<ByteStream> none;
    return stream_ ? *stream_ : none;
  }

  uint64_t type_hash() const { return hash_; }
  // R-FLOW-1: the payload's size as known without serializing: its bytes when it has them
  // (received, or serialized once already), else the typed value's own size (`sizeof`, not
  // what it owns on the heap); 0 when empty.
  size_t known_size() const {
    if (bytes_) return bytes_->size();
    if (stream_) return static_cast<size_t>((*stream_)->size());
    return ops_ != nullptr ? ops_->size : 0;
  }
  bool empty() const { return hash_ == 0 && !bytes_ && !stream_; }
  bool is_typed() const { return ops_ != nullptr; }

  // The typed value, or nullptr when the Any holds another type or only bytes.
  template <RegisteredMessage T>
  T* get() {
    if (ops_ == nullptr || hash_ != wire::type_hash<T>()) return nullptr;
    return static_cast<T*>(ptr());
  }
  template <RegisteredMessage T>
  const T* get() const {
    return const_cast<Any*>(this)->get<T>();
  }

  // Makes the value typed as T: decodes bytes when needed. Mismatched hash → FailedPrecondition;
  // undecodable bytes → DataLoss. On failure the Any is unchanged.
  template <RegisteredMessage T>
  absl::Status decode() {
    if (hash_ != wire::type_hash<T>()) {
      return absl::FailedPreconditionError(
          absl::StrCat("payload is ", TypeRegistry::global().name_of(hash_), ", port expects ",
                       sv(wire::type_name<T>())));
    }
    if (ops_ != nullptr) return absl::OkStatus();
    if (stream_) return still_arriving();
    if (!bytes_) return absl::FailedPreconditionError("payload is empty");
    T value{};
    // Only bytes that can hold a field worth slicing are shared with the value.
    std::shared_ptr<const void> owner =
        bytes_->size() >= WireInputArchive::kSliceMin ? bytes_->contiguous_owner() : nullptr;
    absl::Status s =
        decode_into(bytes_->contiguous(), value, wire::type_name<T>(), std::move(owner));
    if (!s.ok()) return s;
    emplace<T>(std::move(value));
    return absl::OkStatus();
  }

  // Moves the typed value out (decoding first when needed).
  template <RegisteredMessage T>
  absl::StatusOr<T> take() {
    absl::Status s = decode<T>();
    if (!s.ok()) return s;
    return std::move(*get<T>());
  }

  // Drops the typed value of an Any that has its bytes — a large payload once serialized for
  // the wire, so the sender does not hold it twice: whatever reads it later decodes the bytes.
  // The bytes become one run (nothing may hold pieces of them yet): the chunks of a transfer
  // are cut from it.
  void keep_bytes_only() {
    if (bytes_ && ops_ != nullptr) {
      bytes_->flatten();
      reset_value();
    }
  }

  // The serialized form, as pieces a gathered write can send from where they are; computed
  // once, then cached. Valid as long as this Any (or one it was moved to) lives.
  absl::StatusOr<PayloadBytes*> serialized() {
    if (!bytes_) {
      if (stream_) return still_arriving();
      if (ops_ == nullptr) return absl::FailedPreconditionError("payload is empty");
      absl::StatusOr<PayloadBytes> b = ops_->encode(ptr());
      if (!b.ok()) return b.status();
      bytes_ = std::make_unique<PayloadBytes>(*std::move(b));
    }
    return bytes_.get();
  }

  // The serialized form as one run (a gathered form is joined once, a copy); computed once,
  // then cached.
  absl::StatusOr<std::string_view> bytes() {
    absl::StatusOr<PayloadBytes*> b = serialized();
    if (!b.ok()) return b.status();
    return (*b)->contiguous();
  }

  template <class Archive>
  void save(Archive& ar) const {
    absl::StatusOr<std::string_view> b = const_cast<Any*>(this)->bytes();
    if (!b.ok()) throw std::runtime_error(std::string(b.status().message()));
    ar(hash_, std::string(*b));
  }
  template <class Archive>
  void load(Archive& ar) {
    uint64_t hash = 0;
    std::string b;
    ar(hash, b);
    *this = from_bytes(hash, std::move(b));
  }

 private:
  static constexpr size_t kInline = 48;

  static absl::Status still_arriving() {
    return absl::FailedPreconditionError(
        "the payload is still arriving in chunks (a gateway forwards it; it cannot be read here)");
  }

  struct Ops {
    void (*destroy)(void*);
    void (*move)(void* from, void* to);  // inline only
    absl::StatusOr<PayloadBytes> (*encode)(const void*);
    size_t size;  // sizeof the value (R-FLOW-1's byte accounting)
    bool heap;    // the value lives on the heap, its pointer in `storage_` (a property of T)
  };

  template <class T>
  static constexpr bool fits_inline() {
    return sizeof(T) <= kInline && alignof(T) <= alignof(std::max_align_t) &&
           std::is_nothrow_move_constructible_v<T>;
  }

  template <class T>
  static const Ops* ops_for() {
    static constexpr Ops ops{
        [](void* p) {
          if constexpr (fits_inline<T>()) {
            static_cast<T*>(p)->~T();
          } else {
            delete static_cast<T*>(p);
          }
        },
        [](void* from, void* to) {
          ::new (to) T(std::move(*static_cast<T*>(from)));
          static_cast<T*>(from)->~T();
        },
        [](const void* p) {
          return wire::encode_gathered(*static_cast<const T*>(p), wire::type_name<T>());
        },
        sizeof(T),
        !fits_inline<T>(),
    };
    return &ops;
  }

  template <class T>
  void emplace(T&& value) {
    using U = std::decay_t<T>;
    reset_value();
    if constexpr (fits_inline<U>()) {
      ::new (static_cast<void*>(storage_)) U(std::forward<T>(value));
    } else {
      set_heap(new U(std::forward<T>(value)));
    }
    hash_ = wire::type_hash<U>();
    ops_ = ops_for<U>();
  }

  void* heap() const {
    void* p;
    std::memcpy(&p, storage_, sizeof p);
    return p;
  }
  void set_heap(void* p) { std::memcpy(storage_, &p, sizeof p); }
  void* ptr() { return ops_->heap ? heap() : static_cast<void*>(storage_); }

  void reset_value() {
    if (ops_ != nullptr) ops_->destroy(ptr());
    ops_ = nullptr;
  }
  void reset() {
    reset_value();
    bytes_.reset();
    stream_.reset();
    hash_ = 0;
  }
  void move_from(Any& other) {
    hash_ = other.hash_;
    ops_ = other.ops_;
    bytes_ = std::move(other.bytes_);
    stream_ = std::move(other.stream_);
    if (ops_ != nullptr) {
      if (ops_->heap) {
        set_heap(other.heap());
      } else {
        ops_->move(other.storage_, storage_);
      }
    }
    other.ops_ = nullptr;
    other.hash_ = 0;
  }

  // Five words plus the inline value: an Any is in every envelope. A heap value's pointer lives
  // in `storage_`; the rare stream form is one pointer more.
  uint64_t hash_ = 0;
  const Ops* ops_ = nullptr;
  std::unique_ptr<PayloadBytes> bytes_;
  std::unique_ptr<std::shared_ptr<ByteStream>> stream_;
  alignas(std::max_align_t) std::byte storage_[kInline];
};

static_assert(sizeof(Any) <= 80, "an Any is five words plus its inline value (every envelope has one)");

}  // namespace postal::wire
