#include "postal/runtime/label.h"

#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "postal/runtime/log_rate_limit.h"
#include "postal/runtime/logger.h"
#include "postal/wire/untrusted_scope.h"

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
  // The interned text, or nullptr when `untrusted` and the text would be a new entry past the
  // untrusted budget.
  const std::string* intern(std::string_view text, bool untrusted) {
    const absl::string_view key(text.data(), text.size());
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = set_.find(key);
      if (it != set_.end()) return &*it;
    }
    absl::MutexLock lock(&mu_);
    if (auto it = set_.find(key); it != set_.end()) return &*it;
    if (untrusted) {
      if (untrusted_count_ >= untrusted_budget_) return nullptr;
      ++untrusted_count_;
    }
    return &*set_.emplace(text).first;
  }

  void set_untrusted_budget(std::size_t n) {
    absl::MutexLock lock(&mu_);
    untrusted_budget_ = n;
  }
  std::size_t untrusted_budget() {
    absl::MutexLock lock(&mu_);
    return untrusted_budget_;
  }
  std::size_t untrusted_count() {
    absl::MutexLock lock(&mu_);
    return untrusted_count_;
  }

 private:
  absl::Mutex mu_;
  absl::node_hash_set<std::string> set_ ABSL_GUARDED_BY(mu_);
  std::size_t untrusted_budget_ ABSL_GUARDED_BY(mu_) = 65536;
  std::size_t untrusted_count_ ABSL_GUARDED_BY(mu_) = 0;
};

InternTable& intern_table() {
  static InternTable* const table = new InternTable();
  return *table;
}

}  // namespace

absl::StatusOr<Label> Label::parse(std::string_view text) {
  if (absl::Status status = check_label(text); !status.ok()) return status;
  const bool untrusted = wire::UntrustedScope::active();
  const std::string* interned = intern_table().intern(text, untrusted);
  if (interned == nullptr) {
    // R-FLOW-4: untrusted input cannot grow the process-wide table without bound.
    static LogRateLimit limit(absl::Seconds(1));
    const std::string why = absl::StrCat(
        "label ", address_internal::quote(text), " is new and the ", intern_table().untrusted_budget(),
        " labels that network input may add are used up (a peer sends unique names); the "
        "envelope is refused");
    limit.log(Logger::runtime(), LogLevel::kWarn, why);
    return absl::ResourceExhaustedError(why);
  }
  return Label(interned);
}

void Label::set_untrusted_budget(std::size_t labels) { intern_table().set_untrusted_budget(labels); }
std::size_t Label::untrusted_budget() { return intern_table().untrusted_budget(); }
std::size_t Label::untrusted_count() { return intern_table().untrusted_count(); }

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
