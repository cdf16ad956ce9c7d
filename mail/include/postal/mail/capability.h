// capability.h — what a provider declares it can do (`MailProvider::can`).
//
// The PostOffice asks before it calls: an operation the provider does not declare fails with
// UnsupportedCapability (mail_errors.h) before anything changes — it never quietly falls back to
// something else (a peek never becomes a consuming fetch). Core fields of `status` never depend
// on a capability; provider-specific numbers live in its `<scheme>.`-prefixed extension keys.
#pragma once

#include <cstdint>
#include <string_view>

namespace postal::mail {

enum class Capability : uint8_t {
  kPost,         // post()
  kSubscribe,    // subscribe()
  kFetch,        // fetch() with AckMode::kAuto
  kManualAck,    // fetch() with AckMode::kManual: leases and Delivery::ack
  kPeek,         // peek(): read-only copies of the queue (M-RECV-3)
  kStatus,       // status(address)
  kEnumerate,    // list every known mailbox, for the status() snapshot (M-STAT-2)
  kRecover,      // recover(): reclaim expired leases (M-ACK-3)
  kClear,        // clear(): drop the backlog
  kLocate,       // locate(message_id) (M-ACK-5)
  kSettleByKey,  // settle(CopyKey, ...) without the Delivery handle (M-ACK-5)
  kDeadLetter,   // discard/give-up writes a dead-letter record (M-DLQ-1); dead_letter_topic()
  kParked,       // peek_parked() / purge_parked() (M-DLQ-2)
  kWaitIdle,     // wait_idle(): wait until dispatched deliveries have settled
  kRetained,     // create_mailbox(), delete_mailbox(), list_public(), erase(): retained
                 // mailboxes (M-KIND-2) — posts to them are stored, subscriptions replay
  kPolicy,       // set_policy() / policy(): a queue mailbox's redelivery policy (M-RETRY-6)
};
inline constexpr Capability kLastCapability = Capability::kPolicy;

// "post", "subscribe", "fetch", "manual-ack", "peek", "status", "enumerate", "recover", "clear",
// "locate", "settle-by-key", "dead-letter", "parked", "wait-idle", "retained", "policy".
std::string_view to_string(Capability capability);

}  // namespace postal::mail
