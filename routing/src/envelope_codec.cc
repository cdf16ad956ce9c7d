// Wire v2 DATA bodies: docs/wire.md §6 (layout) and §7 (the session dictionary).
#include "envelope_codec.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "le_bytes.h"
#include "postal/wire/absl_compat.h"
#include "postal/wire/type_registry.h"
#include "postal/wire/untrusted_scope.h"

namespace postal::routing::internal::v2 {
namespace {

using runtime::ActorAddr;
using runtime::DeliveryFailure;
using runtime::MessageEnvelope;
using runtime::Port;
using runtime::PortAddr;

// Flags of the fixed part (§6.2).
constexpr uint16_t kReturnUndeliverable = 1 << 0;
constexpr uint16_t kHasNextHop = 1 << 1;
constexpr uint16_t kChunked = 1 << 2;
constexpr uint16_t kKnownFlags = kReturnUndeliverable | kHasNextHop;
// §6.5: a failure entry's `flags` for a transport failure other than Overloaded.
constexpr uint16_t kFailureMaybeDelivered = 1 << 0;
// A failure target that is not an address travels in the detail (DeliveryFailure's target is
// text until it becomes structured; §6.5 has only an address ref).
constexpr std::string_view kTargetTag = "[target ";

void put_text16(std::string& out, std::string_view s) {
  put<uint16_t>(out, static_cast<uint16_t>(s.size()));
  out.append(s);
}

using Reader = ByteReader;

absl::Status stream_error(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("DATA: ", sv(what)));
}

// A count is plausible when its elements, at their minimum size, fit in what is left (R-FLOW-4).
bool fits(uint64_t count, size_t min_bytes, const Reader& r) {
  return count <= r.left() / min_bytes;
}

// A failure target: a port address, an actor address, or other text.
FailureTarget split_target(const std::string& target) {
  FailureTarget t;
  if (absl::StatusOr<PortAddr> port = PortAddr::parse(target); port.ok()) {
    t.actor = port->actor_addr().to_string();
    t.port_kind = static_cast<uint8_t>(port->id.port.kind());
    t.port_value = port->id.port.value();
  } else if (absl::StatusOr<ActorAddr> actor = ActorAddr::parse(target); actor.ok()) {
    t.actor = actor->to_string();
  }
  return t;
}

std::optional<Port> port_of(uint8_t kind, uint64_t value) {
  switch (kind) {
    case 0:
      return Port::ephemeral(value);
    case 1:
      return Port::handler(value);
    case 2:
      return Port::control(value);
    default:
      return std::nullopt;
  }
}

}  // namespace

absl::StatusOr<uint32_t> EnvelopeEncoder::ref(EntryKind kind, const std::string& value,
                                              std::string& defines, uint16_t& define_count) {
  auto& ids = kind == EntryKind::kActor ? actor_ids_ : name_ids_;
  if (auto it = ids.find(value); it != ids.end()) {
    entries_[it->second].last_used = frame_;
    return it->second;
  }
  const uint64_t cost = kEntryOverhead + value.size();
  uint32_t id;
  if (entries_.size() < limits_.max_entries && bytes_ + cost <= limits_.max_bytes) {
    id = static_cast<uint32_t>(entries_.size());
    entries_.push_back(Entry{kind, value, frame_});
    defined_.push_back(++definitions_);
    bytes_ += cost;
    undo_.emplace_back(id, std::nullopt);
  } else {
    // §7.3: redefine the least recently used id that this frame does not reference.
    uint32_t victim = kNone;
    for (uint32_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].last_used == frame_) continue;
      if (victim == kNone || entries_[i].last_used < entries_[victim].last_used) victim = i;
    }
    if (victim == kNone ||
        bytes_ - (kEntryOverhead + entries_[victim].value.size()) + cost > limits_.max_bytes) {
      return absl::ResourceExhaustedError(
          "the envelope needs more of the session dictionary than it may use in one frame");
    }
    Entry& old = entries_[victim];
    undo_.emplace_back(victim, old);
    (old.kind == EntryKind::kActor ? actor_ids_ : name_ids_).erase(old.value);
    bytes_ = bytes_ - (kEntryOverhead + old.value.size()) + cost;
    old = Entry{kind, value, frame_};
    defined_[victim] = ++definitions_;
    id = victim;
  }
  ids.emplace(value, id);
  put<uint32_t>(defines, id);
  put<uint8_t>(defines, static_cast<uint8_t>(kind));
  put_text16(defines, value);
  ++define_count;
  return id;
}

void EnvelopeEncoder::roll_back() {
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
    const auto& [id, before] = *it;
    Entry& now = entries_[id];
    defined_[id] = ++definitions_;  // a cached ref to what this frame defined is stale now
    (now.kind == EntryKind::kActor ? actor_ids_ : name_ids_).erase(now.value);
    bytes_ -= kEntryOverhead + now.value.size();
    if (before) {
      now = *before;
      (now.kind == EntryKind::kActor ? actor_ids_ : name_ids_).emplace(now.value, id);
      bytes_ += kEntryOverhead + now.value.size();
    } else {
      entries_.pop_back();  // new ids are undone newest first, so this is `id`
      defined_.pop_back();
    }
  }
  undo_.clear();
}

absl::StatusOr<uint32_t> EnvelopeEncoder::ref_actor(const ActorAddr& addr, std::string& defines,
                                                    uint16_t& define_count) {
  for (Recent& recent : recent_) {
    if (!recent.set || !(recent.addr == addr)) continue;
    const AddrRef r = recent.ref;
    if (r.id < entries_.size() && defined_[r.id] == r.defined) {
      entries_[r.id].last_used = frame_;
      return r.id;
    }
    recent.set = false;  // the id was redefined (or undone) since
    break;
  }
  auto remember = [&](AddrRef r) {
    Recent& slot = recent_[next_recent_++ % kRecent];
    slot.addr = addr;
    slot.ref = r;
    slot.set = true;
  };
  if (auto it = by_addr_.find(addr); it != by_addr_.end()) {
    const AddrRef r = it->second;
    if (r.id < entries_.size() && defined_[r.id] == r.defined) {
      entries_[r.id].last_used = frame_;
      remember(r);
      return r.id;
    }
    by_addr_.erase(it);  // the id was redefined (or undone) since
  }
  const std::string text = addr.to_string();
  if (text.size() > kMaxAddrText) {
    return absl::OutOfRangeError(
        absl::StrCat("an address of ", text.size(), " bytes exceeds the wire's ", kMaxAddrText));
  }
  absl::StatusOr<uint32_t> id = ref(EntryKind::kActor, text, defines, define_count);
  if (!id.ok()) return id;
  if (by_addr_.size() >= 2 * static_cast<size_t>(limits_.max_entries)) by_addr_.clear();
  by_addr_[addr] = AddrRef{*id, defined_[*id]};
  remember(AddrRef{*id, defined_[*id]});
  return id;
}

absl::Status EnvelopeEncoder::encode(uint64_t seq, MessageEnvelope& env, std::string& out,
                                     uint64_t max_body, bool with_payload, bool chunked) {
  // What can fail the envelope before a ref is made is checked first; a ref that fails later
  // (an address over the wire's bound, a full dictionary) rolls this frame's DEFINEs back.
  const bool has_hop = env.has_explicit_next_hop() && env.next_hop() != env.dest();
  std::vector<FailureTarget> targets;
  for (const DeliveryFailure& f : env.delivery_failures())
    targets.push_back(split_target(f.target));
  for (const FailureTarget& t : targets) {
    if (t.actor.size() > kMaxAddrText) {
      return absl::OutOfRangeError(absl::StrCat("an address of ", t.actor.size(),
                                                " bytes exceeds the wire's ", kMaxAddrText));
    }
  }
  if (env.data().type_hash() == 0) return absl::InvalidArgumentError("the envelope has no payload");
  // §9.7: a payload streaming through a gateway has a size but no bytes yet; it can only
  // travel as a transfer.
  std::string_view payload;
  uint64_t payload_len = 0;
  if (const std::shared_ptr<wire::ByteStream>& stream = env.data().stream()) {
    if (!chunked) return absl::InvalidArgumentError("a streamed payload travels only in chunks");
    payload_len = stream->size();
  } else {
    // Only an inline payload is copied into the frame; a sliced or chunked one needs its size
    // (so a gathered payload is not joined here, §6.7).
    absl::StatusOr<wire::PayloadBytes*> bytes = env.data().serialized();
    if (!bytes.ok()) return bytes.status();
    payload_len = (*bytes)->size();
    if (with_payload && !chunked) payload = (*bytes)->contiguous();
  }
  if (env.delivery_failures().size() > std::numeric_limits<uint16_t>::max() ||
      env.headers().size() > std::numeric_limits<uint16_t>::max()) {
    return absl::InvalidArgumentError("too many headers or failures for one frame");
  }

  ++frame_;
  undo_.clear();
  absl::Status failed =
      body(seq, env, has_hop, targets, payload, payload_len, max_body, with_payload, chunked, out);
  if (!failed.ok()) roll_back();
  undo_.clear();
  return failed;
}

absl::Status EnvelopeEncoder::body(uint64_t seq, MessageEnvelope& env, bool has_hop,
                                   const std::vector<FailureTarget>& targets,
                                   std::string_view payload_bytes, uint64_t payload_len,
                                   uint64_t max_body, bool with_payload, bool chunked,
                                   std::string& out) {
  const std::string_view* payload = &payload_bytes;
  std::string defines, headers, failures;
  uint16_t define_count = 0;
  auto actor_ref = [&](const std::string& text) {
    return ref(EntryKind::kActor, text, defines, define_count);
  };
  absl::StatusOr<uint32_t> sender_id = ref_actor(env.sender(), defines, define_count);
  absl::StatusOr<uint32_t> dest_id =
      sender_id.ok() ? ref_actor(env.dest().actor_addr(), defines, define_count) : sender_id;
  absl::StatusOr<uint32_t> hop_id =
      has_hop && dest_id.ok() ? ref_actor(env.next_hop().actor_addr(), defines, define_count)
                              : dest_id;
  if (!hop_id.ok()) return hop_id.status();

  for (const auto& [name, value] : env.headers()) {
    if (!name.empty() && name.size() <= kMaxNameText) {
      absl::StatusOr<uint32_t> id = ref(EntryKind::kName, name, defines, define_count);
      if (!id.ok()) return id.status();
      put<uint32_t>(headers, *id);
    } else {
      put<uint32_t>(headers, kNone);
      put_text16(headers, name.substr(0, std::numeric_limits<uint16_t>::max()));
    }
    put<uint8_t>(headers, static_cast<uint8_t>(value.index()));
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, bool>) {
            put<uint8_t>(headers, v ? 1 : 0);
          } else if constexpr (std::is_same_v<V, std::string>) {
            put<uint32_t>(headers, static_cast<uint32_t>(v.size()));
            headers.append(v);
          } else {
            put<V>(headers, v);
          }
        },
        value);
  }

  for (size_t i = 0; i < env.delivery_failures().size(); ++i) {
    const DeliveryFailure& f = env.delivery_failures()[i];
    const FailureTarget& t = targets[i];
    uint32_t target = kNone;
    std::string detail = f.detail;
    if (!t.actor.empty()) {
      absl::StatusOr<uint32_t> id = actor_ref(t.actor);
      if (!id.ok()) return id.status();
      target = *id;
    } else if (!f.target.empty()) {
      detail = absl::StrCat(sv(kTargetTag), f.target, "] ", detail);
    }
    if (detail.size() > kMaxDetail) detail.resize(kMaxDetail);  // bounded, like its rendering
    put<uint8_t>(failures, static_cast<uint8_t>(f.kind));
    put<uint8_t>(failures, f.kind == runtime::FailureKind::kInvalidReference
                               ? static_cast<uint8_t>(f.invalid)
                               : static_cast<uint8_t>(f.transport));
    // §6.5: an Overloaded failure names its bound in `flags` (R-FLOW-1, R-FLOW-2); another
    // transport failure says there whether the envelope may have been delivered.
    const bool overloaded = f.kind == runtime::FailureKind::kTransport &&
                            f.transport == runtime::TransportReason::kOverloaded;
    put<uint16_t>(failures, overloaded ? static_cast<uint16_t>(f.bound)
                            : f.kind == runtime::FailureKind::kTransport && f.maybe_delivered
                                ? kFailureMaybeDelivered
                                : uint16_t{0});
    put<int32_t>(failures, f.os_errno);
    put<uint64_t>(failures, f.len);
    put<uint64_t>(failures, f.max);
    put<uint64_t>(failures, f.message_type.empty() ? 0 : wire::fnv1a64(f.message_type));
    put<uint32_t>(failures, target);
    put<uint8_t>(failures, t.port_kind);
    put<uint64_t>(failures, t.port_value);
    put_text16(failures, detail);
  }

  const uint64_t total = kFixedBytes + (has_hop ? kNextHopBytes : 0) + defines.size() +
                         headers.size() + failures.size() + (chunked ? 0 : payload_len);
  last_body_ = total;
  if (total > max_body) {
    return absl::OutOfRangeError(
        absl::StrCat("a DATA body of ", total, " bytes exceeds the limit of ", max_body));
  }
  const uint16_t flags = (env.return_undeliverable() ? kReturnUndeliverable : 0) |
                         (has_hop ? kHasNextHop : 0) | (chunked ? kChunked : 0);
  // The fixed part (and next hop) into a local block, then one append: a dozen fields.
  FieldBlock<kFixedBytes + kNextHopBytes> fixed;
  fixed.put<uint64_t>(seq);
  fixed.put<uint16_t>(flags);
  fixed.put<uint8_t>(env.ttl());
  fixed.put<uint8_t>(static_cast<uint8_t>(env.dest().id.port.kind()));
  fixed.put<uint32_t>(*sender_id);
  fixed.put<uint32_t>(*dest_id);
  fixed.put<uint64_t>(env.dest().id.port.value());
  fixed.put<uint64_t>(env.data().type_hash());
  fixed.put<uint64_t>(payload_len);
  fixed.put<uint16_t>(define_count);
  fixed.put<uint16_t>(static_cast<uint16_t>(env.headers().size()));
  fixed.put<uint16_t>(static_cast<uint16_t>(env.delivery_failures().size()));
  fixed.put<uint16_t>(0);
  if (has_hop) {
    fixed.put<uint32_t>(*hop_id);
    fixed.put<uint8_t>(static_cast<uint8_t>(env.next_hop().id.port.kind()));
    fixed.put<uint64_t>(env.next_hop().id.port.value());
  }
  out.append(fixed.data(), fixed.size());
  out.append(defines).append(headers).append(failures);
  if (with_payload && !chunked) out.append(*payload);
  return absl::OkStatus();
}

absl::StatusOr<runtime::EnvelopePtr> EnvelopeDecoder::decode(
    std::string_view body, uint64_t& seq, uint64_t* chunked, uint64_t max_message_bytes,
    const std::shared_ptr<const void>& block) {
  wire::UntrustedScope untrusted;  // DEFINEs come from the network: bounded label interning
  Reader r(body);
  uint16_t flags = 0, define_count = 0, header_count = 0, failure_count = 0, reserved = 0;
  uint8_t ttl = 0, dest_kind = 0;
  uint32_t sender_ref = 0, dest_ref = 0;
  uint64_t dest_value = 0, type_hash = 0, payload_len = 0;
  if (!(r.get(seq) && r.get(flags) && r.get(ttl) && r.get(dest_kind) && r.get(sender_ref) &&
        r.get(dest_ref) && r.get(dest_value) && r.get(type_hash) && r.get(payload_len) &&
        r.get(define_count) && r.get(header_count) && r.get(failure_count) && r.get(reserved))) {
    return stream_error(
        absl::StrCat("truncated: ", body.size(), " bytes, the fixed part is ", kFixedBytes));
  }
  if (chunked != nullptr) *chunked = 0;
  if (flags & kChunked) {  // §6.6, §9.1
    if (chunked == nullptr) return stream_error("a chunked payload where none is allowed");
    if (payload_len == 0 || payload_len > max_message_bytes) {
      return stream_error(absl::StrCat("a chunked payload of ", payload_len,
                                       " bytes; allowed 1 to max_message_bytes (",
                                       max_message_bytes, ")"));
    }
  }
  if (flags & ~(kKnownFlags | kChunked))
    return stream_error(absl::StrCat("unknown flags 0x", absl::Hex(flags)));
  if (type_hash == 0) return stream_error("type hash 0");
  const std::optional<Port> dest_port = port_of(dest_kind, dest_value);
  if (!dest_port) return stream_error(absl::StrCat("unknown port kind ", dest_kind));
  uint32_t hop_ref = kNone;
  std::optional<Port> hop_port;
  if (flags & kHasNextHop) {
    uint8_t kind = 0;
    uint64_t value = 0;
    if (!(r.get(hop_ref) && r.get(kind) && r.get(value))) return stream_error("truncated next hop");
    hop_port = port_of(kind, value);
    if (!hop_port) return stream_error(absl::StrCat("unknown next-hop port kind ", kind));
  }

  // §7.2: DEFINEs apply before any ref of this frame resolves.
  if (!fits(define_count, kMinDefineBytes, r)) return stream_error("DEFINE count past the frame");
  for (uint16_t i = 0; i < define_count; ++i) {
    uint32_t id = 0;
    uint8_t kind = 0;
    uint16_t len = 0;
    std::string_view value;
    if (!(r.get(id) && r.get(kind) && r.get(len) && r.take(len, value))) {
      return stream_error("truncated DEFINE");
    }
    if (id > entries_.size() || id >= limits_.max_entries) {
      return stream_error(absl::StrCat("DEFINE of id ", id, " skips ahead of ", entries_.size()));
    }
    Entry entry;
    entry.kind = static_cast<EntryKind>(kind);
    entry.cost = kEntryOverhead + len;
    if (entry.kind == EntryKind::kActor) {
      if (len == 0 || len > kMaxAddrText) return stream_error("ACTOR entry length out of range");
      absl::StatusOr<ActorAddr> addr = ActorAddr::parse(value);
      if (!addr.ok()) return stream_error(absl::StrCat("ACTOR entry: ", addr.status().message()));
      entry.actor = *std::move(addr);
    } else if (entry.kind == EntryKind::kName) {
      if (len == 0 || len > kMaxNameText) return stream_error("NAME entry length out of range");
      entry.name = std::string(value);
    } else {
      return stream_error(absl::StrCat("unknown DEFINE kind ", kind));
    }
    const uint64_t old_cost = id < entries_.size() ? entries_[id].cost : 0;
    if (bytes_ - old_cost + entry.cost > limits_.max_bytes) {
      return stream_error("DEFINE past the dictionary's byte bound");
    }
    bytes_ = bytes_ - old_cost + entry.cost;
    if (id == entries_.size()) {
      entries_.push_back(std::move(entry));
    } else {
      entries_[id] = std::move(entry);
    }
  }
  auto actor = [&](uint32_t id) -> const ActorAddr* {
    if (id >= entries_.size() || entries_[id].kind != EntryKind::kActor) return nullptr;
    return &entries_[id].actor;
  };
  const ActorAddr* sender = actor(sender_ref);
  const ActorAddr* dest = actor(dest_ref);
  if (sender == nullptr || dest == nullptr)
    return stream_error("sender or dest is not an ACTOR ref");
  auto env = MessageEnvelope::make(*sender, dest->port(*dest_port), wire::Any(), ttl);
  env->set_return_undeliverable(flags & kReturnUndeliverable);
  if (hop_port) {
    const ActorAddr* hop = actor(hop_ref);
    if (hop == nullptr) return stream_error("next hop is not an ACTOR ref");
    PortAddr next = hop->port(*hop_port);
    if (next == env->dest()) return stream_error("a next hop equal to dest is sent empty");
    env->set_next_hop(std::move(next));
  }

  if (!fits(header_count, kMinHeaderBytes, r)) return stream_error("header count past the frame");
  for (uint16_t i = 0; i < header_count; ++i) {
    uint32_t name_ref = 0;
    std::string name;
    if (!r.get(name_ref)) return stream_error("truncated header");
    if (name_ref == kNone) {
      uint16_t len = 0;
      std::string_view text;
      if (!(r.get(len) && r.take(len, text))) return stream_error("truncated header name");
      name = std::string(text);
    } else if (name_ref < entries_.size() && entries_[name_ref].kind == EntryKind::kName) {
      name = entries_[name_ref].name;
    } else {
      return stream_error("a header name is not a NAME ref");
    }
    if (env->headers().contains(name)) return stream_error(absl::StrCat("header ", name, " twice"));
    uint8_t type = 0;
    if (!r.get(type)) return stream_error("truncated header");
    wire::HeaderValue value;
    bool ok = false;
    switch (type) {
      case 0: {
        uint8_t b = 0;
        ok = r.get(b) && b <= 1;
        value = b == 1;
        break;
      }
      case 1: {
        int64_t v = 0;
        ok = r.get(v);
        value = v;
        break;
      }
      case 2: {
        uint64_t v = 0;
        ok = r.get(v);
        value = v;
        break;
      }
      case 3: {
        double v = 0;
        ok = r.get(v);
        value = v;
        break;
      }
      case 4: {
        uint32_t len = 0;
        std::string_view text;
        ok = r.get(len) && r.take(len, text);
        value = std::string(text);
        break;
      }
      default:
        return stream_error(absl::StrCat("unknown header type ", type));
    }
    if (!ok) return stream_error(absl::StrCat("header ", name, ": bad value"));
    env->headers().set_value(name, std::move(value));
  }

  if (!fits(failure_count, kMinFailureBytes, r))
    return stream_error("failure count past the frame");
  for (uint16_t i = 0; i < failure_count; ++i) {
    uint8_t kind = 0, reason = 0, port_kind = 0;
    uint16_t fflags = 0, detail_len = 0;
    int32_t os_errno = 0;
    uint32_t target_ref = 0;
    uint64_t len = 0, max = 0, message_type = 0, port_value = 0;
    std::string_view detail;
    if (!(r.get(kind) && r.get(reason) && r.get(fflags) && r.get(os_errno) && r.get(len) &&
          r.get(max) && r.get(message_type) && r.get(target_ref) && r.get(port_kind) &&
          r.get(port_value) && r.get(detail_len) && r.take(detail_len, detail))) {
      return stream_error("truncated failure");
    }
    if (kind > static_cast<uint8_t>(runtime::FailureKind::kExpired)) {
      return stream_error(absl::StrCat("unknown failure kind ", kind));
    }
    if (detail_len > kMaxDetail) return stream_error("failure detail over 1024 bytes");
    DeliveryFailure f;
    f.kind = static_cast<runtime::FailureKind>(kind);
    std::string prefix;  // a reason this build does not know survives in the detail (§6.5)
    if (f.kind == runtime::FailureKind::kInvalidReference) {
      if (reason > static_cast<uint8_t>(runtime::InvalidReason::kWrongMailboxOwner)) {
        prefix = absl::StrCat("[reason ", reason, "] ");
        reason = 0;
      }
      f.invalid = static_cast<runtime::InvalidReason>(reason);
    } else if (f.kind == runtime::FailureKind::kTransport) {
      if (reason > static_cast<uint8_t>(runtime::TransportReason::kOverloaded)) {
        prefix = absl::StrCat("[reason ", reason, "] ");
        reason = 0;
      }
      f.transport = static_cast<runtime::TransportReason>(reason);
      // §6.5: an Overloaded failure's bound; one this build does not know is kNone.
      if (f.transport == runtime::TransportReason::kOverloaded) {
        if (fflags <= static_cast<uint16_t>(runtime::OverloadBound::kDestinationBytes)) {
          f.bound = static_cast<runtime::OverloadBound>(fflags);
        }
      } else {
        f.maybe_delivered = (fflags & kFailureMaybeDelivered) != 0;
      }
    }
    f.len = len;
    f.max = max;
    f.os_errno = os_errno;
    if (message_type != 0) f.message_type = wire::TypeRegistry::global().name_of(message_type);
    f.detail = absl::StrCat(prefix, sv(detail));
    if (target_ref != kNone) {
      const ActorAddr* target = actor(target_ref);
      if (target == nullptr) return stream_error("a failure target is not an ACTOR ref");
      if (port_kind == kActorItself) {
        f.target = target->to_string();
      } else if (std::optional<Port> port = port_of(port_kind, port_value)) {
        f.target = target->port(*port).to_string();
      } else {
        return stream_error(absl::StrCat("unknown failure target port kind ", port_kind));
      }
    } else if (std::string_view d = f.detail; d.substr(0, kTargetTag.size()) == kTargetTag) {
      const size_t end = d.find("] ");
      if (end != std::string_view::npos) {
        f.target = std::string(d.substr(kTargetTag.size(), end - kTargetTag.size()));
        f.detail = std::string(d.substr(end + 2));
      }
    }
    env->add_failure(std::move(f));
  }

  if (flags & kChunked) {  // the bytes follow in CHUNK frames; the transfer fills them in
    if (r.left() != 0) {
      return stream_error(absl::StrCat(r.left(), " payload bytes in a chunked DATA frame"));
    }
    *chunked = payload_len;
    env->data() = wire::Any::from_bytes(type_hash, std::string());
    return env;
  }
  if (r.left() != payload_len) {
    return stream_error(
        absl::StrCat("payload of ", r.left(), " bytes, the header says ", payload_len));
  }
  if (block != nullptr && payload_len > kSliceOver) {  // §14.3 rule 49
    env->data() = wire::Any::from_slice(type_hash, block, r.rest());
  } else {
    env->data() = wire::Any::from_bytes(type_hash, std::string(r.rest()));
  }
  return env;
}

}  // namespace postal::routing::internal::v2
