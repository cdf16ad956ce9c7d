// priority.h — `Priority`: a message's place in its mailbox's order (M-PRIO-1).
//
// critical > urgent > normal (the default). The store orders: across priorities the higher goes
// first, within one priority FIFO. Priorities say nothing about how a store syncs to disk; that
// is a store's `Durability` (`os`, `disk`), named so the two cannot be confused.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace postal::mail {

enum class Priority : uint8_t { kNormal = 0, kUrgent = 1, kCritical = 2 };

// Replay order: highest first.
inline constexpr std::array<Priority, 3> kPrioritiesHighFirst = {
    Priority::kCritical, Priority::kUrgent, Priority::kNormal};

// "critical" | "urgent" | "normal".
std::string_view to_string(Priority priority);
std::optional<Priority> parse_priority(std::string_view text);

}  // namespace postal::mail
