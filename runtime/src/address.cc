#include "postal/runtime/address.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "text_memo.h"

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

namespace {

// The bytes of a thread's recent port addresses, both ways (address.h).
thread_local internal::Memo<PortAddr, std::string> saved_ports;
thread_local internal::Memo<std::string, PortAddr> loaded_ports;

// A memoized encoding is kept only this long; a longer address takes the plain path.
constexpr size_t kMaxMemoBytes = 512;

// The length of the encoded port address at the start of `in` — three texts (u64 size, bytes)
// around the port's kind (u8) and value (u64), as the plain path writes them — or 0 when `in`
// does not hold one whole (the plain path then reports what is wrong).
size_t encoded_length(std::string_view in) {
  size_t at = 0;
  auto text = [&]() {
    uint64_t size = 0;
    if (in.size() - at < sizeof size) return false;
    std::memcpy(&size, in.data() + at, sizeof size);
    at += sizeof size;
    if (size > in.size() - at) return false;
    at += static_cast<size_t>(size);
    return true;
  };
  if (!text() || !text()) return 0;  // the proc's uid, the actor's
  if (in.size() - at < 9) return 0;  // the port
  at += 9;
  if (!text()) return 0;             // the location
  return at;
}

}  // namespace

void PortAddr::save_wire(wire::WireOutputArchive& ar) const {
  if (const std::string* bytes = saved_ports.find(*this)) {
    ar.write(bytes->data(), bytes->size());
    return;
  }
  const size_t from = ar.position();
  ar(id, location);
  const std::string_view bytes = ar.written_since(from);
  if (bytes.size() <= kMaxMemoBytes) saved_ports.put(*this, std::string(bytes));
}

void PortAddr::load_wire(wire::WireInputArchive& ar) {
  const size_t length = ar.swapped() ? 0 : encoded_length(ar.rest());
  const std::string_view bytes = ar.rest().substr(0, length);
  if (length != 0) {
    if (const PortAddr* known = loaded_ports.find(bytes)) {
      *this = *known;
      ar.skip(length);
      return;
    }
  }
  ar(id, location);
  if (length != 0 && length <= kMaxMemoBytes) loaded_ports.put(bytes, *this);
}

std::ostream& operator<<(std::ostream& os, const ProcAddr& addr) { return os << addr.to_string(); }
std::ostream& operator<<(std::ostream& os, const ActorAddr& addr) { return os << addr.to_string(); }
std::ostream& operator<<(std::ostream& os, const PortAddr& addr) { return os << addr.to_string(); }

}  // namespace postal::runtime
