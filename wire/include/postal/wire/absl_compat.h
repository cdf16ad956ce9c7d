// Debian's abseil is built with its own absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW 0), so
// std::string_view does not convert to it implicitly. `sv()` bridges the two without copying.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace postal {

inline absl::string_view sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace postal
