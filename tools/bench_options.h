// BenchOptions: the flags of `postal bench` (tools/main.cc fills them; bench_command.cc runs them).
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace postal::tools {

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
  bool verbose = false;  // print the host's bring-up lines
};

// Adds the `bench` subcommand, whose flags fill `options`, to `app` (bench_command.cc).
void add_bench_subcommand(CLI::App& app, BenchOptions& options);

}  // namespace postal::tools
