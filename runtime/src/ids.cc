#include "postal/runtime/ids.h"

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace postal::runtime {
namespace {

using address_internal::quote;

constexpr std::string_view kPortForms =
    "a port is e<decimal> (ephemeral), h<16 lowercase hex digits> (handler) or c<decimal> "
    "(control), e.g. e0, h00ff00ff00ff00ff, c1";

absl::Status wrap(std::string_view what, std::string_view text, const absl::Status& inner) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad ", std::string(what), " ", quote(text), ": ", inner.message()));
}

absl::StatusOr<std::uint64_t> parse_hex16(std::string_view digits) {
  if (digits.size() != 16) {
    return absl::InvalidArgumentError(absl::StrCat("the type hash ", quote(digits), " has ",
                                                   digits.size(),
                                                   " digits; write exactly 16 hex digits"));
  }
  std::uint64_t value = 0;
  for (char c : digits) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (digit < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the type hash ", quote(digits), " has the character ",
                       quote(std::string_view(&c, 1)), "; write lowercase hex digits 0-9a-f"));
    }
    value = (value << 4) | static_cast<std::uint64_t>(digit);
  }
  return value;
}

}  // namespace

absl::StatusOr<ProcId> ProcId::parse(std::string_view text) {
  absl::StatusOr<Uid> uid = Uid::parse(text);
  if (!uid.ok()) return wrap("proc id", text, uid.status());
  return ProcId{*uid};
}

std::string ActorId::to_string() const {
  return absl::StrCat(uid.to_string(), ".", proc.to_string());
}

absl::StatusOr<ActorId> ActorId::parse(std::string_view text) {
  const std::size_t dot = text.find('.');
  if (dot == std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad actor id ", quote(text), ": missing '.'; write actoruid.procuid, e.g. pinger.host"));
  }
  if (text.find('.', dot + 1) != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad actor id ", quote(text),
                     ": more than one '.'; write actoruid.procuid, e.g. pinger.host"));
  }
  absl::StatusOr<Uid> actor = Uid::parse(text.substr(0, dot));
  if (!actor.ok()) return wrap("actor id", text, actor.status());
  absl::StatusOr<Uid> proc = Uid::parse(text.substr(dot + 1));
  if (!proc.ok()) return wrap("actor id", text, proc.status());
  return ActorId{ProcId{*proc}, *actor};
}

std::string Port::to_string() const {
  switch (kind_) {
    case Kind::kEphemeral:
      return absl::StrCat("e", value_);
    case Kind::kHandler:
      return absl::StrCat("h", absl::Hex(value_, absl::kZeroPad16));
    case Kind::kControl:
      return absl::StrCat("c", value_);
  }
  return "?";  // Unreachable: kind_ is always one of the three.
}

absl::StatusOr<Port> Port::parse(std::string_view text) {
  if (text.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad port \"\": it is empty; ", std::string(kPortForms)));
  }
  const std::string_view rest = text.substr(1);
  switch (text.front()) {
    case 'e':
    case 'c': {
      absl::StatusOr<std::uint64_t> value =
          address_internal::parse_decimal(rest, "the port number", UINT64_MAX);
      if (!value.ok()) return wrap("port", text, value.status());
      return text.front() == 'e' ? ephemeral(*value) : control(*value);
    }
    case 'h': {
      absl::StatusOr<std::uint64_t> value = parse_hex16(rest);
      if (!value.ok()) return wrap("port", text, value.status());
      return handler(*value);
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("bad port ", quote(text), ": unknown port kind ", quote(text.substr(0, 1)),
                       "; ", std::string(kPortForms)));
  }
}

std::string PortId::to_string() const {
  return absl::StrCat(actor.to_string(), ":", port.to_string());
}

absl::StatusOr<PortId> PortId::parse(std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad port id ", quote(text),
                     ": missing ':port'; write actoruid.procuid:port, e.g. pinger.host:e0"));
  }
  absl::StatusOr<ActorId> actor = ActorId::parse(text.substr(0, colon));
  if (!actor.ok()) return wrap("port id", text, actor.status());
  absl::StatusOr<Port> port = Port::parse(text.substr(colon + 1));
  if (!port.ok()) return wrap("port id", text, port.status());
  return PortId{*actor, *port};
}

std::ostream& operator<<(std::ostream& os, const ProcId& id) { return os << id.to_string(); }
std::ostream& operator<<(std::ostream& os, const ActorId& id) { return os << id.to_string(); }
std::ostream& operator<<(std::ostream& os, Port::Kind kind) {
  switch (kind) {
    case Port::Kind::kEphemeral:
      return os << "ephemeral";
    case Port::Kind::kHandler:
      return os << "handler";
    case Port::Kind::kControl:
      return os << "control";
  }
  return os << "Port::Kind(" << static_cast<int>(kind) << ")";
}
std::ostream& operator<<(std::ostream& os, const Port& port) { return os << port.to_string(); }
std::ostream& operator<<(std::ostream& os, const PortId& id) { return os << id.to_string(); }

}  // namespace postal::runtime
