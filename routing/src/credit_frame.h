// CREDIT (kind 12, server → client, feature `credit`; docs/wire.md §10.1, R-FLOW-2): the
// receiving proc tells a sender which destination actors are paused (their mailbox is full) and
// which are open again. Routing internal.
//
// Body: `u16 count`, `u16` reserved, then `count` entries of {`u16 state` (0 open, 1 paused),
// `u16 len`, `len` bytes: the actor's id in its text form (`ActorId::to_string`)}. Each entry is
// absolute — a repeated or stale one is harmless — and at most kMaxCreditEntries fit one frame.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "postal/runtime/ids.h"

namespace postal::routing::internal::v2 {

enum class CreditState : uint16_t { kOpen = 0, kPaused = 1 };

struct CreditEntry {
  CreditState state = CreditState::kOpen;
  runtime::ActorId actor;
  friend bool operator==(const CreditEntry&, const CreditEntry&) = default;
};

struct Credit {
  std::vector<CreditEntry> entries;
  friend bool operator==(const Credit&, const Credit&) = default;
};

inline constexpr size_t kMaxCreditEntries = 1024;
inline constexpr size_t kMaxCreditActorText = 1024;

// Appends one whole frame (prefix, kind, body).
void append(std::string& out, const Credit& f);
// A stream error for: a truncated body, reserved bytes set, an unknown state, more than
// kMaxCreditEntries entries, an empty or over-long actor text, or one that does not parse.
absl::StatusOr<Credit> decode_credit(std::string_view body);

}  // namespace postal::routing::internal::v2
