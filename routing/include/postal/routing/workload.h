// Workload actors: the traffic `postal up`, the demo and `postal bench` drive through topologies.
//
//   postal.Echo    answers ping-pong payloads and acknowledges streams, measuring one-way
//                  latency (steady_clock is one clock for every process on a host)
//   postal.Driver  runs one pattern against echo ports on request and reports a DriveResult:
//                  messages, elapsed time, a latency histogram and the failures it saw
//
// Patterns: "ping-pong" (one payload in flight; round-trip latency) and "stream" (payloads sent
// one way with at most `window` unacknowledged per target; one-way latency). Streams to several
// targets are fan-out; several drivers streaming to one echo are fan-in.
//
// A drive ends when every payload was echoed or acknowledged, or after the first payload that
// comes back undeliverable: the driver then sends nothing more and ends once every payload sent is
// accounted for — acknowledged or returned — or after the request's `settle` time, whichever comes
// first (issue 10, finding 5). Every return is counted by kind (`returned_by_kind`), and what was
// neither acknowledged nor returned when the drive ended is `unresolved`, so that
// sent = messages + failures + unresolved always holds. A DriveStop ends a running drive at once
// with what it has counted (`postal up` after a proc died). The echo checks stream order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "postal/actors/actor_registry.h"
#include "postal/routing/latency_histogram.h"
#include "postal/runtime/delivery_failure.h"
#include "postal/runtime/port.h"
#include "postal/wire/shared_bytes.h"

namespace postal::routing {

struct StreamAck {
  uint64_t received = 0;      // payloads of this stream received so far
  uint64_t out_of_order = 0;  // of those, how many arrived with a seq other than the next (R-CHAN-4)
  LatencyHistogram latency;   // one-way latency of those since the previous ack
  template <class A>
  void serialize(A& a) {
    a(received, out_of_order, latency);
  }
};

struct Payload {
  enum Mode : uint8_t { kPing = 0, kStream = 1 };
  uint8_t mode = kPing;
  uint64_t seq = 0;
  uint64_t total = 0;  // stream: how many the sender sends
  int64_t sent_ns = 0;
  wire::SharedBytes body;  // on the wire a string; shared, so large bodies are never copied
  runtime::PortRef<Payload> reply_to;  // ping: where the echo goes
  runtime::PortRef<StreamAck> ack_to;  // stream: where acks go
  template <class A>
  void serialize(A& a) {
    a(mode, seq, total, sent_ns, body, reply_to, ack_to);
  }
};

struct DriveResult {
  std::string error;        // empty when every message was delivered; else the first failure
  uint64_t messages = 0;    // delivered: echoed (ping-pong) or acknowledged (stream)
  uint64_t bytes = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t failures = 0;    // payloads that came back undeliverable, every one of them
  uint64_t out_of_order = 0;
  LatencyHistogram latency;
  uint64_t window = 0;  // stream: the window it ran with (the bench reports window ÷ round trip)
  uint64_t sent = 0;    // payloads sent
  // `failures` by return_kind (return_kinds.h), in the order first seen.
  std::vector<std::pair<std::string, uint64_t>> returned_by_kind;
  uint64_t possibly_delivered = 0;  // of `failures`, returns that may have been delivered
  uint64_t unresolved = 0;          // sent, neither acknowledged nor returned when it ended
  bool stopped = false;             // ended by a DriveStop
  double seconds() const { return static_cast<double>(end_ns - start_ns) / 1e9; }
  template <class A>
  void serialize(A& a) {
    a(error, messages, bytes, start_ns, end_ns, failures, out_of_order, latency, window, sent,
      returned_by_kind, possibly_delivered, unresolved, stopped);
  }
};

// Ends the running drive at once; its result goes to the DriveRequest's reply_to as usual.
struct DriveStop {
  template <class A>
  void serialize(A&) {}
};

// What a postal.Relay reports when a payload it forwarded came back: the payload's seq and the
// root failure (`postal soak` counts it in its ledger like a return of its own).
struct RelayedReturn {
  uint64_t seq = 0;
  runtime::DeliveryFailure root;
  template <class A>
  void serialize(A& a) {
    a(seq, root);
  }
};

// The driver's own timer: the settle time after a first failure has passed.
struct DriveSettled {
  uint64_t drive = 0;  // which drive set it
  template <class A>
  void serialize(A& a) {
    a(drive);
  }
};

// A stream's default window: 1 024 payloads, what postal bench's CAF and NATS peers keep in flight
// too (it passes its --window to them). 1 024 ÷ a 1 ms ack round trip = 1 M payloads/s per target,
// and the unloaded round trip is ~50 µs (~20 M/s); a deeper window only makes the sender's
// unacked envelopes outgrow its caches (decisions.md). `postal bench --window` changes it and
// reports the cap.
inline constexpr uint64_t kDefaultWindow = 1024;
// A drive's default settle time after its first failure.
inline constexpr int64_t kDefaultSettleMs = 2000;

struct DriveRequest {
  using Reply = DriveResult;
  std::string pattern;                    // "ping-pong" | "stream"
  std::vector<runtime::PortAddr> targets;  // Payload ports of echoes
  uint64_t messages = 0;                  // ping-pong: round trips; stream: per target
  uint64_t size = 64;                     // body bytes
  uint64_t window = kDefaultWindow;       // stream: unacknowledged payloads per target
  runtime::OncePortRef<DriveResult> reply_to;
  // After the first failure, how long the driver waits for the rest to be acknowledged or
  // returned before it ends (the channels' delivery timeout and a little more is enough).
  int64_t settle_ms = kDefaultSettleMs;
  template <class A>
  void serialize(A& a) {
    a(pattern, targets, messages, size, window, reply_to, settle_ms);
  }
};

inline constexpr std::string_view kEchoType = "postal.Echo";
inline constexpr std::string_view kDriverType = "postal.Driver";
// Forwards every Payload to the echo named by its `next` param (an actor address) and reports each
// one that comes back undeliverable to its `returns` param (a RelayedReturn port address): a
// second hop between procs for `postal soak`.
inline constexpr std::string_view kRelayType = "postal.Relay";
// Echo acknowledges a stream every this many payloads (and at its last)...
inline constexpr uint64_t kAckEvery = 256;
// ...or every this many bytes of them, whichever comes first: large payloads are acked sooner.
inline constexpr uint64_t kAckEveryBytes = 4 << 20;
// A stream keeps at most this many payload bytes unacknowledged per target (and at least two ack
// intervals): 4 096 × 64 KiB would be 256 MiB in flight, which measures the allocator, not the
// path. The report's window cap still says when the window limited a run.
inline constexpr uint64_t kMaxWindowBytes = 32 << 20;

// How many payloads of `size` bytes Echo acknowledges at a time.
inline uint64_t ack_every(uint64_t size) {
  return std::clamp<uint64_t>(kAckEveryBytes / std::max<uint64_t>(size, 1), 1, kAckEvery);
}

// Registers postal.Echo, postal.Driver and postal.Relay (idempotent). Every proc binary calls it at
// start.
void register_workload_actors();

// The Payload port of an actor.
runtime::PortAddr payload_port(const runtime::ActorAddr& actor);
// The DriveRequest port of a driver.
runtime::PortRef<DriveRequest> drive_port(const runtime::ActorAddr& driver);
// The DriveStop port of a driver.
runtime::PortRef<DriveStop> drive_stop_port(const runtime::ActorAddr& driver);

int64_t steady_now_ns();

}  // namespace postal::routing

POSTAL_MESSAGE(postal::routing::StreamAck, "postal.workload.StreamAck");
POSTAL_MESSAGE(postal::routing::Payload, "postal.workload.Payload");
POSTAL_MESSAGE(postal::routing::DriveResult, "postal.workload.DriveResult");
POSTAL_MESSAGE(postal::routing::DriveRequest, "postal.workload.DriveRequest");
POSTAL_MESSAGE(postal::routing::DriveStop, "postal.workload.DriveStop");
POSTAL_MESSAGE(postal::routing::DriveSettled, "postal.workload.DriveSettled");
POSTAL_MESSAGE(postal::routing::RelayedReturn, "postal.workload.RelayedReturn");
