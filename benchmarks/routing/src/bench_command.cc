// `postal bench`: benchmarks routing — a matrix of scenarios (transport × gateway hops × message
// size × pattern, bench_scenario.h) on real topologies (bench_rig.h), with peers measured in the
// same run (bench_peers.h) so every figure is also a ratio (bench_report.h).
//
//   postal bench [--suite quick|standard|full | --scenario NAME | --topology FILE]
//                [--messages N] [--json FILE] [--html FILE] [--no-peers] [--peers-dir DIR]
//                [--workers N] [--verbose]
//
// Scenarios sharing a transport and hop count run on one topology, brought up once and warmed up
// (a short ping-pong and stream on every driver/echo pair) before anything is measured; a
// scenario that fails or times out gets a fresh topology for the next one. A progress line is
// printed per scenario and per peer run, the table and the ratios at the end. The exit status
// is 0 when every scenario delivered every message, 1 when one did not, 2 for bad flags.
#include "postal/bench/bench_command.h"

#include <signal.h>

#include <cstdio>
#include <fstream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench_report.h"
#include "postal/routing/workload.h"
#include "postal/wire/absl_compat.h"

namespace postal::tools {
namespace {

using bench::Report;
using bench::Rig;
using bench::Scenario;
using bench::ScenarioResult;

absl::Duration timeout_for(const Scenario& s) {
  // A minute, plus what the scenario's bytes take at 2 MB/s.
  return absl::Seconds(60) + absl::Seconds(static_cast<double>(s.messages * s.size) / 2e6);
}

ScenarioResult failed(const Scenario& s, std::string error) {
  ScenarioResult r;
  r.name = s.name();
  r.transport = std::string(bench::to_string(s.transport));
  r.hops = s.hops;
  r.size = s.size;
  r.pattern = std::string(bench::to_string(s.pattern));
  r.latency_kind = s.pattern == bench::Pattern::kPingPong ? "rtt" : "one-way";
  r.expected = s.messages;
  r.failures = 1;
  r.error = std::move(error);
  return r;
}

// Runs the scenarios in order; consecutive scenarios with the same transport and hops share a rig.
std::vector<ScenarioResult> run_matrix(const std::vector<Scenario>& scenarios,
                                       const bench::RigOptions& rig_options) {
  std::vector<ScenarioResult> out;
  std::unique_ptr<Rig> rig;
  std::string rig_error;
  for (size_t i = 0; i < scenarios.size(); ++i) {
    const Scenario& s = scenarios[i];
    const bool new_group =
        i == 0 || scenarios[i - 1].transport != s.transport || scenarios[i - 1].hops != s.hops;
    if (new_group || (!rig && rig_error.empty())) {
      rig.reset();
      rig_error.clear();
      std::printf("bringing up %s with %d gateway hop(s)\n",
                  std::string(bench::to_string(s.transport)).c_str(), s.hops);
      std::fflush(stdout);
      absl::StatusOr<std::unique_ptr<Rig>> made = bench::make_rig(s.transport, s.hops, rig_options);
      if (made.ok()) {
        rig = *std::move(made);
        rig_error = bench::warm_up(*rig, s.messages);
        if (!rig_error.empty()) rig.reset();
      } else {
        rig_error = std::string(made.status().message());
      }
    }
    ScenarioResult r = rig ? bench::run_scenario(*rig, s, timeout_for(s))
                           : failed(s, absl::StrCat("topology: ", rig_error));
    if (rig && !r.error.empty()) rig.reset();  // a stuck drive: start the next one afresh
    bench::print_progress_line(i + 1, scenarios.size(), r);
    out.push_back(std::move(r));
  }
  return out;
}

// `--topology FILE`: the file's [workload] on the file's procs (see docs/topologies.md). Fan-out
// streams from `from` to `to` and every other postal.Echo of the file; fan-in streams from `from`
// and every other postal.Driver to `to`.
absl::StatusOr<ScenarioResult> run_topology(const std::string& file, const BenchOptions& options,
                                            const std::string& self_binary) {
  absl::StatusOr<routing::TopologySpec> spec = routing::load_topology(file);
  if (!spec.ok()) return spec.status();
  if (!spec->workload) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, " has no [workload]; add one (docs/topologies.md) or use --scenario"));
  }
  const routing::WorkloadSpec w = *spec->workload;
  const routing::ActorSpec* from_spec = spec->find_actor(w.from);
  const routing::ActorSpec* to_spec = spec->find_actor(w.to);
  if (from_spec->type != routing::kDriverType || to_spec->type != routing::kEchoType) {
    return absl::InvalidArgumentError(absl::StrCat(
        file,
        ": postal bench drives a postal.Driver (workload `from`) against a postal.Echo "
        "(`to`); ",
        w.from.to_string(), " is ", from_spec->type, " and ", w.to.to_string(), " is ",
        to_spec->type, "; run other workloads with `postal up`"));
  }
  routing::HostOptions o;
  o.postal_binary = self_binary;
  o.proc_workers = options.workers;
  o.authenticate = !options.no_auth;
  if (options.tls) o.channel.tls = routing::TlsMode::kOn;
  if (options.verbose) o.log = [](const std::string& line) { std::printf("  %s\n", line.c_str()); };
  std::printf("bringing up topology %s from %s\n", spec->name.c_str(), file.c_str());
  absl::StatusOr<std::unique_ptr<routing::Host>> host = routing::Host::up(*spec, o);
  if (!host.ok()) return host.status();
  std::optional<runtime::ActorAddr> from = (*host)->actor_addr(w.from.proc, w.from.actor);
  std::optional<runtime::ActorAddr> to = (*host)->actor_addr(w.to.proc, w.to.actor);
  if (!from || !to) return absl::InternalError("the workload's actors were not spawned");
  std::vector<runtime::ActorAddr> drivers{*from}, echoes{*to};
  for (const auto& a : spec->actors) {
    const bool is_from = a.proc == w.from.proc && a.name == w.from.actor;
    const bool is_to = a.proc == w.to.proc && a.name == w.to.actor;
    if (w.pattern == routing::WorkloadPattern::kFanOut && a.type == routing::kEchoType && !is_to) {
      echoes.push_back(*(*host)->actor_addr(a.proc, a.name));
    }
    if (w.pattern == routing::WorkloadPattern::kFanIn && a.type == routing::kDriverType &&
        !is_from) {
      drivers.push_back(*(*host)->actor_addr(a.proc, a.name));
    }
  }
  std::unique_ptr<Rig> rig = bench::host_rig(*std::move(host), drivers, echoes);
  if (std::string e = bench::warm_up(*rig, w.messages); !e.empty()) {
    return absl::UnavailableError(e);
  }
  Scenario s;
  s.size = static_cast<uint64_t>(w.size);
  s.messages = options.messages > 0 ? options.messages : static_cast<uint64_t>(w.messages);
  s.window = options.window;
  s.pattern = w.pattern == routing::WorkloadPattern::kPingPong ? bench::Pattern::kPingPong
              : w.pattern == routing::WorkloadPattern::kFanOut ? bench::Pattern::kFanOut
              : w.pattern == routing::WorkloadPattern::kFanIn  ? bench::Pattern::kFanIn
                                                               : bench::Pattern::kStream;
  ScenarioResult r = bench::run_scenario(*rig, s, timeout_for(s));
  r.name = absl::StrCat("topology/", spec->name, "/", sv(routing::to_string(w.pattern)));
  r.transport.clear();
  r.hops = 0;
  bench::print_progress_line(1, 1, r);
  return r;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc | std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    std::fprintf(stderr, "postal bench: cannot write %s\n", path.c_str());
    return false;
  }
  std::printf("wrote %s\n", path.c_str());
  return true;
}

// The scenarios `options` ask for, with --messages applied; sets `mode` to describe them.
absl::StatusOr<std::vector<Scenario>> select_scenarios(const BenchOptions& options,
                                                       std::string& mode) {
  std::vector<Scenario> scenarios;
  if (!options.scenario.empty()) {
    absl::StatusOr<Scenario> s = bench::parse_scenario(options.scenario);
    if (!s.ok()) return s.status();
    scenarios.push_back(*s);
    mode = absl::StrCat("scenario ", options.scenario);
  } else {
    const std::string name = options.suite.empty() ? "standard" : options.suite;
    absl::StatusOr<std::vector<Scenario>> suite = bench::suite(name);
    if (!suite.ok()) return suite.status();
    scenarios = *std::move(suite);
    mode = absl::StrCat("suite ", name);
  }
  for (Scenario& s : scenarios) s.window = options.window;
  if (options.messages > 0) {
    for (Scenario& s : scenarios) s.messages = options.messages;
  }
  return scenarios;
}

bench::PeerSet run_peers(const std::vector<Scenario>& scenarios, const BenchOptions& options,
                         const std::string& self_binary) {
  bench::PeerOptions o;
  o.self_binary = self_binary;
  o.peers_dir = options.peers_dir;
  o.messages = options.messages;
  o.workers = options.workers;
  o.window = options.window;
  o.progress = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  return bench::run_peers(scenarios, o);
}

// Prints the report, writes the files asked for; true when every scenario delivered everything.
bool finish(Report& report, const BenchOptions& options, absl::Time start) {
  report.ratios = bench::compute_ratios(report.scenarios, report.peers);
  bench::finish_machine_info(report.machine, absl::ToDoubleSeconds(absl::Now() - start));
  bench::print_report(report);
  bool ok = true;
  if (!options.json.empty()) ok &= write_file(options.json, bench::to_json(report));
  if (!options.html.empty()) ok &= write_file(options.html, bench::to_html(report));
  for (const auto& r : report.scenarios) ok &= r.error.empty() && r.failures == 0;
  return ok;
}

}  // namespace

void add_bench_subcommand(CLI::App& app, BenchOptions& o) {
  CLI::App* b =
      app.add_subcommand("bench",
                         "benchmark routing: transports x gateway hops x sizes x patterns, beside "
                         "raw-socket, CAF and NATS peers");
  b->add_option("--scenario", o.scenario, "one scenario, e.g. ipc/hops1/64B/stream");
  b->add_option("--suite", o.suite, "quick | standard (the default) | full");
  b->add_option("--topology", o.topology, "run a topology file's [workload] instead of the matrix");
  b->add_option("--messages", o.messages,
                "messages per scenario and per peer run (overrides the defaults)");
  b->add_option("--json", o.json, "write the JSON report to this file");
  b->add_option("--html", o.html, "write the HTML report (inline SVG charts) to this file");
  b->add_flag("--no-peers", o.no_peers, "skip the raw-socket, CAF and NATS peers");
  b->add_option("--peers-dir", o.peers_dir,
                "where raw_socket_bench, caf_remote_bench and nats_bench are (default: next to "
                "postal, then <build>/benchmarks/peers)");
  b->add_option("--workers", o.workers,
                "worker threads per proc and CAF scheduler threads (default 1)");
  b->add_flag("--verbose", o.verbose, "print how each topology comes up");
  b->add_flag("--no-auth", o.no_auth,
              "run the topologies without channel authentication (to measure what it costs)");
  b->add_flag("--tls", o.tls,
              "TLS 1.3 on every tcp channel, loopback included (to measure what it costs; the "
              "default is TLS off loopback only)");
  b->add_option("--window", o.window,
                "stream drivers' unacknowledged payloads per target, and the CAF and NATS peers' "
                "(default 1024); the report's window cap says whether it limited a run")
      ->check(CLI::Range(uint64_t{2 * routing::kAckEvery}, uint64_t{1} << 24));
}

int bench_command(const std::string& self_binary, const BenchOptions& options) {
  const int modes = !options.scenario.empty() + !options.suite.empty() + !options.topology.empty();
  if (modes > 1) {
    std::fprintf(stderr, "postal bench: give one of --scenario, --suite and --topology\n");
    return 2;
  }
  if (options.workers < 1 || options.workers > routing::kMaxProcWorkers) {
    std::fprintf(stderr, "postal bench: --workers wants 1..%lld\n",
                 static_cast<long long>(routing::kMaxProcWorkers));
    return 2;
  }
  if (options.tls && options.no_auth) {
    std::fprintf(stderr,
                 "postal bench: --tls needs authentication (its key is the topology's); "
                 "drop --no-auth\n");
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  routing::register_workload_actors();
  Report report;
  report.machine = bench::machine_info();
  report.messages_override = options.messages;
  report.workers = options.workers;
  report.peers_skipped = options.no_peers;
  report.authenticated = !options.no_auth;
  report.tls = options.tls;
  const absl::Time start = absl::Now();

  if (!options.topology.empty()) {
    report.mode = absl::StrCat("topology ", options.topology);
    if (!options.no_peers) {
      report.peers.notes.push_back(
          "no peers with --topology: they are measured beside the "
          "scenario matrix (--suite, --scenario)");
    }
    absl::StatusOr<ScenarioResult> r = run_topology(options.topology, options, self_binary);
    if (!r.ok()) {
      std::fprintf(stderr, "postal bench: %s\n", std::string(r.status().message()).c_str());
      return 1;
    }
    report.scenarios.push_back(*std::move(r));
    return finish(report, options, start) ? 0 : 1;
  }

  absl::StatusOr<std::vector<Scenario>> scenarios = select_scenarios(options, report.mode);
  if (!scenarios.ok()) {
    std::fprintf(stderr, "postal bench: %s\n", std::string(scenarios.status().message()).c_str());
    return 2;
  }
  std::printf("postal bench: %s, %zu scenario(s), load average %.2f %.2f %.2f on %d CPUs\n",
              report.mode.c_str(), scenarios->size(), report.machine.load_before[0],
              report.machine.load_before[1], report.machine.load_before[2], report.machine.nproc);
  report.scenarios = run_matrix(
      *scenarios, {self_binary, options.workers, options.verbose, !options.no_auth, options.tls});
  if (!options.no_peers) report.peers = run_peers(*scenarios, options, self_binary);
  return finish(report, options, start) ? 0 : 1;
}

}  // namespace postal::tools
