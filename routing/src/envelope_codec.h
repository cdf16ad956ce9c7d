// Wire version 2's binary envelope: the body of a DATA frame and the per-session dictionary that
// its address and header-name refs point into (docs/wire.md §6, §7). Routing internal; the
// channel client and server switch to it with the rest of wire v2 (§18).
//
//   EnvelopeEncoder  the sending end of one session: keeps `ActorAddr → id` and `name → id`,
//                    defines what a frame needs in that frame (DEFINE entries), and redefines the
//                    least recently used id when the dictionary is full (§7.3). Never blocks.
//   EnvelopeDecoder  the receiving end: applies a frame's DEFINEs, then resolves its refs.
//                    Checks every count against the bytes left before it allocates (R-FLOW-4,
//                    §14) and every DEFINE against the announced bounds (§7.4).
//
// Both are single-threaded (the channel's I/O thread). A decoder error is a *stream error*
// (InvalidArgument naming the field): the caller ends the connection. An encoder error fails the
// one envelope: OversizedFrame for an address over 4096 bytes, ProtocolMismatch otherwise.
// The payload is cereal's bytes of the user's type, cached in the envelope's `Any` (R-ENV-4);
// the codec copies them, it never serializes them again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "postal/runtime/address.h"
#include "postal/runtime/message_envelope.h"

namespace postal::routing::internal::v2 {

inline constexpr size_t kFixedBytes = 52;          // §6.2
inline constexpr size_t kNextHopBytes = 13;        // §6.3
inline constexpr size_t kMinDefineBytes = 8;       // §7.2: id, kind, len, ≥ 1 byte
inline constexpr size_t kMinHeaderBytes = 6;       // §6.4: a ref, a type, a bool
inline constexpr size_t kMinFailureBytes = 47;     // §6.5
inline constexpr size_t kMaxAddrText = 4096;       // §7.1 ACTOR value
inline constexpr size_t kMaxNameText = 64;         // §7.1 NAME value
inline constexpr size_t kMaxDetail = 1024;         // §6.5
inline constexpr uint32_t kNone = 0xFFFFFFFF;      // §1: no entry
inline constexpr uint32_t kEntryOverhead = 64;     // §7.4: an entry costs 64 + len

enum class EntryKind : uint8_t { kActor = 1, kName = 2 };

inline constexpr uint8_t kActorItself = 0xFF;  // a failure target without a port (§6.5)

// A failure's target split for §6.5: an actor address and a port, or (not an address) nothing.
struct FailureTarget {
  std::string actor;  // the actor address text; empty when the target is not an address
  uint8_t port_kind = kActorItself;
  uint64_t port_value = 0;
};

// §7.4: what the receiver announced in WELCOME.
struct DictLimits {
  uint32_t max_entries = 4096;
  uint64_t max_bytes = 1 << 20;
};

class EnvelopeEncoder {
 public:
  explicit EnvelopeEncoder(DictLimits limits = {}) : limits_(limits) {}

  // Appends the DATA body of `env` with `seq` (fixed part … payload) to `out`. On error nothing
  // is appended and the dictionary is as before: OutOfRange when the body would exceed
  // `max_body` bytes. With `with_payload` false the payload's bytes are left off (the caller
  // writes them from the envelope as a slice, §6.7); the body still counts them. With
  // `chunked` the frame carries flag `chunked` and no payload bytes (they follow in CHUNK frames,
  // §9), and the body does not count them.
  absl::Status encode(uint64_t seq, runtime::MessageEnvelope& env, std::string& out,
                      uint64_t max_body = UINT64_MAX, bool with_payload = true,
                      bool chunked = false);

  size_t entries() const { return entries_.size(); }
  uint64_t bytes() const { return bytes_; }
  // The body size the last encode() computed (also when it failed with OutOfRange).
  uint64_t last_body_bytes() const { return last_body_; }

 private:
  struct Entry {
    EntryKind kind;
    std::string value;
    uint64_t last_used = 0;  // the frame number that last referenced it
  };
  // The id of `value`, defining (or redefining) one into `defines` when missing.
  absl::StatusOr<uint32_t> ref(EntryKind kind, const std::string& value, std::string& defines,
                               uint16_t& define_count);
  // The id of an actor address: from `by_addr_` without rendering its text when the entry is
  // still there (the steady state), else through ref().
  absl::StatusOr<uint32_t> ref_actor(const runtime::ActorAddr& addr, std::string& defines,
                                     uint16_t& define_count);
  // encode() once the envelope's counts are known to fit: refs, then the bytes.
  absl::Status body(uint64_t seq, runtime::MessageEnvelope& env, bool has_hop,
                    const std::vector<FailureTarget>& targets, std::string_view payload,
                    uint64_t payload_len, uint64_t max_body, bool with_payload, bool chunked, std::string& out);
  // Undoes this frame's definitions (an envelope that fails after some refs were made).
  void roll_back();

  // This frame's changes: the id and what it held before (nullopt: a new id).
  std::vector<std::pair<uint32_t, std::optional<Entry>>> undo_;

  const DictLimits limits_;
  std::vector<Entry> entries_;
  absl::flat_hash_map<std::string, uint32_t> actor_ids_;
  absl::flat_hash_map<std::string, uint32_t> name_ids_;
  // A cache in front of actor_ids_: parsed address → id. An id whose entry was redefined since
  // is detected by comparing the entry's text generation (`defined_`).
  struct AddrRef {
    uint32_t id;
    uint64_t defined;  // defined_[id] when cached
  };
  absl::flat_hash_map<runtime::ActorAddr, AddrRef> by_addr_;
  // In front of by_addr_: the last four addresses looked up (a stream's sender and destination,
  // and the next hop a gateway peeled off the destination), compared instead of hashed.
  struct Recent {
    runtime::ActorAddr addr;
    AddrRef ref{0, 0};
    bool set = false;
  };
  static constexpr unsigned kRecent = 4;
  Recent recent_[kRecent];
  unsigned next_recent_ = 0;
  std::vector<uint64_t> defined_;  // per id: bumped whenever the id is (re)defined or undone
  uint64_t definitions_ = 0;
  uint64_t bytes_ = 0;
  uint64_t frame_ = 0;  // frames encoded, for recency
  uint64_t last_body_ = 0;
};

class EnvelopeDecoder {
 public:
  explicit EnvelopeDecoder(DictLimits limits = {}) : limits_(limits) {}

  // Decodes one DATA body; `seq` receives its seq. Applies its DEFINEs first (§7.2 rule 12).
  // A frame with flag `chunked` (§6.6) is a stream error unless `chunked` is given: then it
  // decodes with an empty payload of the same type, and *chunked receives its payload_len
  // (1 … max_message_bytes; 0 for an inline payload).
  // `block`, when given, keeps `body` alive (the splitter's receive buffer): a payload over
  // kSliceOver bytes is then kept as a slice of it instead of a copy (§14.3 rule 49).
  absl::StatusOr<runtime::EnvelopePtr> decode(std::string_view body, uint64_t& seq,
                                              uint64_t* chunked = nullptr,
                                              uint64_t max_message_bytes = 0,
                                              const std::shared_ptr<const void>& block = nullptr);
  // Payloads over this are slices of a given block, so one pins at most 4× its size (a 256 KiB
  // block); smaller ones are copied: a small payload must not keep a whole block alive.
  static constexpr size_t kSliceOver = 64 << 10;

  size_t entries() const { return entries_.size(); }
  uint64_t bytes() const { return bytes_; }

 private:
  struct Entry {
    EntryKind kind;
    uint32_t cost = 0;
    runtime::ActorAddr actor;  // kActor
    std::string name;          // kName
  };

  const DictLimits limits_;
  std::vector<Entry> entries_;
  uint64_t bytes_ = 0;
};

}  // namespace postal::routing::internal::v2
