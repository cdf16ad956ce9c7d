// `postal demo`: the main job on embedded defaults.
//
// Three procs on this machine — alpha (ipc), beta (ipc, behind the gateway "edge") and gamma
// (tcp) — each a separate OS process launched by this host. Workloads are driven from actors on
// the procs through the real channels, and the summary prints throughput, latency percentiles
// (from per-message histograms) and the failures every proc counted.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "commands.h"
#include "drive.h"

namespace postal::tools {
namespace {

routing::TopologySpec demo_topology(const std::string& dir) {
  auto ipc = [&](const char* name) {
    return *runtime::ChannelAddr::parse(absl::StrCat("ipc://", dir, "/", name, ".sock"));
  };
  routing::TopologySpec spec;
  spec.name = "demo";
  spec.gateways.push_back({"edge", ipc("edge"), {}});
  spec.procs.push_back({"alpha", ipc("alpha"), std::nullopt, 1, std::nullopt, {}, std::nullopt});
  spec.procs.push_back({"beta", ipc("beta"), "edge", 1, std::nullopt, {}, std::nullopt});
  spec.procs.push_back(
      {"gamma", *runtime::ChannelAddr::parse("tcp://127.0.0.1:0"), std::nullopt, 1, std::nullopt, {}, std::nullopt});
  for (const char* proc : {"alpha", "gamma"}) spec.actors.push_back({proc, "driver", "postal.Driver", {}});
  for (const char* proc : {"alpha", "beta", "gamma"}) spec.actors.push_back({proc, "echo", "postal.Echo", {}});
  return spec;
}

}  // namespace

int demo_command(const std::string& self_binary) {
  const std::string dir = absl::StrCat("/tmp/postal-demo-", ::getpid());
  std::filesystem::create_directories(dir);
  routing::HostOptions options;
  options.postal_binary = self_binary;
  options.log = [](const std::string& line) { std::printf("  %s\n", line.c_str()); };
  std::printf("postal demo: bringing up three procs (one behind gateway \"edge\")\n");
  absl::StatusOr<std::unique_ptr<routing::Host>> host = routing::Host::up(demo_topology(dir), options);
  if (!host.ok()) {
    std::fprintf(stderr, "postal demo: %s\n", std::string(host.status().message()).c_str());
    return 1;
  }
  routing::Host& h = **host;
  auto actor = [&](const char* proc, const char* name) { return *h.actor_addr(proc, name); };

  const std::vector<DriveSpec> runs = {
      {"ping-pong alpha->beta via edge (ipc)", "ping-pong", actor("alpha", "driver"),
       {actor("beta", "echo")}, 5'000, 64},
      {"stream alpha->beta via edge (ipc)", "stream", actor("alpha", "driver"),
       {actor("beta", "echo")}, 300'000, 64},
      {"ping-pong alpha->gamma (tcp)", "ping-pong", actor("alpha", "driver"),
       {actor("gamma", "echo")}, 5'000, 64},
      {"stream alpha->gamma (tcp)", "stream", actor("alpha", "driver"),
       {actor("gamma", "echo")}, 300'000, 64},
      {"stream alpha->gamma 16 KiB (tcp)", "stream", actor("alpha", "driver"),
       {actor("gamma", "echo")}, 20'000, 16 << 10},
      {"fan-out gamma->{alpha,beta}", "stream", actor("gamma", "driver"),
       {actor("alpha", "echo"), actor("beta", "echo")}, 100'000, 64},
  };
  std::printf("\n");
  print_drive_header();
  uint64_t failures = 0;
  for (const DriveSpec& run : runs) {
    absl::StatusOr<routing::DriveResult> r = drive(h, run, absl::Seconds(120));
    if (!r.ok()) {
      std::printf("%-34s failed: %s\n", run.label.c_str(), std::string(r.status().message()).c_str());
      ++failures;
      continue;
    }
    print_drive_row(run, *r);
    failures += r->failures + (r->error.empty() ? 0 : 1);
  }
  std::printf("\n");
  std::vector<actors::ProcStatus> status = h.status(absl::Seconds(5));
  print_status_table(status, /*with_actors=*/false);
  for (const auto& p : status) {
    failures += p.stats.invalid_reference + p.stats.transport + p.stats.port_gone +
                p.stats.expired + p.stats.dropped;
  }
  std::printf("\nfailures: %llu\n", static_cast<unsigned long long>(failures));
  h.teardown();
  std::filesystem::remove_all(dir);
  return failures == 0 ? 0 : 1;
}

}  // namespace postal::tools
