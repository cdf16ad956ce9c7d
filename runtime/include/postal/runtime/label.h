// label.h — `Label`, the validated, interned name used in uids and addresses.
//
// R-ADDR-1: a label is 1–63 characters of `[a-z0-9_-]`, starts with `[a-z]` and ends with
// `[a-z0-9]`. Examples: `pinger`, `gw1`, `host-a`, `proc_2`.
//
// Guarantees
//   * Every `Label` value is valid: the only way to make one is `Label::parse`, which checks
//     R-ADDR-1. There is no default constructor; where a label may be absent, hold a
//     `std::optional<Label>`.
//   * A `Label` is one pointer. Copying it is a pointer copy, equality is pointer equality, and
//     `str()` never allocates: labels are interned.
//   * Ordering (`<=>`) is lexicographic on the text, so it is stable across runs and processes.
//
// The intern table
//   Labels live in a process-wide, append-only table (a set of `std::string` guarded by an
//   `absl::Mutex`). Besides the wire type registry, it is the one process-wide table in postal.
//   Entries are never removed or moved, so `str()` stays valid for the life of the process, even
//   during static destruction. Cost: each distinct label ever parsed keeps ~100 bytes. Labels
//   parsed while a `wire::UntrustedScope` is active (decoding network input) may add at most
//   `untrusted_budget()` entries in all (default 65 536, ~8 MiB): past it a label *not already
//   in the table* fails with ResourceExhausted — its envelope fails to decode — while labels the
//   table holds keep decoding and local parses are never refused (R-FLOW-4). `parse` is
//   thread-safe; reads of an existing `Label` take no lock.
//
// Failure
//   `parse` never throws and never crashes. It returns `InvalidArgument` whose message quotes the
//   input, names the offending character or length, and restates the rule. Loading a `Label` with
//   cereal from invalid content throws `cereal::Exception` (cereal's only error channel); the wire
//   layer converts it to a status.
#ifndef POSTAL_RUNTIME_LABEL_H_
#define POSTAL_RUNTIME_LABEL_H_

#include <compare>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include <cereal/cereal.hpp>
#include <cereal/types/string.hpp>

#include "absl/status/statusor.h"

namespace postal::runtime {

class Uid;

class Label {
 public:
  // The longest label allowed by R-ADDR-1.
  static constexpr std::size_t kMaxLength = 63;

  // Validates `text` against R-ADDR-1 and returns the interned label. Under a
  // `wire::UntrustedScope`, a label new to the table counts against the untrusted budget.
  static absl::StatusOr<Label> parse(std::string_view text);

  // The bound on labels that untrusted input may add to the table, and how many it added.
  static void set_untrusted_budget(std::size_t labels);
  static std::size_t untrusted_budget();
  static std::size_t untrusted_count();

  // The label's text; valid for the life of the process.
  std::string_view str() const { return *text_; }

  friend bool operator==(Label a, Label b) { return a.text_ == b.text_; }
  friend std::strong_ordering operator<=>(Label a, Label b) {
    if (a.text_ == b.text_) return std::strong_ordering::equal;
    return a.str().compare(b.str()) < 0 ? std::strong_ordering::less
                                        : std::strong_ordering::greater;
  }
  template <typename H>
  friend H AbslHashValue(H h, Label label) {
    return H::combine(std::move(h), label.text_);
  }
  friend std::ostream& operator<<(std::ostream& os, Label label) { return os << label.str(); }

  // cereal: a label is stored as its text. `load_minimal` throws `cereal::Exception` when the
  // text is not a valid label.
  template <class Archive>
  std::string save_minimal(const Archive&) const {
    return std::string(str());
  }
  template <class Archive>
  void load_minimal(const Archive&, const std::string& text) {
    absl::StatusOr<Label> parsed = parse(text);
    if (!parsed.ok()) throw cereal::Exception(std::string(parsed.status().message()));
    *this = *parsed;
  }

 private:
  friend class Uid;  // Uid stores the interned pointer directly to stay small (R-ADDR-2).
  explicit Label(const std::string* text) : text_(text) {}

  const std::string* text_;  // Never null; points into the intern table.
};

static_assert(sizeof(Label) == sizeof(void*), "a Label is one interned pointer");

// Helpers shared by the address module's parsers. Not part of the API; may change.
namespace address_internal {

// `text` in double quotes for an error message: non-printable bytes are hex-escaped and long
// inputs are cut (with "...") so that messages stay bounded whatever the input.
std::string quote(std::string_view text);

// Parses a canonical unsigned decimal ("0", or digits without a leading zero) that fits in
// `max`. On failure returns InvalidArgument whose message starts with `what`.
absl::StatusOr<std::uint64_t> parse_decimal(std::string_view text, std::string_view what,
                                            std::uint64_t max);

}  // namespace address_internal

}  // namespace postal::runtime

#endif  // POSTAL_RUNTIME_LABEL_H_
