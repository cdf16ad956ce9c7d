// deliver_policy.h — what a new subscription to a retained mailbox starts with (M-KIND-3).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace postal::mail {

// JetStream's deliver policy: kAll replays everything stored, then continues live; kNew replays
// nothing and gets only what is stored after it subscribed; kLast replays the one most recently
// stored message (whatever its priority), then continues live. Queue mailboxes store nothing to
// replay: there every policy is kNew.
enum class DeliverPolicy : uint8_t { kAll, kNew, kLast };

std::string_view to_string(DeliverPolicy policy);  // "all", "new", "last"
std::optional<DeliverPolicy> parse_deliver_policy(std::string_view name);

}  // namespace postal::mail
