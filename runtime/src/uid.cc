#include "postal/runtime/uid.h"

#include <array>
#include <chrono>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "text_memo.h"

namespace postal::runtime {
namespace {

using address_internal::quote;

constexpr std::string_view kBase58Alphabet =
    "123456789abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ";
constexpr std::uint64_t kBase = 58;

// The digit value of `c`, or -1 when `c` is not in the Flickr alphabet.
int base58_digit(char c) {
  const std::size_t pos = kBase58Alphabet.find(c);
  return pos == std::string_view::npos ? -1 : static_cast<int>(pos);
}

std::uint64_t random_seed_part(std::random_device* device) {
  // std::random_device may be unavailable; fall back to clock and thread identity.
  if (device != nullptr) {
    try {
      return (static_cast<std::uint64_t>((*device)()) << 32) ^ (*device)();
    } catch (...) {
    }
  }
  return static_cast<std::uint64_t>(
             std::chrono::high_resolution_clock::now().time_since_epoch().count()) ^
         std::hash<std::thread::id>{}(std::this_thread::get_id());
}

std::mt19937_64 make_generator() {
  std::random_device* device = nullptr;
  std::optional<std::random_device> storage;
  try {
    storage.emplace();
    device = &*storage;
  } catch (...) {
  }
  std::array<std::uint64_t, 4> parts;
  for (auto& part : parts) part = random_seed_part(device);
  std::seed_seq seq{parts[0], parts[1], parts[2], parts[3]};
  return std::mt19937_64(seq);
}

}  // namespace

std::string base58_encode(std::uint64_t value) {
  char buffer[16];
  std::size_t pos = sizeof(buffer);
  do {
    buffer[--pos] = kBase58Alphabet[value % kBase];
    value /= kBase;
  } while (value != 0);
  return std::string(buffer + pos, sizeof(buffer) - pos);
}

absl::StatusOr<std::uint64_t> base58_decode(std::string_view text) {
  if (text.empty()) {
    return absl::InvalidArgumentError(
        "bad base58 number \"\": it is empty; write at least one digit of "
        "123456789abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ");
  }
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const int digit = base58_digit(text[i]);
    if (digit < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad base58 number ", quote(text), ": character ", quote(text.substr(i, 1)),
          " at position ", i,
          " is not in the Flickr alphabet "
          "123456789abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ (no 0, O, I or l)"));
    }
    const auto d = static_cast<std::uint64_t>(digit);
    if (value > (UINT64_MAX - d) / kBase) {
      return absl::InvalidArgumentError(absl::StrCat("bad base58 number ", quote(text),
                                                     ": it overflows 64 bits; the largest is ",
                                                     base58_encode(UINT64_MAX)));
    }
    value = value * kBase + d;
  }
  if (text.size() > 1 && text.front() == '1') {
    return absl::InvalidArgumentError(absl::StrCat("bad base58 number ", quote(text),
                                                   ": it has a leading '1' (a zero digit); write ",
                                                   base58_encode(value)));
  }
  return value;
}

Uid Uid::random(std::optional<Label> label) {
  thread_local std::mt19937_64 generator = make_generator();
  return instance(generator(), label);
}

std::string Uid::to_string() const {
  if (is_singleton()) return *label_ptr();
  std::string out = label_ptr() == nullptr ? std::string() : *label_ptr();
  out += '~';
  out += base58_encode(number_);
  return out;
}

absl::StatusOr<Uid> Uid::parse(std::string_view text) {
  const std::size_t tilde = text.find('~');
  if (tilde == std::string_view::npos) {
    absl::StatusOr<Label> label = Label::parse(text);
    if (!label.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad uid ", quote(text), ": ", label.status().message(),
                       "; a uid is a label, label~base58 or ~base58"));
    }
    return singleton(*label);
  }
  std::optional<Label> label;
  if (tilde > 0) {
    absl::StatusOr<Label> parsed = Label::parse(text.substr(0, tilde));
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad uid ", quote(text), ": ", parsed.status().message()));
    }
    label = *parsed;
  }
  absl::StatusOr<std::uint64_t> number = base58_decode(text.substr(tilde + 1));
  if (!number.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad uid ", quote(text), ": ", number.status().message()));
  }
  return instance(*number, label);
}

}  // namespace postal::runtime

namespace postal::runtime {
namespace {
// What identifies a uid's text exactly: equality ignores an instance's label, its text does not.
using UidTextKey = std::pair<std::uint64_t, std::uintptr_t>;
thread_local internal::Memo<UidTextKey, std::string> rendered_uids;
thread_local internal::Memo<std::string, Uid> parsed_uids;
}  // namespace

std::string_view Uid::cereal_text() const {
  const UidTextKey key{number_, tagged_};
  if (const std::string* text = rendered_uids.find(key)) return *text;
  return rendered_uids.put(key, to_string());
}

Uid Uid::from_cereal_text(std::string_view text) {
  if (const Uid* uid = parsed_uids.find(text)) return *uid;
  absl::StatusOr<Uid> parsed = parse(text);
  if (!parsed.ok()) throw cereal::Exception(std::string(parsed.status().message()));
  parsed_uids.put(text, *parsed);
  return *parsed;
}

}  // namespace postal::runtime
