// address_parse_fuzzer: parses the input as every address-module type (R-ADDR-5).
//
// For each type, a parse either fails with a bounded InvalidArgument message, or succeeds and then
//   * prints and parses back to an equal value with an equal hash, printing the same text again;
//   * for types whose text form is canonical (Label, Uid, ids, Port, base58), prints the input;
//   * survives a cereal binary round trip.
// Any violation prints the input and calls abort(), which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <cereal/archives/binary.hpp>

#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "postal/runtime/address.h"
#include "postal/runtime/ids.h"
#include "postal/runtime/label.h"
#include "postal/runtime/location.h"
#include "postal/runtime/uid.h"

namespace {

using namespace postal::runtime;  // NOLINT(google-build-using-namespace): a fuzzer's whole TU.

constexpr std::size_t kMaxMessage = 2048;

[[noreturn]] void fail(const char* type, std::string_view input, const char* what) {
  std::fprintf(stderr, "address_parse_fuzzer: %s: %s\n  input (%zu bytes): %.*s\n", type, what,
               input.size(), static_cast<int>(input.size()), input.data());
  std::abort();
}

std::string text_of(const Label& label) { return std::string(label.str()); }
template <class T>
std::string text_of(const T& value) {
  return value.to_string();
}

template <class T>
void check_cereal(const char* type, std::string_view input, const T& value) {
  try {
    std::stringstream buffer;
    {
      cereal::BinaryOutputArchive out(buffer);
      out(value);
    }
    T loaded = value;  // Label has no default; the load overwrites it anyway.
    if constexpr (std::is_default_constructible_v<T>) loaded = T();
    cereal::BinaryInputArchive in(buffer);
    in(loaded);
    if (!(loaded == value)) fail(type, input, "cereal round trip changed the value");
  } catch (const std::exception& e) {
    fail(type, input, e.what());
  }
}

// Parses `input` as T and checks the R-ADDR-5 round trip. Returns the parsed value, if any.
template <class T>
std::optional<T> check(const char* type, std::string_view input, bool canonical) {
  absl::StatusOr<T> parsed = T::parse(input);
  if (!parsed.ok()) {
    if (parsed.status().code() != absl::StatusCode::kInvalidArgument) {
      fail(type, input, "error is not InvalidArgument");
    }
    if (parsed.status().message().size() > kMaxMessage) fail(type, input, "unbounded message");
    return std::nullopt;
  }
  const std::string printed = text_of(*parsed);
  if (canonical && printed != input) fail(type, input, "canonical text does not print back");
  absl::StatusOr<T> again = T::parse(printed);
  if (!again.ok()) fail(type, input, "printed text does not parse");
  if (!(*again == *parsed)) fail(type, input, "printed text parses to a different value");
  if (text_of(*again) != printed) fail(type, input, "reprinting is not stable");
  if (absl::Hash<T>{}(*again) != absl::Hash<T>{}(*parsed)) fail(type, input, "hash differs");
  check_cereal(type, input, *parsed);
  return *std::move(parsed);
}

void check_location_structure(std::string_view input, const Location& location) {
  if (!location.is_via()) return;
  if (!(Location::via(location.via_uid(), location.inner()) == location)) {
    fail("Location", input, "via(via_uid(), inner()) != location");
  }
}

void check_base58(std::string_view input) {
  absl::StatusOr<std::uint64_t> value = base58_decode(input);
  if (!value.ok()) {
    if (value.status().message().size() > kMaxMessage) fail("base58", input, "unbounded message");
    return;
  }
  if (base58_encode(*value) != input) fail("base58", input, "encode(decode(x)) != x");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  check_base58(input);
  check<Label>("Label", input, true);
  check<Uid>("Uid", input, true);
  check<ProcId>("ProcId", input, true);
  check<ActorId>("ActorId", input, true);
  check<Port>("Port", input, true);
  check<PortId>("PortId", input, true);
  check<ChannelAddr>("ChannelAddr", input, false);
  if (std::optional<Location> location = check<Location>("Location", input, false)) {
    check_location_structure(input, *location);
  }
  check<ProcAddr>("ProcAddr", input, false);
  check<ActorAddr>("ActorAddr", input, false);
  check<PortAddr>("PortAddr", input, false);
  return 0;
}
