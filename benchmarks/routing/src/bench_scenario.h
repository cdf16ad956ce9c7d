// Scenario: one cell of `postal bench`'s matrix — transport × gateway hops × size × pattern.
//
// Its name is its text form, `<transport>/hops<N>/<size>/<pattern>`, e.g. `ipc/hops1/64B/stream`:
//
//   transport  inproc   driver and echo procs inside the bench process: hops 0 is one proc (no
//                       channel at all); hops 1 and 2 are separate in-process procs and gateways
//                       joined by inproc channels (never serialized)
//              ipc      two `postal proc` children on Unix sockets, gateways in the bench process
//              tcp      the same on TCP loopback
//   hops       0        the driver's proc dials the echo's proc
//              1        the echo's proc is behind a gateway: driver → gateway → echo
//              2        addressed through two gateways by Via hops: driver → outer → inner → echo
//                       (replies and acknowledgements go straight back: the driver's proc is
//                       not behind a gateway)
//   size       64B, 1KiB, 64KiB, 1MiB: payload body bytes
//   pattern    stream     one driver streams to one echo (one-way latency)
//              ping-pong  one payload in flight (round-trip latency)
//              fan-out    one driver streams to kFanWidth echoes at once
//              fan-in     kFanWidth drivers stream to one echo at once
//
// `messages` is the scenario's total: round trips for ping-pong, payloads for the streams (split
// evenly over the kFanWidth targets or drivers of a fan).
#pragma once

#include "postal/routing/workload.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace postal::tools::bench {

enum class Transport : uint8_t { kInproc, kIpc, kTcp, kNats };
enum class Pattern : uint8_t { kStream, kPingPong, kFanOut, kFanIn };

inline constexpr int kFanWidth = 4;
inline constexpr uint64_t kSizes[] = {64, 1 << 10, 64 << 10, 1 << 20};

struct Scenario {
  Transport transport = Transport::kIpc;
  int hops = 0;
  uint64_t size = 64;
  Pattern pattern = Pattern::kStream;
  uint64_t messages = 0;
  uint64_t window = routing::kDefaultWindow;  // stream drivers: unacknowledged per target

  std::string name() const;
};

std::string_view to_string(Transport t);  // "inproc" | "ipc" | "tcp" | "nats"
std::string_view to_string(Pattern p);    // "stream" | "ping-pong" | "fan-out" | "fan-in"
std::string size_label(uint64_t bytes);   // "64B", "1KiB", "64KiB", "1MiB", else "<n>B"

// The default message count: about a second of work per scenario on a 2-core machine.
uint64_t default_messages(Pattern pattern, uint64_t size);

// Parses a scenario name; InvalidArgument says which part is wrong and what is accepted.
absl::StatusOr<Scenario> parse_scenario(std::string_view name);

// The scenarios of a suite, grouped by (transport, hops) so that each group shares one topology:
//   quick     six small scenarios across transports, hops and patterns (the smoke test's)
//   standard  the matrix without 1 MiB (108 scenarios)
//   full      the whole matrix (144 scenarios)
absl::StatusOr<std::vector<Scenario>> suite(std::string_view name);

}  // namespace postal::tools::bench
