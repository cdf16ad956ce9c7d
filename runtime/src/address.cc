#include "postal/runtime/address.h"

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace postal::runtime {
namespace {

using address_internal::quote;

// Splits `id@location` and parses both halves; `what` names the address kind in errors and
// `example` shows the form to write.
template <class Addr, class Id>
absl::StatusOr<Addr> parse_address(std::string_view text, std::string_view what,
                                   std::string_view example) {
  const std::string prefix = absl::StrCat("bad ", std::string(what), " ", quote(text), ": ");
  const std::size_t at = text.find('@');
  if (at == std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "missing '@' between id and location; write id@location, e.g. ",
                     std::string(example)));
  }
  absl::StatusOr<Id> id = Id::parse(text.substr(0, at));
  if (!id.ok()) return absl::InvalidArgumentError(absl::StrCat(prefix, id.status().message()));
  absl::StatusOr<Location> location = Location::parse(text.substr(at + 1));
  if (!location.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, location.status().message()));
  }
  return Addr{*std::move(id), *std::move(location)};
}

}  // namespace

std::string ProcAddr::to_string() const {
  return absl::StrCat(id.to_string(), "@", location.to_string());
}

absl::StatusOr<ProcAddr> ProcAddr::parse(std::string_view text) {
  return parse_address<ProcAddr, ProcId>(text, "proc address", "host@tcp://127.0.0.1:4000");
}

std::string ActorAddr::to_string() const {
  return absl::StrCat(id.to_string(), "@", location.to_string());
}

absl::StatusOr<ActorAddr> ActorAddr::parse(std::string_view text) {
  return parse_address<ActorAddr, ActorId>(text, "actor address",
                                           "pinger.host@tcp://127.0.0.1:4000");
}

std::string PortAddr::to_string() const {
  return absl::StrCat(id.to_string(), "@", location.to_string());
}

absl::StatusOr<PortAddr> PortAddr::parse(std::string_view text) {
  return parse_address<PortAddr, PortId>(text, "port address",
                                         "pinger.host:e0@tcp://127.0.0.1:4000");
}

std::ostream& operator<<(std::ostream& os, const ProcAddr& addr) { return os << addr.to_string(); }
std::ostream& operator<<(std::ostream& os, const ActorAddr& addr) { return os << addr.to_string(); }
std::ostream& operator<<(std::ostream& os, const PortAddr& addr) { return os << addr.to_string(); }

}  // namespace postal::runtime
