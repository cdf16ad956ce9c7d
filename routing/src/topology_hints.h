// "Did you mean" hints for topology error messages (routing internal, topology_spec).
//
// A misspelt key, table or name is an error whose message offers the closest valid spelling
// (within two edits) and, for a reference to something undeclared, lists what is declared.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "topology_escape.h"

namespace postal::routing::topology_internal {

// A fixed list of allowed keys or tables.
using Keys = std::initializer_list<std::string_view>;

// Levenshtein distance, for "did you mean" hints. Inputs are capped so the cost stays bounded.
std::size_t edit_distance(std::string_view a, std::string_view b);

// "; did you mean "x"?" for the closest candidate within two edits, or "".
template <class Names>
std::string did_you_mean(std::string_view typo, const Names& names) {
  std::string_view best;
  std::size_t best_distance = 3;
  for (std::string_view name : names) {
    const std::size_t d = edit_distance(typo, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  return best.empty() ? std::string() : absl::StrCat(" (did you mean ", quote(best), "?)");
}

// The keys, comma-separated: "name, listen, peers".
std::string join(Keys keys);

// The first few names, quoted and comma-separated, "..." when there are more; "" for none.
std::string list_names(const std::vector<std::string>& names);

// "<subject> is not a declared <kind> (did you mean ...?); declare it with [[kind]] or name one
// of: ...", for a reference to a name that no entry declares.
std::string undeclared(std::string_view subject, std::string_view name, std::string_view kind,
                       const std::vector<std::string>& declared);

}  // namespace postal::routing::topology_internal
