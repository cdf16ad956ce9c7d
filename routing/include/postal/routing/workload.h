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
// A drive ends when every payload was echoed or acknowledged, or at the first payload that comes
// back undeliverable (reported in `failures` and `error`). The echo checks stream order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "postal/actors/actor_registry.h"
#include "postal/routing/latency_histogram.h"
#include "postal/runtime/port.h"

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
  std::string body;
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
  uint64_t failures = 0;    // payloads that came back undeliverable
  uint64_t out_of_order = 0;
  LatencyHistogram latency;
  uint64_t window = 0;  // stream: the window it ran with (the bench reports window ÷ round trip)
  double seconds() const { return static_cast<double>(end_ns - start_ns) / 1e9; }
  template <class A>
  void serialize(A& a) {
    a(error, messages, bytes, start_ns, end_ns, failures, out_of_order, latency, window);
  }
};

// A stream's default window: 4 096 payloads ÷ a 1 ms ack round trip = 4 M payloads/s per target,
// above what one host's channels carry; `postal bench --window` changes it and reports the cap.
inline constexpr uint64_t kDefaultWindow = 4096;

struct DriveRequest {
  using Reply = DriveResult;
  std::string pattern;                    // "ping-pong" | "stream"
  std::vector<runtime::PortAddr> targets;  // Payload ports of echoes
  uint64_t messages = 0;                  // ping-pong: round trips; stream: per target
  uint64_t size = 64;                     // body bytes
  uint64_t window = kDefaultWindow;       // stream: unacknowledged payloads per target
  runtime::OncePortRef<DriveResult> reply_to;
  template <class A>
  void serialize(A& a) {
    a(pattern, targets, messages, size, window, reply_to);
  }
};

inline constexpr std::string_view kEchoType = "postal.Echo";
inline constexpr std::string_view kDriverType = "postal.Driver";
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

// Registers postal.Echo and postal.Driver (idempotent). Every proc binary calls it at start.
void register_workload_actors();

// The Payload port of an actor.
runtime::PortAddr payload_port(const runtime::ActorAddr& actor);
// The DriveRequest port of a driver.
runtime::PortRef<DriveRequest> drive_port(const runtime::ActorAddr& driver);

int64_t steady_now_ns();

}  // namespace postal::routing

POSTAL_MESSAGE(postal::routing::StreamAck, "postal.workload.StreamAck");
POSTAL_MESSAGE(postal::routing::Payload, "postal.workload.Payload");
POSTAL_MESSAGE(postal::routing::DriveResult, "postal.workload.DriveResult");
POSTAL_MESSAGE(postal::routing::DriveRequest, "postal.workload.DriveRequest");
