// PayloadBytes: a payload's serialized form as an Any keeps it, without copying large fields.
//
// Three shapes, one byte sequence:
//   - owned: a string of the bytes (what `encode` made, or bytes handed in);
//   - a slice: bytes of a buffer someone else owns (a channel's reference-counted receive
//     buffer, docs/wire.md §14.3), kept alive by a shared owner;
//   - gathered: the archive's own bytes with large SharedBytes fields referenced, not copied
//     (shared_bytes.h); `for_each_piece` yields the bytes in order as a few runs, which a
//     channel writes with one gathered write (§6.7).
// Pieces and views stay valid as long as the PayloadBytes does: every run has an owner that
// this object holds. `contiguous()` makes one run of a gathered form on first use (a copy),
// keeping the pieces as they were, so views handed out earlier stay valid.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "postal/wire/wire_archive.h"

namespace postal::wire {

class PayloadBytes {
 public:
  explicit PayloadBytes(std::string bytes) : PayloadBytes(std::move(bytes), {}) {}
  // The archive's bytes and the fields it referenced (ByteRef::at ascending).
  PayloadBytes(std::string flat, std::vector<ByteRef> refs)
      : own_(std::move(flat)), refs_(std::move(refs)) {
    flat_ = own_;
    size_ = flat_.size();
    for (const ByteRef& r : refs_) size_ += r.bytes.size();
  }
  // `bytes`, kept alive by `owner`.
  PayloadBytes(std::shared_ptr<const void> owner, std::string_view bytes)
      : owner_(std::move(owner)), flat_(bytes), size_(bytes.size()) {}
  // Moved only before pieces are handed out (an Any holds it by pointer): owned bytes of a
  // short string live inside the object.
  PayloadBytes(PayloadBytes&& other) noexcept { *this = std::move(other); }
  PayloadBytes& operator=(PayloadBytes&& other) noexcept {
    const bool owns = other.owner_ == nullptr;  // flat_ views other.own_
    owner_ = std::move(other.owner_);
    own_ = std::move(other.own_);
    flat_ = owns ? std::string_view(own_) : other.flat_;
    refs_ = std::move(other.refs_);
    size_ = other.size_;
    joined_ = std::move(other.joined_);
    other.flat_ = {};
    other.size_ = 0;
    return *this;
  }
  PayloadBytes(const PayloadBytes&) = delete;
  PayloadBytes& operator=(const PayloadBytes&) = delete;

  size_t size() const { return size_; }
  bool gathered() const { return !refs_.empty(); }

  // Calls f(std::string_view) for each run of the bytes, in order; empty runs are skipped.
  template <class F>
  void for_each_piece(F&& f) const {
    size_t at = 0;
    for (const ByteRef& r : refs_) {
      if (r.at > at) f(flat_.substr(at, r.at - at));
      if (!r.bytes.empty()) f(r.bytes);
      at = r.at;
    }
    if (at < flat_.size()) f(flat_.substr(at));
  }
  size_t piece_count() const {
    size_t n = 0;
    for_each_piece([&](std::string_view) { ++n; });
    return n;
  }

  // The bytes as one run (a gathered form is copied into one, once).
  std::string_view contiguous() {
    if (!gathered()) return flat_;
    if (joined_ == nullptr) {
      std::string all;
      all.reserve(size_);
      for_each_piece([&](std::string_view p) { all.append(p); });
      joined_ = std::make_shared<const std::string>(std::move(all));
    }
    return *joined_;
  }
  // What keeps `contiguous()` alive: decoding may take slices of it (shared_bytes.h). Owned
  // bytes become shared here, once; their heap buffer stays where it is (a string long enough
  // to have pieces handed out is never a short one), so pieces handed out stay valid.
  std::shared_ptr<const void> contiguous_owner() {
    if (gathered()) {
      contiguous();
      return joined_;
    }
    if (owner_ == nullptr) {
      auto shared = std::make_shared<const std::string>(std::move(own_));
      flat_ = *shared;
      owner_ = std::move(shared);
    }
    return owner_;
  }
  // Becomes one owned run and lets the referenced fields go (nothing may hold pieces).
  void flatten() {
    if (!gathered()) return;
    contiguous();
    owner_ = joined_;
    flat_ = *joined_;
    own_ = std::string();
    refs_.clear();
    joined_.reset();
  }

 private:
  std::shared_ptr<const void> owner_;  // keeps flat_ alive; null when flat_ views own_
  std::string own_;
  std::string_view flat_;
  std::vector<ByteRef> refs_;
  size_t size_ = 0;
  std::shared_ptr<const std::string> joined_;  // contiguous() of a gathered form
};

}  // namespace postal::wire
