// Driving workloads through a running topology and printing what they measured.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "postal/routing/host.h"
#include "postal/routing/workload.h"

namespace postal::tools {

struct DriveSpec {
  std::string label;          // what the summary line calls it
  std::string pattern;        // "ping-pong" | "stream"
  runtime::ActorAddr driver;  // a postal.Driver
  std::vector<runtime::ActorAddr> echoes;
  uint64_t messages = 0;
  uint64_t size = 64;
};

// Runs one drive from the host's client and waits for its result.
absl::StatusOr<routing::DriveResult> drive(routing::Host& host, const DriveSpec& spec,
                                           absl::Duration timeout);

// The summary table: one header, then one row per result.
void print_drive_header();
void print_drive_row(const DriveSpec& spec, const routing::DriveResult& result);
// Finding 5: when anything failed or is unresolved, one line that accounts for every payload:
//   accounted: sent S = delivered D + returned R + unresolved U; returned by kind: ack timed
//   out=N, ...; possibly delivered P
void print_drive_accounting(const routing::DriveResult& result);
// Failures by kind across every proc of the topology.
void print_status_table(const std::vector<actors::ProcStatus>& status, bool with_actors);

}  // namespace postal::tools
