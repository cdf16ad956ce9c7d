// cereal encoding of registered values, with errors as values.
//
// `encode` and `decode` use postal's memory archives (wire_archive.h): the bytes of cereal's
// portable binary archive (fixed little-endian layout, the same on every platform), written into
// a string and read in place. Any exception cereal raises — truncated input, a length that runs
// past the end, a value a type's `load` rejects — is caught here and returned as
// absl::DataLossError naming the type; nothing escapes the wire boundary.
//
// Bytes from a socket are untrusted: every length prefix (strings, vectors, maps) is checked
// against the bytes left before anything is allocated for it, so a 20-byte input cannot make the
// decoder allocate gigabytes.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cereal/types/optional.hpp"
#include "cereal/types/string.hpp"
#include "cereal/types/utility.hpp"
#include "cereal/types/variant.hpp"
#include "cereal/types/vector.hpp"
#include "postal/wire/absl_compat.h"
#include "postal/wire/payload_bytes.h"
#include "postal/wire/untrusted_scope.h"
#include "postal/wire/wire_archive.h"

namespace postal::wire {

template <class T>
absl::StatusOr<std::string> encode(const T& value, std::string_view what = "value") {
  try {
    std::string bytes;
    bytes.reserve(256);  // most messages fit: one allocation instead of a growth chain
    {
      WireOutputArchive archive(bytes);
      archive(value);
    }
    return bytes;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot encode ", sv(what), ": ", e.what()));
  }
}

// Like encode, but large SharedBytes fields are referenced, not copied (shared_bytes.h): what an
// Any keeps as a payload's bytes.
template <class T>
absl::StatusOr<PayloadBytes> encode_gathered(const T& value, std::string_view what = "value") {
  try {
    std::string bytes;
    bytes.reserve(256);
    std::vector<ByteRef> refs;
    {
      WireOutputArchive archive(bytes, &refs);
      archive(value);
    }
    return PayloadBytes(std::move(bytes), std::move(refs));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot encode ", sv(what), ": ", e.what()));
  }
}

// `owner`, when given, keeps `bytes` alive: large SharedBytes fields then become slices of
// `bytes` that share it instead of copies.
template <class T>
absl::Status decode_into(std::string_view bytes, T& value, std::string_view what = "value",
                         std::shared_ptr<const void> owner = nullptr) {
  UntrustedScope untrusted;  // bytes come from outside the process: bounded interning (labels)
  try {
    WireInputArchive archive(bytes, std::move(owner));
    archive(value);
    if (archive.left() != 0) {
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
