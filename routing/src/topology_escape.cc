#include "topology_escape.h"

#include "absl/strings/str_cat.h"

namespace postal::routing::topology_internal {

std::string printable(std::string_view text, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i == max) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string quote(std::string_view text) {
  return absl::StrCat("\"", printable(text, kMaxQuoted), "\"");
}

}  // namespace postal::routing::topology_internal
