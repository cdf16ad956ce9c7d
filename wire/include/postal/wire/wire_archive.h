// cereal archives over memory: what codec.h encodes and decodes registered values with.
//
// The bytes are exactly cereal's portable binary archive's on a little-endian machine (a leading
// endianness byte, 1; then every arithmetic value's bytes, little-endian; sizes as u64), so they
// are the same on every platform and readable by cereal::PortableBinaryInputArchive. They differ
// in where the bytes go: WireOutputArchive appends to a std::string and WireInputArchive reads a
// byte range in place, with no std::stream and no virtual call per field (a small message costs
// a fraction of what it does through a stringstream).
//
// Large shared fields (shared_bytes.h): an output archive given a list of references records a
// SharedBytes of at least kGatherMin bytes there, by reference, instead of copying it (the bytes
// go on the wire from where they are); an input archive given the owner of its input decodes a
// SharedBytes of at least kSliceMin bytes as a slice of that input instead of a copy.
//
// Untrusted input (R-FLOW-4): WireInputArchive checks every read against the bytes left, and
// every length prefix (strings, vectors, maps) before anything is allocated for it, so 20 bytes
// cannot make it allocate gigabytes. Failures throw cereal::Exception; codec.h turns them into
// statuses.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cereal/cereal.hpp"

namespace postal::wire {

static_assert(std::endian::native == std::endian::little,
              "postal's wire archives write the native (little-endian) layout");

// Bytes an output archive referenced instead of copying: they belong at offset `at` of the
// archive's own bytes (before the byte that is there), and `owner` keeps them alive.
struct ByteRef {
  size_t at = 0;
  std::string_view bytes;
  std::shared_ptr<const void> owner;
};

class WireOutputArchive
    : public cereal::OutputArchive<WireOutputArchive, cereal::AllowEmptyClassElision> {
 public:
  static constexpr size_t kLargeWrite = size_t{1} << 20;
  static constexpr size_t kLargeWriteSlack = size_t{64} << 10;
  static constexpr size_t kMediumWrite = size_t{4} << 10;
  static constexpr size_t kMediumWriteSlack = size_t{4} << 10;
  // A shared field this large is referenced, not copied, when the archive gathers.
  static constexpr size_t kGatherMin = size_t{4} << 10;

  // Appends to `out`; with `refs`, large shared fields go there by reference instead.
  //
  // While the archive lives, `out` holds room past what was written (the bytes there are not
  // the value's); the destructor cuts it to what was written. Small fields are copied through a
  // cursor into that room — no call per field — and large ones are appended (room for them is
  // reserved with slack, never zero-filled first).
  explicit WireOutputArchive(std::string& out, std::vector<ByteRef>* refs = nullptr)
      : cereal::OutputArchive<WireOutputArchive, cereal::AllowEmptyClassElision>(this),
        out_(out),
        refs_(refs),
        at_(out.size()) {
    make_room(kSmallRoom);
    out_[at_++] = 1;  // little-endian, as cereal's portable binary archive marks it
  }
  ~WireOutputArchive() { out_.resize(at_); }
  WireOutputArchive(const WireOutputArchive&) = delete;
  WireOutputArchive& operator=(const WireOutputArchive&) = delete;

  void write(const void* data, size_t size) {
    if (size == 0) return;  // an empty vector's data() may be null
    if (size >= kMediumWrite) return write_large(data, size);
    if (out_.size() - at_ < size) make_room(size);
    std::memcpy(out_.data() + at_, data, size);
    at_ += size;
  }
  // A shared field's bytes: referenced when gathering and large, else copied.
  void write_shared(std::string_view bytes, const std::shared_ptr<const void>& owner) {
    if (refs_ != nullptr && owner != nullptr && bytes.size() >= kGatherMin) {
      refs_->push_back(ByteRef{at_, bytes, owner});
      return;
    }
    write(bytes.data(), bytes.size());
  }
  // How many bytes `out` holds so far, and those written since `from` (valid until the next
  // write): what a writer that memoizes its own encoding copies (runtime/address.h).
  size_t position() const { return at_; }
  std::string_view written_since(size_t from) const {
    return std::string_view(out_.data() + from, at_ - from);
  }

 private:
  static constexpr size_t kSmallRoom = 256;

  // At least `size` more bytes of room past the cursor (the string's capacity grows
  // geometrically; what is zero-filled here is at most what is written next, or kSmallRoom).
  void make_room(size_t size) { out_.resize(at_ + std::max(size, kSmallRoom)); }
  // A large field (a big string's bytes) gets room for what follows it, so the fields after
  // it do not double the buffer and copy it again (and peak memory of large payloads stays
  // low, wire.md §9.10).
  void write_large(const void* data, size_t size) {
    const size_t slack = size >= kLargeWrite ? kLargeWriteSlack : kMediumWriteSlack;
    out_.resize(at_);
    if (out_.capacity() < at_ + size + slack) out_.reserve(at_ + size + slack);
    out_.append(static_cast<const char*>(data), size);
    at_ += size;
    make_room(std::min(slack, kSmallRoom));
  }

  std::string& out_;
  std::vector<ByteRef>* refs_;
  size_t at_;  // where the next byte goes: the bytes before it are the value's
};

class WireInputArchive
    : public cereal::InputArchive<WireInputArchive, cereal::AllowEmptyClassElision> {
 public:
  // A shared field this large is decoded as a slice of the input when the input has an owner.
  static constexpr size_t kSliceMin = size_t{16} << 10;

  // Reads `in`; `owner`, when not null, keeps `in` alive and lets large shared fields be slices.
  explicit WireInputArchive(std::string_view in, std::shared_ptr<const void> owner = nullptr)
      : cereal::InputArchive<WireInputArchive, cereal::AllowEmptyClassElision>(this),
        in_(in),
        owner_(std::move(owner)) {
    uint8_t little = 0;
    read(&little, 1, 1);
    // The byte-order mark cereal's portable archive writes: 1 little-endian, 0 big-endian.
    // Anything else is not our encoding (bytes that would otherwise decode as "swapped").
    if (little > 1) {
      throw cereal::Exception("not a postal encoding: byte-order mark " + std::to_string(little));
    }
    swap_ = little == 0;  // written on a big-endian machine by cereal's own archive
  }
  // Reads `size` bytes of `element`-byte values, swapping their bytes if the writer was
  // big-endian.
  void read(void* data, size_t size, size_t element) {
    if (size > in_.size() - at_) [[unlikely]] truncated(size);
    if (size == 0) return;  // an empty vector's data() may be null: memcpy must not see it
    std::memcpy(data, in_.data() + at_, size);
    at_ += size;
    if (swap_ && element > 1) [[unlikely]] swap_bytes(data, size, element);
  }
  size_t left() const { return in_.size() - at_; }
  bool swapped() const { return swap_; }
  const std::shared_ptr<const void>& owner() const { return owner_; }
  // The next `size` bytes, in place (valid while the input is); throws when fewer are left.
  std::string_view take(size_t size) {
    if (size > in_.size() - at_) [[unlikely]] truncated(size);
    std::string_view out = in_.substr(at_, size);
    at_ += size;
    return out;
  }
  // The bytes not read yet, in place (what a reader that memoizes its decoding compares), and
  // skipping `size` of them (at most left()).
  std::string_view rest() const { return in_.substr(at_); }
  void skip(size_t size) {
    if (size > in_.size() - at_) [[unlikely]] truncated(size);
    at_ += size;
  }

 private:
  [[noreturn, gnu::cold, gnu::noinline]] void truncated(size_t size) const {
    throw cereal::Exception("truncated: " + std::to_string(size) + " bytes wanted, " +
                            std::to_string(in_.size() - at_) + " left");
  }
  [[gnu::cold, gnu::noinline]] static void swap_bytes(void* data, size_t size, size_t element) {
    auto* p = static_cast<uint8_t*>(data);
    for (size_t i = 0; i < size; i += element) {
      for (size_t j = 0; j < element / 2; ++j) std::swap(p[i + j], p[i + element - 1 - j]);
    }
  }

  std::string_view in_;
  std::shared_ptr<const void> owner_;
  size_t at_ = 0;
  bool swap_ = false;
};

template <class T>
  requires std::is_arithmetic_v<T>
void CEREAL_SAVE_FUNCTION_NAME(WireOutputArchive& ar, const T& t) {
  ar.write(std::addressof(t), sizeof(t));
}
template <class T>
  requires std::is_arithmetic_v<T>
void CEREAL_LOAD_FUNCTION_NAME(WireInputArchive& ar, T& t) {
  ar.read(std::addressof(t), sizeof(t), sizeof(t));
}

template <class Archive, class T>
CEREAL_ARCHIVE_RESTRICT(WireInputArchive, WireOutputArchive)
CEREAL_SERIALIZE_FUNCTION_NAME(Archive& ar, cereal::NameValuePair<T>& t) {
  ar(t.value);
}

template <class T>
void CEREAL_SERIALIZE_FUNCTION_NAME(WireOutputArchive& ar, cereal::SizeTag<T>& t) {
  ar(t.size);
}
// A length prefix larger than the bytes left is refused before anything is allocated for it.
template <class T>
void CEREAL_SERIALIZE_FUNCTION_NAME(WireInputArchive& ar, cereal::SizeTag<T>& t) {
  ar(t.size);
  if (static_cast<uint64_t>(t.size) > ar.left()) {
    throw cereal::Exception("a length prefix of " + std::to_string(t.size) + " exceeds the " +
                            std::to_string(ar.left()) + " bytes left");
  }
}

template <class T>
void CEREAL_SAVE_FUNCTION_NAME(WireOutputArchive& ar, const cereal::BinaryData<T>& bd) {
  ar.write(bd.data, static_cast<size_t>(bd.size));
}
template <class T>
void CEREAL_LOAD_FUNCTION_NAME(WireInputArchive& ar, cereal::BinaryData<T>& bd) {
  using TT = std::remove_pointer_t<T>;
  ar.read(bd.data, static_cast<size_t>(bd.size), sizeof(TT));
}

}  // namespace postal::wire

CEREAL_REGISTER_ARCHIVE(postal::wire::WireOutputArchive)
CEREAL_REGISTER_ARCHIVE(postal::wire::WireInputArchive)
CEREAL_SETUP_ARCHIVE_TRAITS(postal::wire::WireInputArchive, postal::wire::WireOutputArchive)
