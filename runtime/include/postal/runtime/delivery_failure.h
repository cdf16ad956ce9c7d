// DeliveryFailure: why an envelope could not be delivered (R-FAIL-1, R-FAIL-2).
//
// A failure is structured data — a kind, a reason, the target address it concerns and a few
// attributes — not a string. Envelopes accumulate failures as they travel; the first one is the
// root, and policy (R-FAIL-5) always reads the root. `to_string()` renders one bounded,
// human-readable line naming the operation, the target and the reason.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace postal::runtime {

enum class FailureKind : uint8_t {
  kInvalidReference,  // the target can never accept this message as addressed
  kTransport,         // Undeliverable(Transport{...}): the path failed
  kPortGone,          // Undeliverable(PortGone{...}): the port existed and its receiver is gone
  kExpired,           // the TTL ran out
};

enum class InvalidReason : uint8_t {
  kNone,
  kActorNotExist,
  kHandlerNotBound,
  kActorStopped,
  kActorFailed,
  kPortNeverAllocated,
  kProtocolMismatch,
  kWrongMailboxOwner,
};

enum class TransportReason : uint8_t {
  kNone,
  kChannelClosed,
  kAckTimedOut,
  kDialFailed,
  kNoRoute,
  kOversizedFrame,
  kLinkUnavailable,
  kOverloaded,  // R-FLOW-1, R-FLOW-2: a bounded queue was full (`bound`, `len`, `max`)
};

// R-FLOW-1, R-FLOW-2: the bound an Overloaded failure met. `len` is what the queue held (in the
// bound's unit) when the envelope was refused or dropped, `max` the bound; an envelope larger
// than a byte bound on its own is refused with `len` = its size.
enum class OverloadBound : uint8_t {
  kNone,
  kMailboxMessages,      // an actor's mailbox, in envelopes (SpawnOptions / ProcOptions)
  kMailboxBytes,         // an actor's mailbox, in payload bytes
  kChannelMessages,      // a channel client's queue in total (ChannelOptions)
  kChannelBytes,
  kDestinationMessages,  // a channel client's queue for one destination actor
  kDestinationBytes,
};

std::string_view to_string(FailureKind kind);
std::string_view to_string(InvalidReason reason);
std::string_view to_string(TransportReason reason);
std::string_view to_string(OverloadBound bound);

struct DeliveryFailure {
  // Longest rendering of `to_string()`; longer lines are cut at a character boundary and end
  // with "...".
  static constexpr size_t kMaxLine = 240;
  // Longest `detail` a runtime failure carries (R-ACT-6: an actor's error can be long; the
  // detail travels with the envelope). `clip_detail` cuts at a character boundary, ends "...".
  static constexpr size_t kMaxDetail = 160;
  static std::string clip_detail(std::string_view text);

  FailureKind kind = FailureKind::kInvalidReference;
  InvalidReason invalid = InvalidReason::kNone;
  TransportReason transport = TransportReason::kNone;
  std::string target;        // the address concerned, in text form
  std::string message_type;  // PortGone: registered name of the message type
  std::string detail;        // free text: OS error, decode error, dial address …
  uint64_t len = 0;          // OversizedFrame
  uint64_t max = 0;          // OversizedFrame
  int os_errno = 0;          // Transport: the OS error behind it (errno), 0 when none
  OverloadBound bound = OverloadBound::kNone;  // Overloaded: which bound (len, max: its values)
  // Transport (ChannelClosed, AckTimedOut): the envelope was written to its channel and never
  // acked, so it may have been delivered (R-CHAN-2); false: it certainly was not (never written,
  // or the server's final ACK said it processed nothing more).
  bool maybe_delivered = false;

  static DeliveryFailure invalid_reference(std::string target, InvalidReason reason,
                                           std::string detail = {});
  static DeliveryFailure transport_failure(std::string target, TransportReason reason,
                                           std::string detail = {});
  static DeliveryFailure oversized_frame(std::string target, uint64_t len, uint64_t max);
  // R-FLOW-1, R-FLOW-2: `target` could not take the envelope: `bound` held `len` of `max`.
  static DeliveryFailure overloaded(std::string target, OverloadBound bound, uint64_t len,
                                    uint64_t max, std::string detail = {});
  static DeliveryFailure port_gone(std::string port, std::string message_type);
  static DeliveryFailure expired(std::string target);

  // Both spellings of R-FAIL-1's `Undeliverable(...)` family.
  bool is_undeliverable() const {
    return kind == FailureKind::kTransport || kind == FailureKind::kPortGone;
  }

  // One line, at most kMaxLine bytes: "deliver to <target>: <kind>: <reason> (<detail>)".
  std::string to_string() const;

  // R-FAIL-6: the failure as a synchronous result (`Proc::try_post`), message = `to_string()`:
  //   ActorNotExist, PortNeverAllocated               → NotFound
  //   HandlerNotBound                                 → Unimplemented
  //   ActorStopped, ActorFailed, PortGone             → FailedPrecondition
  //   ProtocolMismatch, WrongMailboxOwner             → InvalidArgument
  //   Expired                                         → DeadlineExceeded
  //   Transport(Overloaded)                           → ResourceExhausted
  //   Transport (any other reason)                    → Unavailable
  absl::Status to_status() const;

  bool operator==(const DeliveryFailure&) const = default;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(kind, invalid, transport, target, message_type, detail, len, max, os_errno, bound,
       maybe_delivered);
  }
};

}  // namespace postal::runtime
