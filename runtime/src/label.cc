#include "postal/runtime/label.h"

#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace postal::runtime {
namespace {

constexpr std::string_view kLabelRule =
    "a label is 1-63 characters of [a-z0-9_-], starting with a letter [a-z] and ending with a "
    "letter or digit [a-z0-9]";

bool is_label_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

absl::Status label_error(std::string_view text, std::string_view problem,
                         std::string_view advice = {}) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad label ", address_internal::quote(text), ": ", std::string(problem), "; ",
                   std::string(kLabelRule), advice.empty() ? "" : "; ", std::string(advice)));
}

// Returns the first R-ADDR-1 violation in `text`, or OK.
absl::Status check_label(std::string_view text) {
  if (text.empty()) return label_error(text, "it is empty");
  if (text.size() > Label::kMaxLength) {
    return label_error(text, absl::StrCat("it is ", text.size(), " characters long"), "shorten it");
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (is_label_char(c)) continue;
    std::string problem = absl::StrCat("character ", address_internal::quote(text.substr(i, 1)),
                                       " at position ", i, " is not allowed");
    if (c >= 'A' && c <= 'Z') {
      std::string lower(text);
      for (char& l : lower) l = (l >= 'A' && l <= 'Z') ? static_cast<char>(l - 'A' + 'a') : l;
      return label_error(
          text, problem,
          absl::StrCat("write it in lowercase, e.g. ", address_internal::quote(lower)));
    }
    return label_error(text, problem);
  }
  if (!(text.front() >= 'a' && text.front() <= 'z')) {
    return label_error(text, "it does not start with a letter");
  }
  if (text.back() == '_' || text.back() == '-') {
    return label_error(text, "it ends with '_' or '-'");
  }
  return absl::OkStatus();
}

// The intern table (see label.h). Heap-allocated and never destroyed so labels stay valid during
// static destruction; node_hash_set keeps element addresses stable across rehashing.
class InternTable {
 public:
  const std::string* intern(std::string_view text) {
    const absl::string_view key(text.data(), text.size());
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = set_.find(key);
      if (it != set_.end()) return &*it;
    }
    absl::MutexLock lock(&mu_);
    return &*set_.emplace(text).first;
  }

 private:
  absl::Mutex mu_;
  absl::node_hash_set<std::string> set_ ABSL_GUARDED_BY(mu_);
};

InternTable& intern_table() {
  static InternTable* const table = new InternTable();
  return *table;
}

}  // namespace

absl::StatusOr<Label> Label::parse(std::string_view text) {
  if (absl::Status status = check_label(text); !status.ok()) return status;
  return Label(intern_table().intern(text));
}

namespace address_internal {

std::string quote(std::string_view text) {
  // Bound the quoted text, not the input: escaping can quadruple a byte.
  constexpr std::size_t kMaxQuoted = 96;
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size(); ++i) {
    const std::string escaped = absl::CHexEscape(absl::string_view(&text[i], 1));
    if (out.size() + escaped.size() > kMaxQuoted) {
      out += "...";
      break;
    }
    out += escaped;
  }
  out += '"';
  return out;
}

absl::StatusOr<std::uint64_t> parse_decimal(std::string_view text, std::string_view what,
                                            std::uint64_t max) {
  const std::string prefix = absl::StrCat(std::string(what), " ", quote(text), " ");
  if (text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "is empty; write a decimal number"));
  }
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "is not a decimal number; write only the digits 0-9"));
    }
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (digit > max || value > (max - digit) / 10) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "is out of range; the largest allowed is ", max));
    }
    value = value * 10 + digit;
  }
  if (text.size() > 1 && text.front() == '0') {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "has a leading zero; write ", value));
  }
  return value;
}

}  // namespace address_internal

}  // namespace postal::runtime
