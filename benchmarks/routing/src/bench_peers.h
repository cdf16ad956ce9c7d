// The peers `postal bench` measures beside postal, in the same run, so that every figure is a
// ratio (benchmarks/peers/):
//
//   raw_socket_bench  the raw Unix-socket / TCP floor: one-way stream unbatched and batched (64
//                     messages per write), and the unbatched round trip
//   caf_remote_bench  CAF 0.17 remote actors over TCP: stream and round trip
//   nats_bench        NATS publish/subscribe and request/reply through a nats-server that
//                     `postal bench` starts on a loopback port
//
// Each peer runs at every message size the scenarios use, for the transports they use (raw: ipc
// and tcp; CAF and NATS: tcp), with the same message counts as postal's stream and ping-pong
// scenarios. A peer program or nats-server that cannot be found is skipped with a note; a peer
// that fails is reported with its error. Nothing here throws.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench_scenario.h"
#include "nlohmann/json.hpp"

namespace postal::tools::bench {

struct PeerRun {
  std::string peer;       // "raw_socket" | "caf_remote" | "nats"
  std::string transport;  // "ipc" | "tcp"
  uint64_t size = 0;
  nlohmann::json result;  // the peer's JSON line (an object; "error" set when it failed)
  std::string error;      // empty when the peer ran
};

struct PeerSet {
  std::vector<PeerRun> runs;
  std::vector<std::string> notes;  // what was skipped and why

  // The run of `peer` over `transport` at `size` that succeeded, or null.
  const PeerRun* find(std::string_view peer, std::string_view transport, uint64_t size) const;
};

struct PeerOptions {
  std::string self_binary;  // the postal binary: peers are looked for next to it
  std::string peers_dir;    // looked in first when set
  uint64_t messages = 0;    // overrides the message counts when > 0
  int workers = 1;          // CAF scheduler threads
  uint64_t window = 1024;   // the CAF and NATS streams' unacknowledged messages (as the drivers')
  std::function<void(const std::string&)> progress;
};

PeerSet run_peers(const std::vector<Scenario>& scenarios, const PeerOptions& options);

// A number at `path` in `j` (e.g. {"round_trip", "p50_us"}), or -1 when it is missing.
double json_number(const nlohmann::json& j, std::initializer_list<const char*> path);

}  // namespace postal::tools::bench
