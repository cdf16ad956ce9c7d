// address.h — `ProcAddr`, `ActorAddr` and `PortAddr`: an id plus the location to reach it.
//
// R-ADDR-4: an address is `id@location`, where the id (ids.h) says who the message is for and
// the location (location.h) says how to get there. R-ADDR-3: a proc owns a message by its id
// only; the location is routing data.
//
// Text
//   ProcAddr   `procuid@location`               e.g. `host@tcp://127.0.0.1:4000`
//   ActorAddr  `actoruid.procuid@location`      e.g. `worker~3xYz.host@gw.tcp://127.0.0.1:4000`
//   PortAddr   `actoruid.procuid:port@location`
//              e.g. `pinger.procone:h00ff00ff00ff00ff@ipc:///tmp/x.sock`
//   Ids never contain '@', so the first '@' separates id from location (an ipc location may
//   itself contain '@', as in `ipc://@name`).
//
// Guarantees (R-ADDR-5)
//   Every address prints one way and parses back equal: `parse(a.to_string()) == a`. Equality
//   and the hash cover both id and location. Copies are cheap: ids are a few words and the
//   location is one shared_ptr.
//
// Failure
//   `parse` never throws or crashes; it returns `InvalidArgument` that quotes the input and names
//   the problem: a missing '@', a bad label (quoted, with the rule), a bad uid, a bad port, a bad
//   location or channel — and says what to write instead. Loading an address with cereal from
//   invalid content throws `cereal::Exception`; the wire layer converts it to a status.
#ifndef POSTAL_RUNTIME_ADDRESS_H_
#define POSTAL_RUNTIME_ADDRESS_H_

#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include <cereal/cereal.hpp>

#include "absl/status/statusor.h"
#include "postal/runtime/ids.h"
#include "postal/runtime/location.h"
#include "postal/wire/wire_archive.h"

namespace postal::runtime {

struct ActorAddr;
struct PortAddr;

struct ProcAddr {
  ProcId id;
  Location location;

  // The address of actor `uid` in this proc.
  ActorAddr actor(Uid uid) const;

  std::string to_string() const;
  static absl::StatusOr<ProcAddr> parse(std::string_view text);

  friend bool operator==(const ProcAddr&, const ProcAddr&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ProcAddr& addr) {
    return H::combine(std::move(h), addr.id, addr.location);
  }
  template <class Archive>
  void serialize(Archive& ar) {
    ar(cereal::make_nvp("id", id), cereal::make_nvp("location", location));
  }
};

struct ActorAddr {
  ActorId id;
  Location location;

  // The address of this actor's proc.
  ProcAddr proc_addr() const { return ProcAddr{id.proc, location}; }
  // The address of `port` on this actor.
  PortAddr port(Port port) const;

  std::string to_string() const;
  static absl::StatusOr<ActorAddr> parse(std::string_view text);

  friend bool operator==(const ActorAddr&, const ActorAddr&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ActorAddr& addr) {
    return H::combine(std::move(h), addr.id, addr.location);
  }
  template <class Archive>
  void serialize(Archive& ar) {
    ar(cereal::make_nvp("id", id), cereal::make_nvp("location", location));
  }
};

struct PortAddr {
  PortId id;
  Location location;

  // The address of the actor that owns this port.
  ActorAddr actor_addr() const { return ActorAddr{id.actor, location}; }

  std::string to_string() const;
  static absl::StatusOr<PortAddr> parse(std::string_view text);

  friend bool operator==(const PortAddr&, const PortAddr&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const PortAddr& addr) {
    return H::combine(std::move(h), addr.id, addr.location);
  }
  // cereal: the id, then the location. On postal's wire archives the bytes of a thread's few
  // most recent port addresses are memoized (a reply-to port repeats in every message of a
  // stream): a repeat is one copy out and one comparison in, same bytes (address.cc).
  template <class Archive>
  void save(Archive& ar) const {
    if constexpr (std::is_same_v<Archive, wire::WireOutputArchive>) {
      save_wire(ar);
    } else {
      ar(cereal::make_nvp("id", id), cereal::make_nvp("location", location));
    }
  }
  template <class Archive>
  void load(Archive& ar) {
    if constexpr (std::is_same_v<Archive, wire::WireInputArchive>) {
      load_wire(ar);
    } else {
      ar(cereal::make_nvp("id", id), cereal::make_nvp("location", location));
    }
  }

 private:
  void save_wire(wire::WireOutputArchive& ar) const;
  void load_wire(wire::WireInputArchive& ar);
};

inline ActorAddr ProcAddr::actor(Uid uid) const { return ActorAddr{ActorId{id, uid}, location}; }
inline PortAddr ActorAddr::port(Port port) const { return PortAddr{PortId{id, port}, location}; }

std::ostream& operator<<(std::ostream& os, const ProcAddr& addr);
std::ostream& operator<<(std::ostream& os, const ActorAddr& addr);
std::ostream& operator<<(std::ostream& os, const PortAddr& addr);

}  // namespace postal::runtime

#endif  // POSTAL_RUNTIME_ADDRESS_H_
