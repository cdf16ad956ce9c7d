// SharedBytes: an immutable run of bytes with shared ownership, for large message fields.
//
// A message field of this type (a 64 KiB body, an image) is never copied on its way between
// procs (issue 9, docs/wire.md §6.7 and §14.3):
//   - sending: copying a SharedBytes bumps a reference count; serializing it into an Any's bytes
//     records a reference instead of copying when it is at least kGatherMin bytes, and the
//     channel writes those bytes from where they are (a gathered write);
//   - receiving: decoding one of at least kSliceMin bytes from a received payload yields a slice
//     of the reference-counted receive buffer, not a copy.
// Whatever references the bytes holds a reference to their owner, so they stay valid however
// long anything needs them: the sender may drop its value the moment it has sent it, and the
// channel still resends the same bytes after a reconnect.
//
// On the wire it is exactly a std::string (cereal: a u64 length, then the bytes), so a peer may
// declare the field as either type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "cereal/cereal.hpp"
#include "postal/wire/wire_archive.h"

namespace postal::wire {

class SharedBytes {
 public:
  SharedBytes() = default;
  // Takes `bytes` over (no copy of a heap-allocated string).
  explicit SharedBytes(std::string bytes) {
    if (bytes.empty()) return;
    auto owned = std::make_shared<const std::string>(std::move(bytes));
    data_ = owned->data();
    size_ = owned->size();
    owner_ = std::move(owned);
  }
  // `size` copies of `c`.
  SharedBytes(size_t size, char c) : SharedBytes(std::string(size, c)) {}
  // `bytes`, kept alive by `owner` (a receive buffer, a string).
  SharedBytes(std::shared_ptr<const void> owner, std::string_view bytes)
      : owner_(std::move(owner)), data_(bytes.data()), size_(bytes.size()) {}
  SharedBytes(const SharedBytes&) = default;
  SharedBytes& operator=(const SharedBytes&) = default;
  // A moved-from SharedBytes is empty (not a view of bytes it no longer keeps alive).
  SharedBytes(SharedBytes&& other) noexcept
      : owner_(std::move(other.owner_)),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  SharedBytes& operator=(SharedBytes&& other) noexcept {
    owner_ = std::move(other.owner_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view view() const { return std::string_view(data_, size_); }
  // What keeps the bytes alive; null when empty.
  const std::shared_ptr<const void>& owner() const { return owner_; }

  friend bool operator==(const SharedBytes& a, const SharedBytes& b) {
    return a.view() == b.view();
  }

 private:
  std::shared_ptr<const void> owner_;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

template <class Archive>
void CEREAL_SAVE_FUNCTION_NAME(Archive& ar, const SharedBytes& b) {
  ar(cereal::make_size_tag(static_cast<cereal::size_type>(b.size())));
  if constexpr (std::is_same_v<Archive, WireOutputArchive>) {
    ar.write_shared(b.view(), b.owner());  // by reference when large and the archive gathers
  } else {
    ar(cereal::binary_data(b.data(), b.size()));
  }
}

template <class Archive>
void CEREAL_LOAD_FUNCTION_NAME(Archive& ar, SharedBytes& b) {
  cereal::size_type size = 0;
  ar(cereal::make_size_tag(size));  // bounded by the bytes left (wire_archive.h)
  if constexpr (std::is_same_v<Archive, WireInputArchive>) {
    std::string_view bytes = ar.take(static_cast<size_t>(size));
    const std::shared_ptr<const void>& owner = ar.owner();
    if (owner != nullptr && bytes.size() >= WireInputArchive::kSliceMin) {
      b = SharedBytes(owner, bytes);  // a slice of the received bytes, no copy
    } else {
      b = SharedBytes(std::string(bytes));
    }
  } else {
    std::string bytes(static_cast<size_t>(size), '\0');
    ar(cereal::binary_data(bytes.data(), bytes.size()));
    b = SharedBytes(std::move(bytes));
  }
}

}  // namespace postal::wire
