// location.h — `ChannelAddr` (where a channel listens) and `Location` (how to reach a proc).
//
// ChannelAddr (R-ADDR-4) is one of three transports, with these text forms:
//   inproc://N                 N a decimal u64: a channel inside this process.
//   ipc:///absolute/path       a Unix socket at a filesystem path.
//   ipc://@abstract-name       a Unix socket in the Linux abstract namespace.
//   tcp://host:port            host a hostname or IPv4 address, or an IPv6 address in brackets
//                              (`tcp://[::1]:4000`); port 0-65535.
// Normalization: hostnames are case-insensitive and stored lowercase; IPv6 addresses are stored
// in their canonical form (`[0:0::1]` becomes `[::1]`); decimals have no sign or leading zero.
// Ipc paths and abstract names are at most 107 bytes (the size of `sun_path` less its NUL) and
// contain no control characters. So every ChannelAddr has exactly one text form, and
// `parse(c.to_string()) == c`. A default-constructed ChannelAddr is `inproc://0`.
//
// Location (R-ADDR-4) is `Addr(ChannelAddr) | Via(Uid, Location)`: a channel address, possibly
// behind gateways. `via(gw, inner)` means "send to gateway `gw`, which continues to `inner`"
// (R-GW-1 peels one via per hop). The text form lists the vias outermost first, each followed by
// '.', then the channel URL:
//   tcp://127.0.0.1:4000                  Addr(tcp://127.0.0.1:4000)
//   gw1.gw2.tcp://127.0.0.1:4000          Via(gw1, Via(gw2, Addr(tcp://127.0.0.1:4000)))
// Uids contain neither '.' nor ':', so parsing finds the channel scheme as the token before the
// first "://" and splits everything before it on '.'.
//
// Value semantics and cost
//   Location is an immutable value whose copy is one pointer copy: its representation is
//   interned, one per distinct location for the life of the process (as labels are, label.h), so
//   copying and dropping an address touches no reference count — every envelope copies two, and
//   the proc's own location is shared by all its actors on every thread. Making a location
//   (`addr`, `via`, `inner`, `parse`) looks it up in the intern table under a mutex, and
//   allocates the first time only. What network input may add to the table is bounded (`parse`
//   below); what the process makes itself is not, like its labels. A default-constructed Location is `inproc://0` with no vias.
//   Equality and the hash compare the vias and the channel.
//
// Failure
//   `parse` and the fallible factories never throw or crash; they return `InvalidArgument` that
//   quotes the input, names what is wrong (unknown scheme, bad host, bad port, bad via) and lists
//   the accepted forms. `via_uid()` and `inner()` have the precondition `is_via()`; calling them
//   on a Location without a via is a programming error and aborts with a message. Loading either
//   type with cereal from invalid text throws `cereal::Exception`; the wire layer converts it.
#ifndef POSTAL_RUNTIME_LOCATION_H_
#define POSTAL_RUNTIME_LOCATION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cereal/cereal.hpp>
#include <cereal/types/string.hpp>

#include "absl/status/statusor.h"
#include "postal/runtime/uid.h"
#include "postal/wire/text_field.h"

namespace postal::runtime {

class ChannelAddr {
 public:
  enum class Transport : std::uint8_t { kInproc = 0, kIpc = 1, kTcp = 2, kNats = 3 };

  // Longest ipc path or abstract name, in bytes.
  static constexpr std::size_t kMaxIpcPath = 107;

  // `inproc://0`.
  ChannelAddr() = default;

  static ChannelAddr inproc(std::uint64_t number);
  // `ipc:///absolute/path`; `path` must start with '/'.
  static absl::StatusOr<ChannelAddr> ipc(std::string_view path);
  // `ipc://@name`; `name` is given without the '@'.
  static absl::StatusOr<ChannelAddr> ipc_abstract(std::string_view name);
  // `tcp://host:port`; an IPv6 `host` may be given with or without brackets.
  static absl::StatusOr<ChannelAddr> tcp(std::string_view host, std::uint16_t port);
  // `nats://host:port/subject`: a proc reached through the NATS server (or cluster) at
  // host:port, under `subject` — 1 to 16 dot-separated tokens of [A-Za-z0-9_-], at most 128
  // bytes, no wildcards (routing/src/nats_tunnel.h).
  static absl::StatusOr<ChannelAddr> nats(std::string_view host, std::uint16_t port,
                                          std::string_view subject);
  static constexpr std::size_t kMaxNatsSubject = 128;

  Transport transport() const { return transport_; }
  // inproc: the channel number; 0 for the other transports.
  std::uint64_t number() const { return transport_ == Transport::kInproc ? number_ : 0; }
  // tcp, nats: the host without brackets (e.g. "::1", "127.0.0.1", "example.org"); "" otherwise.
  std::string_view host() const { return has_host() ? std::string_view(text_) : std::string_view(); }
  // tcp, nats: the port; 0 otherwise.
  std::uint16_t port() const { return has_host() ? static_cast<std::uint16_t>(number_) : 0; }
  // nats: the proc's subject; "" otherwise.
  std::string_view subject() const {
    return transport_ == Transport::kNats ? std::string_view(subject_) : std::string_view();
  }
  // ipc: the absolute path, or the abstract name without its '@'; "" otherwise.
  std::string_view path() const {
    return transport_ == Transport::kIpc ? std::string_view(text_) : std::string_view();
  }
  // ipc: whether this is an abstract-namespace socket.
  bool is_abstract() const { return abstract_; }

  std::string to_string() const;
  static absl::StatusOr<ChannelAddr> parse(std::string_view text);

  friend bool operator==(const ChannelAddr&, const ChannelAddr&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ChannelAddr& addr) {
    return H::combine(std::move(h), addr.transport_, addr.abstract_, addr.number_, addr.text_,
                      addr.subject_);
  }

  // cereal: stored as the URL text; `load_minimal` throws `cereal::Exception` on invalid text.
  template <class Archive>
  std::string save_minimal(const Archive&) const {
    return to_string();
  }
  template <class Archive>
  void load_minimal(const Archive&, const std::string& text) {
    absl::StatusOr<ChannelAddr> parsed = parse(text);
    if (!parsed.ok()) throw cereal::Exception(std::string(parsed.status().message()));
    *this = std::move(*parsed);
  }

 private:
  Transport transport_ = Transport::kInproc;
  bool abstract_ = false;     // ipc only.
  std::uint64_t number_ = 0;  // inproc number or tcp port.
  std::string text_;          // tcp/nats host (normalized, no brackets) or ipc path / name.
  std::string subject_;       // nats only.

  bool has_host() const { return transport_ == Transport::kTcp || transport_ == Transport::kNats; }
};

class Location {
 public:
  // `inproc://0`, no vias. Does not allocate.
  Location() = default;

  static Location addr(ChannelAddr channel);
  static Location via(Uid gateway, Location inner);

  bool is_via() const { return !vias().empty(); }
  // The outermost via. Precondition: is_via().
  const Uid& via_uid() const;
  // This location with the outermost via peeled. Precondition: is_via().
  Location inner() const;
  // All vias, outermost first.
  const std::vector<Uid>& vias() const { return rep().vias; }
  // The channel address under all the vias.
  const ChannelAddr& channel() const { return rep().addr; }

  std::string to_string() const;
  // Under a `wire::UntrustedScope` (decoding network input), a location new to the intern table
  // counts against the untrusted budget (default 65 536): past it, `parse` of a location the
  // table does not hold fails with ResourceExhausted — its envelope fails to decode — while
  // known locations keep parsing and local parses are never refused (R-FLOW-4, as for labels).
  static absl::StatusOr<Location> parse(std::string_view text);
  static void set_untrusted_budget(std::size_t locations);
  static std::size_t untrusted_budget();
  static std::size_t untrusted_count();  // how many network input has added

  // Every rep is interned, so equal locations share one: equality and the hash are the
  // pointer's (the default location's null stands for the interned default rep).
  friend bool operator==(const Location& a, const Location& b) {
    return a.rep_ == b.rep_ || a.canonical() == b.canonical();
  }
  template <typename H>
  friend H AbslHashValue(H h, const Location& location) {
    return H::combine(std::move(h), location.canonical());
  }

  // cereal: stored as the text form (wire/text_field.h: the bytes of a std::string, written from
  // and read into views); `load` throws `cereal::Exception` on invalid text.
  template <class Archive>
  void save(Archive& ar) const {
    wire::save_text(ar, cereal_text());
  }
  template <class Archive>
  void load(Archive& ar) {
    *this = from_cereal_text(wire::load_text(ar));
  }
  // to_string and parse for cereal, memoized per thread (runtime/src/text_memo.h); the text is
  // the memo's (or a constant), valid until this thread renders a few other locations. The parse
  // throws cereal::Exception.
  std::string_view cereal_text() const;
  static Location from_cereal_text(std::string_view text);

 private:
  struct Rep;
  // inner() of an interned rep, once computed (a gateway peels its hop off every message it
  // forwards). A copy starts empty: only the interned rep keeps it.
  struct InnerMemo {
    mutable std::atomic<const Rep*> rep{nullptr};
    InnerMemo() = default;
    InnerMemo(const InnerMemo&) {}
    InnerMemo& operator=(const InnerMemo&) { return *this; }
  };
  struct Rep {
    std::vector<Uid> vias;  // Outermost first.
    ChannelAddr addr;
    InnerMemo inner{};
  };
  struct RepHash;
  struct RepEq;
  explicit Location(const Rep* rep) : rep_(rep) {}
  // The interned representation equal to `rep` (location.cc).
  // Null when `untrusted` and the rep is new past the untrusted budget (R-FLOW-4).
  static const Rep* intern(Rep rep, bool untrusted = false);
  const Rep& rep() const;
  const Rep* canonical() const { return rep_ != nullptr ? rep_ : interned_default(); }
  static const Rep* interned_default();

  const Rep* rep_ = nullptr;  // Interned, never freed; null means the default, `inproc://0`.
};

static_assert(sizeof(Location) == sizeof(void*), "a Location copy is one pointer copy");

std::ostream& operator<<(std::ostream& os, ChannelAddr::Transport transport);
std::ostream& operator<<(std::ostream& os, const ChannelAddr& addr);
std::ostream& operator<<(std::ostream& os, const Location& location);

}  // namespace postal::runtime

#endif  // POSTAL_RUNTIME_LOCATION_H_
