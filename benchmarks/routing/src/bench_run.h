// Running one scenario on a rig and what it measured.
//
// The drives of a scenario start together (one for stream, ping-pong and fan-out; kFanWidth for
// fan-in) and their DriveResults merge: messages and bytes add up, the time runs from the first
// start to the last end, the latency histograms merge. CPU is the utime + stime of every process
// of the topology — this one (getrusage: the gateways, and every proc for inproc) and the rig's
// children (/proc/<pid>/stat, in clock ticks) — before and after.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "bench_rig.h"
#include "bench_scenario.h"

namespace postal::tools::bench {

struct ScenarioResult {
  std::string name;       // the scenario's name (or `topology/<name>/<pattern>`)
  std::string transport;  // "inproc" | "ipc" | "tcp" | "" (a topology file)
  int hops = 0;
  uint64_t size = 0;
  std::string pattern;
  std::string latency_kind;  // "rtt" (ping-pong) or "one-way"
  uint64_t messages = 0;     // delivered
  uint64_t expected = 0;     // asked for
  uint64_t bytes = 0;
  double seconds = 0;
  double msgs_per_s = 0;
  double mb_per_s = 0;
  double p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
  double cpu_seconds = 0;
  double cpu_s_per_million = 0;
  uint64_t failures = 0;  // payloads that came back undeliverable, plus drives that failed
  uint64_t out_of_order = 0;
  // Streams: the round trip of the path without the stream's own queue (the median of 100
  // ping-pongs on the same rig just before the run) and what the drivers' windows allow at it
  // (Σ targets × window ÷ that round trip). Under saturation a window always fills and the
  // stream's own ack round trip is its queueing (Little's law), so only the unloaded round trip
  // says whether the window could be the limit. `window_bound`: the throughput is over half the
  // cap (raise --window).
  double base_rtt_us = 0;
  double window_cap_msgs_per_s = 0;
  // Peak resident memory (VmHWM, reset before the run) in MiB: this process (the gateways; every
  // proc for inproc) and the largest of the rig's children (drivers, echoes).
  double rss_bench_mib = 0;
  double rss_procs_mib = 0;
  bool window_bound = false;
  std::string error;  // empty when everything was delivered
};

// CPU seconds (user + system) of this process and of `pids` so far.
double cpu_seconds(const std::vector<pid_t>& pids);
// Peak resident memory (VmHWM) of `pid` (0: this process) in MiB, and its reset (/proc/PID/
// clear_refs "5"; without permission the peak runs from the process's start).
double peak_rss_mib(pid_t pid);
void reset_peak_rss(pid_t pid);

// Runs `scenario` on `rig`; a drive that fails or times out is reported in the result.
ScenarioResult run_scenario(Rig& rig, const Scenario& scenario, absl::Duration timeout);

// A short ping-pong and stream between every driver and echo the scenarios use, so channels are
// dialed and warm before anything is measured: `messages` per stream (clamped to 256..2048) and
// at most 200 round trips. Returns the first error, if any.
std::string warm_up(Rig& rig, uint64_t messages = 2048);

}  // namespace postal::tools::bench
