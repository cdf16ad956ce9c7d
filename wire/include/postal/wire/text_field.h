// Text fields: how types stored as their text (uids, locations; runtime/uid.h, location.h) go
// through cereal without a string of their own.
//
// `save_text` writes exactly what cereal writes for a std::string — a size tag, then the bytes —
// from a view, so a writer that keeps its text elsewhere (a per-thread memo) copies it once, into
// the archive. `load_text` reads those bytes back as a view: in place from a WireInputArchive
// (the payload's own bytes), through a per-thread buffer from any other archive. The view is
// valid until the calling thread's next `load_text`; the caller parses it at once. Nothing
// allocates on the WireInputArchive path, which is what every envelope's payload decodes with
// (R-FLOW-4). Text archives (cereal's JSON, XML) get a plain string value, as before.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "cereal/cereal.hpp"
#include "cereal/types/string.hpp"
#include "postal/wire/wire_archive.h"

namespace postal::wire {

template <class Archive>
void save_text(Archive& ar, std::string_view text) {
  if constexpr (cereal::traits::is_text_archive<Archive>::value) {
    ar(std::string(text));
  } else {
    ar(cereal::make_size_tag(static_cast<cereal::size_type>(text.size())));
    ar(cereal::binary_data(text.data(), text.size()));
  }
}

template <class Archive>
std::string_view load_text(Archive& ar) {
  if constexpr (cereal::traits::is_text_archive<Archive>::value) {
    thread_local std::string text;
    ar(text);
    return text;
  } else {
    cereal::size_type size = 0;
    ar(cereal::make_size_tag(size));  // the wire archive checks it against the bytes left
    if constexpr (std::is_same_v<Archive, WireInputArchive>) {
      return ar.take(static_cast<size_t>(size));
    } else {
      thread_local std::string buffer;
      buffer.resize(static_cast<size_t>(size));
      ar(cereal::binary_data(buffer.data(), buffer.size()));
      return buffer;
    }
  }
}

}  // namespace postal::wire
