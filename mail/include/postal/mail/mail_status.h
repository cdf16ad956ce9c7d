// mail_status.h — what a provider says about one mailbox, and the snapshot of all of them
// (M-STAT-1, M-STAT-2).
//
// MailboxStatus has the fields every core operation produces:
//   state             kOnline   the provider knows the address (posted to, subscribed, or
//                               holding records) and is running; a drained address stays online
//                     kUnknown  never seen (never posted to, never subscribed); exists = false
//                     kOffline  known, but the provider is stopped
//                     kDegraded the provider cannot tell right now
//   exists            whether the provider knows the address; nullopt when it cannot answer
//                     status queries at all ("I cannot ask" is not "it does not exist")
//   unread_count      copies waiting in the queue
//   in_flight_count   copies handed out under a lease and not settled yet
//   last_activity_time  the last time a message moved (post, hand-out, settlement); nullopt —
//                     rendered `null`, never omitted — when there is none. `peek` never moves it.
// Anything belonging to one provider's strategy is an extension key prefixed with its scheme
// (`mem.parkedCount`, `mem.overdueInFlightCount`, `mem.subscriberCount`, …).
//
// MailSnapshot aggregates every known mailbox of every provider, sorted by address. Providers
// that cannot enumerate are listed in `unsupported_providers`, and then the snapshot's state is
// kDegraded instead of pretending their queues are empty.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/time/time.h"

namespace postal::mail {

enum class MailboxState : uint8_t { kOnline, kUnknown, kDegraded, kOffline };
std::string_view to_string(MailboxState state);  // "online", "unknown", "degraded", "offline"

using StatusValue = std::variant<bool, int64_t, double, std::string>;

struct MailboxStatus {
  std::string address;
  MailboxState state = MailboxState::kUnknown;
  std::optional<bool> exists;
  uint64_t unread_count = 0;
  uint64_t in_flight_count = 0;
  std::optional<absl::Time> last_activity_time;
  std::map<std::string, StatusValue> extensions;

  // ISO 8601 UTC, or nullopt.
  std::optional<std::string> last_activity_iso() const;
  // The integer extension `key`, or nullopt when absent or not an integer.
  std::optional<int64_t> extension_int(std::string_view key) const;
  // One JSON object: {"address":…,"state":…,"exists":…,"unreadCount":…,"inFlightCount":…,
  // "lastActivityTime":"…"|null, then the extension keys}.
  std::string to_json() const;
};

struct MailSnapshot {
  MailboxState state = MailboxState::kUnknown;  // online | degraded | unknown (no providers)
  uint64_t address_count = 0;
  uint64_t unread_count = 0;
  uint64_t in_flight_count = 0;
  std::vector<MailboxStatus> addresses;            // sorted by address
  std::vector<std::string> unsupported_providers;  // schemes that cannot enumerate, sorted
};

}  // namespace postal::mail
