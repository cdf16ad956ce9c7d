// PortSink: where a mailbox puts an envelope once it accepted it for a port (runtime internal).
//
// The actor cell is the sink of all of an actor's handler ports; PortReceiver and OnceReceiver
// are the sinks of ephemeral ports. `deliver` must not block. `fail` completes a waiting receiver
// with a delivery failure instead of a value (used for requests whose envelope came back).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/time/time.h"

#include "postal/runtime/delivery_failure.h"
#include "postal/runtime/message_envelope.h"

namespace postal::runtime {

// What a sink says about itself for status reports.
struct SinkInfo {
  std::string state;    // e.g. an actor's lifecycle state; empty when not an actor
  uint64_t queued = 0;  // envelopes delivered and not yet handled
  // R-FLOW-1: what the mailbox holds against its bound (0 maxima: unbounded, not an actor).
  uint64_t queued_bytes = 0;
  uint64_t max_messages = 0;
  uint64_t max_bytes = 0;
  uint64_t watchers = 0;  // R-SUP-2, R-SUP-4: actors (of any proc) registered to hear its end
};

// R-FLOW-1: a bounded sink's answer before it takes an envelope (`PortSink::admit`).
struct Admission {
  bool admitted = true;
  // Not admitted: the failure to return (Overloaded) and whether the sender may wait for room.
  // Admitted with `dropped`: the failure the dropped envelope returns with. Empty otherwise: an
  // admission that succeeds neither builds nor destroys a failure (three strings).
  std::optional<DeliveryFailure> full;
  bool may_wait = false;
  absl::Duration wait;  // how long, when it may
  // Admitted by dropping the oldest envelope queued (kDropOldest): the caller returns it.
  EnvelopePtr dropped;
};

class PortSink {
 public:
  virtual ~PortSink() = default;
  virtual void deliver(EnvelopePtr env) = 0;
  virtual void fail(const DeliveryFailure&) {}
  // The request whose reply port is `index` came back undeliverable; a sink serving several
  // ports tells them apart here.
  virtual void fail_port(uint64_t /*index*/, const DeliveryFailure& failure) { fail(failure); }
  virtual SinkInfo info() const { return {}; }
  // R-FLOW-1: reserves room for `env` before `deliver` (an admitted envelope must then be
  // delivered). Unbounded sinks admit everything.
  virtual Admission admit(MessageEnvelope&) { return {}; }
  // R-FLOW-1: waits until room may have been made, the sink closed, or `deadline`; false at the
  // deadline or when waiting is pointless (the sender then fails the envelope).
  virtual bool wait_for_room(absl::Time /*deadline*/) { return false; }
  // R-FLOW-2, credit: calls `on_room` once when the mailbox has drained to half its bound, or
  // the sink stops (MailboxSender::notify_on_room). False when the sink is unbounded.
  virtual bool notify_on_room(std::function<void()> /*on_room*/) { return false; }
  // R-ACT-7: whether the sink is done with its mailbox, so a reaped tombstone may be freed (an
  // actor cell: its last slice has ended). Sinks that are never scheduled are always done.
  virtual bool finished() const { return true; }
  // The proc is being destroyed and will run nothing again: drop what the sink holds (an actor
  // cell: the actor and its queued envelopes). They may hold references to mailboxes — their
  // own among them — and would otherwise keep each other alive past the proc.
  virtual void abandon() {}
};

// Turns an Any into the port's type (R-MBX-4); `&decode_as<T>` is what ports are bound with.
using DecodeFn = absl::Status (*)(wire::Any&);

template <wire::RegisteredMessage T>
absl::Status decode_as(wire::Any& any) {
  return any.decode<T>();
}

}  // namespace postal::runtime
