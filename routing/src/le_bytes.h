// Little-endian field writing and bounds-checked reading for wire v2 (docs/wire.md §1): the
// one implementation envelope_codec.cc and frames_v2.cc share. Routing internal.
//
// `put` appends a field's bytes; `ByteReader` reads fields in place from a body and never reads
// past it (every read checks the bytes left first and returns false instead).
#pragma once

#include <bit>
#include <cassert>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace postal::routing::internal::v2 {

static_assert(std::endian::native == std::endian::little, "wire v2 is little-endian");

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

// Fields written into a fixed block on the stack, appended to a frame at once (a header of a
// dozen fields is one append, not a dozen).
template <size_t N>
class FieldBlock {
 public:
  template <class T>
  void put(T v) {
    assert(at_ + sizeof(T) <= N);
    std::memcpy(b_ + at_, &v, sizeof(T));
    at_ += sizeof(T);
  }
  const char* data() const { return b_; }
  size_t size() const { return at_; }

 private:
  char b_[N];
  size_t at_ = 0;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view bytes) : rest_(bytes) {}
  template <class T>
  bool get(T& v) {
    if (rest_.size() < sizeof(T)) return false;
    std::memcpy(&v, rest_.data(), sizeof(T));
    rest_.remove_prefix(sizeof(T));
    return true;
  }
  bool take(size_t n, std::string_view& out) {
    if (rest_.size() < n) return false;
    out = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return true;
  }
  // `n` reserved bytes, which must be zero.
  bool reserved(size_t n) {
    if (rest_.size() < n) return false;
    for (size_t i = 0; i < n; ++i) {
      if (rest_[i] != 0) return false;
    }
    rest_.remove_prefix(n);
    return true;
  }
  size_t left() const { return rest_.size(); }
  std::string_view rest() const { return rest_; }

 private:
  std::string_view rest_;
};

}  // namespace postal::routing::internal::v2
