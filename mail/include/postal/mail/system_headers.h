// system_headers.h — the headers the mail layer owns (M-RETRY-3, M-DLQ-1, M-DLQ-2).
//
// Minted by the kernel, never trusted from a sender: `strip_system_headers` removes them (names
// compared case-insensitively) from every letter at the send boundary, so a sender can neither
// pick its own redelivery cap nor stamp live mail as a dead-letter record.
//
//   header                      type     meaning
//   mbx-send-id                 string   one per copy, minted at send; what settlement keys on
//   mbx-sent-at                 string   ISO 8601 UTC time of the send
//   mbx-round                   uint64   delivery round: bumped by whoever hands the copy to a
//                                        consumer, kept across requeues (absent: never handed out)
//   mbx-attempt                 uint64   attempt within one retry chain; restarts at 1 per round
//   mbx-max-attempts            uint64   the retry budget, present under a RetryPolicy
//   mbx-dead-letter-reason      string   fatal | retriable | consumer-nack | expired-lease
//   mbx-dead-letter-attempts    uint64   attempts in the chain that died
//   mbx-dead-letter-round       uint64   the round the copy was on
//   mbx-dead-letter-error       string   the last error, one line
//   mbx-dead-letter-topic       string   the canonical address it was given up from
//   mbx-dead-letter-depth       uint64   depth in the dead-letter chain (1 = first level)
//   mbx-dead-letter-send-id     string   the mbx-send-id of the copy that was given up
//   mbx-dead-letter-terminal    bool     true on a parked record (M-DLQ-2)
//   mbx-seq                     uint64   a retained message's id in its store: `erase` takes it
//                                        (M-RECV-5)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "postal/wire/headers.h"

namespace postal::mail {

inline constexpr wire::HeaderKey<std::string> kSendId{"mbx-send-id"};
inline constexpr wire::HeaderKey<std::string> kSentAt{"mbx-sent-at"};
inline constexpr wire::HeaderKey<uint64_t> kRound{"mbx-round"};
inline constexpr wire::HeaderKey<uint64_t> kAttempt{"mbx-attempt"};
inline constexpr wire::HeaderKey<uint64_t> kMaxAttempts{"mbx-max-attempts"};
inline constexpr wire::HeaderKey<std::string> kDeadLetterReason{"mbx-dead-letter-reason"};
inline constexpr wire::HeaderKey<uint64_t> kDeadLetterAttempts{"mbx-dead-letter-attempts"};
inline constexpr wire::HeaderKey<uint64_t> kDeadLetterRound{"mbx-dead-letter-round"};
inline constexpr wire::HeaderKey<std::string> kDeadLetterError{"mbx-dead-letter-error"};
inline constexpr wire::HeaderKey<std::string> kDeadLetterTopic{"mbx-dead-letter-topic"};
inline constexpr wire::HeaderKey<uint64_t> kDeadLetterDepth{"mbx-dead-letter-depth"};
inline constexpr wire::HeaderKey<std::string> kDeadLetterSendId{"mbx-dead-letter-send-id"};
inline constexpr wire::HeaderKey<bool> kDeadLetterTerminal{"mbx-dead-letter-terminal"};
inline constexpr wire::HeaderKey<uint64_t> kRetainedSeq{"mbx-seq"};
// Set by the sender: a retained letter's priority, "critical" | "urgent" | "normal" (the
// default) (M-PRIO-1). Not a system header.
inline constexpr wire::HeaderKey<std::string> kPriority{"priority"};

// Why a copy was given up (M-DLQ-1).
enum class DeadLetterReason : uint8_t {
  kFatal,         // a push consumer returned a plain error
  kRetriable,     // retriable failures (or cancelled attempts) that were not requeued
  kConsumerNack,  // a fetch consumer settled `discard`, or `unhandled` past the round cap
  kExpiredLease,  // a lease expired past the round cap
};
std::string_view to_string(DeadLetterReason reason);

// Whether `name` is a system header (case-insensitive).
bool is_system_header(std::string_view name);
// Removes every system header; returns how many were removed.
size_t strip_system_headers(wire::Headers& headers);

// A fresh copy id: 128 random bits as 32 lowercase hex digits.
std::string mint_send_id();
// `2023-11-14T22:13:20.000Z`.
std::string format_iso8601(absl::Time t);

}  // namespace postal::mail
