// ids.h — `ProcId`, `ActorId`, `Port` and `PortId`: who a message is for.
//
// R-ADDR-3: identity is `ProcId{uid}`, `ActorId{proc, uid}`, `PortId{actor, port}` with
// `Port = Ephemeral(u64) | Handler(typehash) | Control(kind)`. A proc owns a message by its id;
// where the proc can be reached (its `Location`, see location.h) is only routing data, and the
// address types in address.h pair the two.
//
// Text
//   ProcId    `procuid`                    e.g. `host`, `proc~3xYz`
//   ActorId   `actoruid.procuid`           e.g. `pinger.host`
//   Port      `e<decimal>`                 ephemeral port index, e.g. `e0`
//             `h<16 lowercase hex digits>` handler port keyed by a type hash,
//                                          e.g. `h00ff00ff00ff00ff`
//             `c<decimal>`                 control port, e.g. `c1`
//   PortId    `actoruid.procuid:port`      e.g. `pinger.host:h00ff00ff00ff00ff`
//   Uids contain no '.', ':' or '@' (see uid.h), so the separators are unambiguous. Decimals are
//   canonical (no sign, no leading zero). Every value prints one way and parses back equal.
//
// Value semantics
//   All four are small copyable values with `==` and an `AbslHashValue` consistent with it.
//   Default construction gives the unlabelled instance-0 uids and port `e0`; it exists for
//   deserialization.
//
// Failure
//   `parse` never throws or crashes; it returns `InvalidArgument` naming the input, the part that
//   is wrong (uid, port, a missing separator) and the form to write. Loading any of these with
//   cereal from invalid content throws `cereal::Exception`; the wire layer converts it.
#ifndef POSTAL_RUNTIME_IDS_H_
#define POSTAL_RUNTIME_IDS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include <cereal/cereal.hpp>

#include "absl/status/statusor.h"
#include "postal/runtime/uid.h"

namespace postal::runtime {

struct ProcId {
  Uid uid;

  std::string to_string() const { return uid.to_string(); }
  static absl::StatusOr<ProcId> parse(std::string_view text);

  friend bool operator==(const ProcId&, const ProcId&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ProcId& id) {
    return H::combine(std::move(h), id.uid);
  }
  template <class Archive>
  void serialize(Archive& ar) {
    ar(cereal::make_nvp("uid", uid));
  }
};

struct ActorId {
  ProcId proc;
  Uid uid;

  std::string to_string() const;
  static absl::StatusOr<ActorId> parse(std::string_view text);

  friend bool operator==(const ActorId&, const ActorId&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ActorId& id) {
    return H::combine(std::move(h), id.proc, id.uid);
  }
  template <class Archive>
  void serialize(Archive& ar) {
    ar(cereal::make_nvp("proc", proc), cereal::make_nvp("uid", uid));
  }
};

class Port {
 public:
  enum class Kind : std::uint8_t { kEphemeral = 0, kHandler = 1, kControl = 2 };

  // Port `e0`.
  Port() = default;

  // R-PORT-1: an ephemeral port index allocated by a mailbox.
  static Port ephemeral(std::uint64_t index) { return Port(Kind::kEphemeral, index); }
  // R-PORT-2: the handler port for the message type whose stable hash is `typehash`.
  static Port handler(std::uint64_t typehash) { return Port(Kind::kHandler, typehash); }
  // A runtime control port.
  static Port control(std::uint64_t kind) { return Port(Kind::kControl, kind); }

  Kind kind() const { return kind_; }
  std::uint64_t value() const { return value_; }

  std::string to_string() const;
  static absl::StatusOr<Port> parse(std::string_view text);

  friend bool operator==(const Port&, const Port&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const Port& port) {
    return H::combine(std::move(h), port.kind_, port.value_);
  }

  // cereal: stored as (kind, value). `load` throws `cereal::Exception` on an unknown kind.
  template <class Archive>
  void save(Archive& ar) const {
    ar(cereal::make_nvp("kind", static_cast<std::uint8_t>(kind_)),
       cereal::make_nvp("value", value_));
  }
  template <class Archive>
  void load(Archive& ar) {
    std::uint8_t kind = 0;
    ar(cereal::make_nvp("kind", kind), cereal::make_nvp("value", value_));
    if (kind > static_cast<std::uint8_t>(Kind::kControl)) {
      throw cereal::Exception("bad port: unknown port kind " + std::to_string(kind) +
                              "; expected 0 (ephemeral), 1 (handler) or 2 (control)");
    }
    kind_ = static_cast<Kind>(kind);
  }

 private:
  Port(Kind kind, std::uint64_t value) : kind_(kind), value_(value) {}

  Kind kind_ = Kind::kEphemeral;
  std::uint64_t value_ = 0;
};

struct PortId {
  ActorId actor;
  Port port;

  std::string to_string() const;
  static absl::StatusOr<PortId> parse(std::string_view text);

  friend bool operator==(const PortId&, const PortId&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const PortId& id) {
    return H::combine(std::move(h), id.actor, id.port);
  }
  template <class Archive>
  void serialize(Archive& ar) {
    ar(cereal::make_nvp("actor", actor), cereal::make_nvp("port", port));
  }
};

std::ostream& operator<<(std::ostream& os, const ProcId& id);
std::ostream& operator<<(std::ostream& os, const ActorId& id);
std::ostream& operator<<(std::ostream& os, Port::Kind kind);
std::ostream& operator<<(std::ostream& os, const Port& port);
std::ostream& operator<<(std::ostream& os, const PortId& id);

}  // namespace postal::runtime

#endif  // POSTAL_RUNTIME_IDS_H_
