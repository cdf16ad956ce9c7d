// Escaping for topology error messages (routing internal, topology_spec).
//
// A topology file may hold any bytes; every piece of it quoted in an error message goes through
// here, so a message stays short, on one line and printable whatever the file holds.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace postal::routing::topology_internal {

// Bytes of a value shown in a message.
inline constexpr std::size_t kMaxQuoted = 64;

// `text` with quotes, backslashes, control and non-ASCII bytes escaped (`\"`, `\\`, `\xNN`), cut
// after `max` bytes (then "..." follows).
std::string printable(std::string_view text, std::size_t max);

// `text` made printable (at most kMaxQuoted bytes) in double quotes.
std::string quote(std::string_view text);

}  // namespace postal::routing::topology_internal
