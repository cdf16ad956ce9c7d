// What `postal bench` reports: the scenarios, the peers, the ratios against the peers and the
// machine it ran on — as a terminal table, JSON and a self-contained HTML page.
//
// Ratios (each computed per message size, only when both sides were measured in this run):
//   ipc stream / raw Unix floor, batched       msgs/s, target >= 0.70
//   ipc stream / raw Unix floor, unbatched     msgs/s, no target (context)
//   tcp stream / CAF remote stream             msgs/s, target >= 3
//   ping-pong p50 / raw round trip p50         ipc and tcp, target <= 1.5
//   gateway hop cost                           1 - stream msgs/s at hops N / at hops N-1, for
//                                              N = 1, 2 and every transport; target <= 25 %
//   tcp stream / NATS pub-sub, tcp ping-pong p50 / NATS request-reply p50, / CAF round trip p50
//                                              no target (context)
#pragma once

#include <string>
#include <vector>

#include "bench_peers.h"
#include "bench_run.h"

namespace postal::tools::bench {

struct Ratio {
  enum class Target : uint8_t { kNone, kAtLeast, kAtMost };
  std::string name;    // what is compared, e.g. "ipc stream / raw Unix floor (batched)"
  std::string size;    // "64B", ...
  std::string postal;  // the scenario, e.g. "ipc/hops0/64B/stream"
  std::string peer;    // the peer figure, e.g. "raw_socket ipc stream_batched msgs/s"
  double postal_value = 0;
  double peer_value = 0;
  std::string unit = "msgs/s";  // of the two values: "msgs/s" or "us" (a p50)
  double value = 0;             // the ratio (or the cost, a fraction, for hop costs)
  bool percent = false;         // shown as a percentage (hop cost) instead of "x"
  Target target = Target::kNone;
  double threshold = 0;

  bool has_target() const { return target != Target::kNone; }
  bool met() const {
    return target == Target::kAtLeast  ? value >= threshold
           : target == Target::kAtMost ? value <= threshold
                                       : true;
  }
  std::string target_text() const;  // ">= 0.70x", "<= 25 %", "-"
  std::string value_text() const;   // "0.53x", "12.4 %"
  std::string postal_text() const;  // the postal value with its unit, "44.3 k msgs/s", "205 us"
  std::string peer_text() const;
};

struct MachineInfo {
  int nproc = 0;
  std::string cpu_model;
  double load_before[3] = {0, 0, 0};  // load averages (1, 5, 15 min) when the run started
  double load_after[3] = {0, 0, 0};   // ... and when it ended
  std::string commit;                 // `git rev-parse --short HEAD`, "-dirty" when modified
  std::string started_utc;
  double seconds = 0;  // the whole run
};

struct Report {
  MachineInfo machine;
  std::string mode;  // "suite quick", "scenario ipc/hops0/64B/stream", "topology FILE"
  uint64_t messages_override = 0;
  int workers = 1;
  std::vector<ScenarioResult> scenarios;
  PeerSet peers;
  bool peers_skipped = false;  // --no-peers
  bool authenticated = true;   // false with --no-auth
  bool tls = false;            // --tls: TLS on every tcp channel (R-SEC-1)
  std::vector<Ratio> ratios;
};

std::vector<Ratio> compute_ratios(const std::vector<ScenarioResult>& scenarios,
                                  const PeerSet& peers);

// nproc, CPU model, load average, commit (looked up in the working directory, then in the
// source tree the binary was built from) and the start time.
MachineInfo machine_info();
void finish_machine_info(MachineInfo& info, double seconds);

// Terminal output.
void print_progress_line(size_t index, size_t total, const ScenarioResult& r);
void print_report(const Report& report);

std::string to_json(const Report& report);  // pretty-printed, one object per scenario
std::string to_html(const Report& report);  // self-contained: inline CSS and SVG, no scripts

// Human-readable numbers: "1.23 M", "456 k", "78.9".
std::string si(double v);
// Microseconds as "12.3 us", "4.56 ms", "1.2 s".
std::string micros(double us);

}  // namespace postal::tools::bench
