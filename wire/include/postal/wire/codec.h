// cereal encoding of registered values, with errors as values.
//
// `encode` and `decode` use cereal's portable binary archive (fixed little-endian layout, the
// same bytes on every platform). Any exception cereal raises — truncated input, a length that
// runs past the end, a value a type's `load` rejects — is caught here and returned as
// absl::DataLossError naming the type; nothing escapes the wire boundary.
//
// Bytes from a socket are untrusted: every length prefix (strings, vectors, maps) is checked
// against the bytes left before anything is allocated for it, so a 20-byte input cannot make the
// decoder allocate gigabytes. Every TU that decodes with the portable binary archive must do so
// through this header (it adds the check as cereal's size-tag overload).
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
#include "postal/wire/codec_streams.h"
#include "postal/wire/untrusted_scope.h"

namespace postal::wire::internal {

// The stream being decoded on this thread and its size (see the header comment).
struct DecodeBounds {
  std::istream* in = nullptr;
  std::streamoff size = 0;
};
inline thread_local DecodeBounds decode_bounds;

class ScopedDecodeBounds {
 public:
  ScopedDecodeBounds(std::istream& in, std::streamoff size) : saved_(decode_bounds) {
    decode_bounds = DecodeBounds{&in, size};
  }
  ~ScopedDecodeBounds() { decode_bounds = saved_; }
  ScopedDecodeBounds(const ScopedDecodeBounds&) = delete;
  ScopedDecodeBounds& operator=(const ScopedDecodeBounds&) = delete;

 private:
  DecodeBounds saved_;
};

}  // namespace postal::wire::internal

namespace cereal {

// Preferred over cereal's template for the same archive: reads the length prefix, then refuses
// one larger than the bytes left.
inline void CEREAL_SERIALIZE_FUNCTION_NAME(PortableBinaryInputArchive& ar,
                                           SizeTag<std::uint64_t&>& t) {
  ar(t.size);
  const auto& bounds = postal::wire::internal::decode_bounds;
  if (bounds.in == nullptr) return;
  const std::streamoff at = bounds.in->tellg();
  const std::uint64_t left = at < 0 ? 0 : static_cast<std::uint64_t>(bounds.size - at);
  if (t.size > left) {
    throw Exception("a length prefix of " + std::to_string(t.size) + " exceeds the " +
                    std::to_string(left) + " bytes left");
  }
}

}  // namespace cereal

namespace postal::wire {

template <class T>
absl::StatusOr<std::string> encode(const T& value, std::string_view what = "value") {
  try {
    std::string bytes;
    {
      internal::OutputLease out(bytes);
      cereal::PortableBinaryOutputArchive archive(out.stream());
      archive(value);
    }
    return bytes;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot encode ", sv(what), ": ", e.what()));
  }
}

template <class T>
absl::Status decode_into(std::string_view bytes, T& value, std::string_view what = "value") {
  UntrustedScope untrusted;  // bytes come from outside the process: bounded interning (labels)
  try {
    internal::InputLease lease(bytes);
    std::istream& in = lease.stream();
    internal::ScopedDecodeBounds bounds(in, static_cast<std::streamoff>(bytes.size()));
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
