#include "topology_hints.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "postal/wire/absl_compat.h"

namespace postal::routing::topology_internal {
namespace {

constexpr std::size_t kMaxListed = 8;  // Names listed in a "declared are ..." hint.

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  a = a.substr(0, 32);
  b = b.substr(0, 32);
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string join(Keys keys) {
  std::string out;
  for (std::string_view key : keys) absl::StrAppend(&out, out.empty() ? "" : ", ", sv(key));
  return out;
}

std::string list_names(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::vector<std::string> shown;
  for (std::size_t i = 0; i < names.size() && i < kMaxListed; ++i) shown.push_back(quote(names[i]));
  return absl::StrCat(absl::StrJoin(shown, ", "), names.size() > kMaxListed ? ", ..." : "");
}

// "<subject> is not a declared <kind> (did you mean ...?); declare it with [[kind]] or name one
// of: ...", for a reference to a name that no entry declares.
std::string undeclared(std::string_view subject, std::string_view name, std::string_view kind,
                       const std::vector<std::string>& declared) {
  return absl::StrCat(
      sv(subject), " ", quote(name), " is not a declared ", sv(kind), did_you_mean(name, declared),
      "; declare it with [[", sv(kind), "]]",
      declared.empty() ? " (none is declared yet)" : " or name one of: ", list_names(declared));
}

}  // namespace postal::routing::topology_internal
