// cereal encoding of registered values, with errors as values.
//
// `encode` and `decode` use cereal's portable binary archive (fixed little-endian layout, the
// same bytes on every platform). Any exception cereal raises — truncated input, a length that
// runs past the end, a value a type's `load` rejects — is caught here and returned as
// absl::DataLossError naming the type; nothing escapes the wire boundary.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "postal/wire/absl_compat.h"
#include "cereal/archives/portable_binary.hpp"
#include "cereal/types/optional.hpp"
#include "cereal/types/string.hpp"
#include "cereal/types/utility.hpp"
#include "cereal/types/variant.hpp"
#include "cereal/types/vector.hpp"

namespace postal::wire {

template <class T>
absl::StatusOr<std::string> encode(const T& value, std::string_view what = "value") {
  try {
    std::ostringstream out(std::ios::binary);
    {
      cereal::PortableBinaryOutputArchive archive(out);
      archive(value);
    }
    return std::move(out).str();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot encode ", sv(what), ": ", e.what()));
  }
}

template <class T>
absl::Status decode_into(std::string_view bytes, T& value, std::string_view what = "value") {
  try {
    std::istringstream in(std::string(bytes), std::ios::binary);
    cereal::PortableBinaryInputArchive archive(in);
    archive(value);
    if (in.peek() != std::char_traits<char>::eof()) {
      return absl::DataLossError(absl::StrCat("cannot decode ", sv(what), ": ", bytes.size(),
                                              " bytes hold trailing data after the value"));
    }
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("cannot decode ", sv(what), " from ", bytes.size(),
                                            " bytes: ", e.what(),
                                            " (truncated or written by another type/version)"));
  }
}

template <class T>
absl::StatusOr<T> decode(std::string_view bytes, std::string_view what = "value") {
  T value{};
  absl::Status s = decode_into(bytes, value, what);
  if (!s.ok()) return s;
  return value;
}

}  // namespace postal::wire
