// `postal bench`: the routing benchmark as a subcommand of the `postal` command. tools/main.cc
// adds the subcommand with add_bench_subcommand and runs it with bench_command; everything else
// of the benchmark (scenarios, rigs, peers, the report) is private to benchmarks/routing/.
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace postal::tools {

// The flags of `postal bench` (add_bench_subcommand fills them; bench_command runs them).
struct BenchOptions {
  std::string scenario;   // one scenario, e.g. "ipc/hops1/64B/stream"; empty: the suite
  std::string suite;      // quick | standard | full; empty: standard
  std::string topology;   // a topology file whose [workload] is run instead of the matrix
  uint64_t messages = 0;  // overrides every scenario's (and peer's) message count when > 0
  std::string json;       // write the JSON report here
  std::string html;       // write the HTML report here
  bool no_peers = false;  // skip the raw-socket, CAF and NATS peers
  std::string
      peers_dir;    // where the peer programs are; default: next to postal, then the build tree
  int workers = 1;  // worker threads per proc (and CAF scheduler threads)
  bool verbose = false;    // print the host's bring-up lines
  bool no_auth = false;    // run the topologies unauthenticated (R-SEC-1's cost, measured beside)
  bool tls = false;        // R-SEC-1: TLS on every tcp channel, loopback included (its cost)
  uint64_t window = 1024;  // stream drivers' and peers' window (routing::kDefaultWindow)
};

// Adds the `bench` subcommand, whose flags fill `options`, to `app`.
void add_bench_subcommand(CLI::App& app, BenchOptions& options);

// Runs the routing benchmark matrix with its peers (bench_command.cc). `self_binary` is the
// `postal` binary: it runs the `postal proc` children, and the peer programs are looked for next
// to it. Exit status: 0 when every scenario delivered every message, 1 otherwise, 2 for bad flags.
int bench_command(const std::string& self_binary, const BenchOptions& options);

}  // namespace postal::tools
