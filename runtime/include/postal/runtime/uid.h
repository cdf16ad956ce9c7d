// uid.h — `Uid`, the identity of a proc, an actor or a gateway, and its base58 text encoding.
//
// R-ADDR-2: a uid is either
//   * a singleton: a well-known name, exactly one `Label` (e.g. `host`, `gw1`), or
//   * an instance: a 64-bit number, usually random, plus an optional label that is display-only.
//
// Equality
//   Singletons are equal when their labels are equal. Instances are equal when their numbers are
//   equal — the label is ignored, so `worker~3xYz` == `~3xYz` == `other~3xYz`. A singleton never
//   equals an instance. The hash is consistent with this equality.
//
// Text
//   singleton          `label`             e.g. `host`
//   labelled instance  `label~base58`      e.g. `worker~3xYz`
//   unlabelled         `~base58`           e.g. `~3xYz`
//   `~` is in neither labels nor base58, so the forms cannot be confused. Numbers use base58 with
//   the Flickr alphabet `123456789abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ`, most
//   significant digit first, without leading `1`s (0 is "1"). Every value has exactly one text
//   form, and `parse(u.to_string()) == u`.
//
// Value semantics
//   A default-constructed `Uid` is the unlabelled instance 0 (`~1`); it exists so that ids can be
//   default-constructed for deserialization, not as a meaningful identity. `sizeof(Uid)` is 24
//   bytes; copies are trivial.
//
// Failure
//   `parse` and `base58_decode` never throw or crash; they return `InvalidArgument` naming the
//   input and what is wrong. Loading a `Uid` with cereal from invalid content throws
//   `cereal::Exception`; the wire layer converts it to a status.
#ifndef POSTAL_RUNTIME_UID_H_
#define POSTAL_RUNTIME_UID_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include <cereal/cereal.hpp>
#include <cereal/types/string.hpp>

#include "absl/status/statusor.h"
#include "postal/runtime/label.h"
#include "postal/wire/text_field.h"

namespace postal::runtime {

// The base58 (Flickr alphabet) text of `value`; 0 encodes as "1".
std::string base58_encode(std::uint64_t value);

// Decodes the canonical base58 text of a 64-bit number: non-empty, Flickr alphabet only, no
// leading '1' unless the whole text is "1", and no overflow past 64 bits.
absl::StatusOr<std::uint64_t> base58_decode(std::string_view text);

class Uid {
 public:
  // The unlabelled instance 0 (`~1`).
  Uid() = default;

  static Uid singleton(Label label) { return Uid(0, label.text_, true); }
  static Uid instance(std::uint64_t number, std::optional<Label> label = {}) {
    return Uid(number, label ? label->text_ : nullptr, false);
  }
  // An instance with a random 64-bit number, drawn from a thread-local std::mt19937_64 seeded
  // from std::random_device.
  static Uid random(std::optional<Label> label = {});

  bool is_singleton() const { return (tagged_ & kSingletonBit) != 0; }
  // The instance number; 0 for a singleton.
  std::uint64_t number() const { return number_; }
  // The label: always set for a singleton, optional (display-only) for an instance.
  std::optional<Label> label() const {
    if (label_ptr() == nullptr) return std::nullopt;
    return Label(label_ptr());
  }

  std::string to_string() const;
  static absl::StatusOr<Uid> parse(std::string_view text);

  friend bool operator==(const Uid& a, const Uid& b) {
    if (a.is_singleton() != b.is_singleton()) return false;
    return a.is_singleton() ? a.tagged_ == b.tagged_ : a.number_ == b.number_;
  }
  template <typename H>
  friend H AbslHashValue(H h, const Uid& uid) {
    if (uid.is_singleton()) return H::combine(std::move(h), true, uid.tagged_);
    return H::combine(std::move(h), false, uid.number_);
  }
  friend std::ostream& operator<<(std::ostream& os, const Uid& uid) {
    return os << uid.to_string();
  }

  // cereal: a uid is stored as its text (wire/text_field.h: the bytes of a std::string, written
  // from and read into views). `load` throws `cereal::Exception` when the text does not parse.
  template <class Archive>
  void save(Archive& ar) const {
    wire::save_text(ar, cereal_text());
  }
  template <class Archive>
  void load(Archive& ar) {
    *this = from_cereal_text(wire::load_text(ar));
  }
  // to_string and parse for cereal, memoized per thread (runtime/src/text_memo.h); the text is
  // the memo's, valid until this thread renders a few other uids. The parse throws
  // cereal::Exception.
  std::string_view cereal_text() const;
  static Uid from_cereal_text(std::string_view text);

 private:
  Uid(std::uint64_t number, const std::string* label, bool singleton)
      : number_(number),
        tagged_(reinterpret_cast<std::uintptr_t>(label) | (singleton ? kSingletonBit : 0)) {}

  // The interned label's pointer, whose low bit (always clear: interned strings are at least
  // 8-aligned) says singleton. Two words, not three: every address holds two or three uids.
  static constexpr std::uintptr_t kSingletonBit = 1;
  const std::string* label_ptr() const {
    return reinterpret_cast<const std::string*>(tagged_ & ~kSingletonBit);
  }

  std::uint64_t number_ = 0;
  std::uintptr_t tagged_ = 0;  // An interned label (see label.h) or null, plus kSingletonBit.
};

static_assert(sizeof(Uid) == 16, "R-ADDR-2: a Uid stays small (two words)");
static_assert(alignof(std::string) > 1, "the singleton bit needs an aligned label");

}  // namespace postal::runtime

#endif  // POSTAL_RUNTIME_UID_H_
