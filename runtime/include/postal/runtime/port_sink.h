// PortSink: where a mailbox puts an envelope once it accepted it for a port (runtime internal).
//
// The actor cell is the sink of all of an actor's handler ports; PortReceiver and OnceReceiver
// are the sinks of ephemeral ports. `deliver` must not block. `fail` completes a waiting receiver
// with a delivery failure instead of a value (used for requests whose envelope came back).
#pragma once

#include <string>

#include "postal/runtime/delivery_failure.h"
#include "postal/runtime/message_envelope.h"

namespace postal::runtime {

// What a sink says about itself for status reports.
struct SinkInfo {
  std::string state;    // e.g. an actor's lifecycle state; empty when not an actor
  uint64_t queued = 0;  // envelopes delivered and not yet handled
};

class PortSink {
 public:
  virtual ~PortSink() = default;
  virtual void deliver(EnvelopePtr env) = 0;
  virtual void fail(const DeliveryFailure&) {}
  virtual SinkInfo info() const { return {}; }
  // R-ACT-7: whether the sink is done with its mailbox, so a reaped tombstone may be freed (an
  // actor cell: its last slice has ended). Sinks that are never scheduled are always done.
  virtual bool finished() const { return true; }
};

// Turns an Any into the port's type (R-MBX-4); `&decode_as<T>` is what ports are bound with.
using DecodeFn = absl::Status (*)(wire::Any&);

template <wire::RegisteredMessage T>
absl::Status decode_as(wire::Any& any) {
  return any.decode<T>();
}

}  // namespace postal::runtime
