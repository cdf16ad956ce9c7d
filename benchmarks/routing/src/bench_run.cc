#include "bench_run.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "postal/routing/workload.h"
#include "postal/wire/absl_compat.h"

namespace postal::tools::bench {
namespace {

double self_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// utime + stime of `pid` from /proc/<pid>/stat (fields 14 and 15, after the command in parens).
double pid_cpu_seconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return 0;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

struct Drive {
  runtime::ActorAddr driver;
  std::vector<runtime::ActorAddr> targets;
};

std::vector<Drive> drives_of(const Rig& rig, Pattern pattern) {
  const auto& d = rig.drivers();
  const auto& e = rig.echoes();
  switch (pattern) {
    case Pattern::kStream:
    case Pattern::kPingPong:
      return {Drive{d[0], {e[0]}}};
    case Pattern::kFanOut:
      return {Drive{d[0], e}};
    case Pattern::kFanIn: {
      std::vector<Drive> out;
      for (const auto& driver : d) out.push_back(Drive{driver, {e[0]}});
      return out;
    }
  }
  return {};
}

// Starts every drive at once and waits for all their results.
std::vector<absl::StatusOr<routing::DriveResult>> run_drives(
    Rig& rig, const std::vector<Drive>& drives, const std::string& pattern, uint64_t messages,
    uint64_t size, absl::Duration timeout, uint64_t window = routing::kDefaultWindow) {
  std::vector<runtime::OnceReceiver<routing::DriveResult>> receivers;
  for (const Drive& d : drives) {
    auto [reply_to, receiver] = runtime::open_once_port<routing::DriveResult>(rig.client());
    routing::DriveRequest request;
    request.pattern = pattern;
    for (const auto& t : d.targets) request.targets.push_back(routing::payload_port(t));
    request.messages = messages;
    request.size = size;
    request.window = window;
    request.reply_to = std::move(reply_to);
    // As runtime::request does: a request that comes back undeliverable fails its receiver at
    // once instead of waiting out the deadline.
    wire::Headers headers;
    headers.set(runtime::kReplyPortHeader, receiver.index());
    routing::drive_port(d.driver).send(rig.client(), std::move(request), std::move(headers));
    receivers.push_back(std::move(receiver));
  }
  std::vector<absl::StatusOr<routing::DriveResult>> out;
  const absl::Time deadline = absl::Now() + timeout;
  for (auto& r : receivers)
    out.push_back(r.recv(std::max(deadline - absl::Now(), absl::Seconds(1))));
  return out;
}

}  // namespace

double cpu_seconds(const std::vector<pid_t>& pids) {
  double total = self_cpu_seconds();
  for (pid_t pid : pids) total += pid_cpu_seconds(pid);
  return total;
}

double peak_rss_mib(pid_t pid) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status")
                            : absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    uint64_t kib = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::StripSuffix(line.substr(6), "kB")),
                         &kib)) {
      return static_cast<double>(kib) / 1024.0;
    }
  }
  return 0;
}

void reset_peak_rss(pid_t pid) {
  std::ofstream out(pid == 0 ? std::string("/proc/self/clear_refs")
                             : absl::StrCat("/proc/", pid, "/clear_refs"));
  out << "5";
}

ScenarioResult run_scenario(Rig& rig, const Scenario& scenario, absl::Duration timeout) {
  ScenarioResult r;
  r.name = scenario.name();
  r.transport = std::string(to_string(scenario.transport));
  r.hops = scenario.hops;
  r.size = scenario.size;
  r.pattern = std::string(to_string(scenario.pattern));
  r.latency_kind = scenario.pattern == Pattern::kPingPong ? "rtt" : "one-way";
  const std::vector<Drive> drives = drives_of(rig, scenario.pattern);
  // A fan's messages split evenly over its targets (fan-out) or drivers (fan-in).
  const uint64_t width =
      scenario.pattern == Pattern::kFanOut ? drives[0].targets.size() : drives.size();
  const uint64_t per_drive = std::max<uint64_t>(1, (scenario.messages + width - 1) / width);
  r.expected = per_drive * width;
  const std::vector<pid_t> pids = rig.pids();

  double base_rtt_ns = 0;
  // Past the drivers' byte window (one payload in flight) a window cannot be the limit, and 100
  // round trips of such payloads would take longer than the stream itself.
  if (scenario.pattern != Pattern::kPingPong && scenario.size <= routing::kMaxWindowBytes) {
    routing::LatencyHistogram rtt;
    for (auto& pp : run_drives(rig, drives_of(rig, Pattern::kPingPong), "ping-pong", 100,
                               scenario.size, absl::Seconds(30))) {
      if (pp.ok()) rtt.merge(pp->latency);
    }
    base_rtt_ns = static_cast<double>(rtt.percentile(0.5));
  }

  reset_peak_rss(0);
  for (pid_t pid : pids) reset_peak_rss(pid);
  const double cpu_before = cpu_seconds(pids);
  auto results =
      run_drives(rig, drives, scenario.pattern == Pattern::kPingPong ? "ping-pong" : "stream",
                 per_drive, scenario.size, timeout, scenario.window);
  r.cpu_seconds = cpu_seconds(pids) - cpu_before;
  r.rss_bench_mib = peak_rss_mib(0);
  for (pid_t pid : pids) r.rss_procs_mib = std::max(r.rss_procs_mib, peak_rss_mib(pid));

  routing::LatencyHistogram latency;
  double window_sum = 0;  // Σ over drives of targets × window
  int64_t start = INT64_MAX, end = INT64_MIN;
  for (size_t i = 0; i < results.size(); ++i) {
    auto& result = results[i];
    if (!result.ok()) {
      ++r.failures;
      if (r.error.empty()) r.error = absl::StrCat("drive: ", result.status().message());
      continue;
    }
    r.messages += result->messages;
    r.bytes += result->bytes;
    r.failures += result->failures;
    r.out_of_order += result->out_of_order;
    if (r.error.empty() && !result->error.empty()) r.error = result->error;
    latency.merge(result->latency);
    window_sum += static_cast<double>(result->window * drives[i].targets.size());
    start = std::min(start, result->start_ns);
    end = std::max(end, result->end_ns);
  }
  if (r.error.empty() && r.messages != r.expected) {
    r.error = absl::StrCat(r.messages, " of ", r.expected, " messages delivered");
  }
  r.seconds = end > start ? static_cast<double>(end - start) / 1e9 : 0;
  if (r.seconds > 0) {
    r.msgs_per_s = static_cast<double>(r.messages) / r.seconds;
    r.mb_per_s = static_cast<double>(r.bytes) / r.seconds / 1e6;
  }
  auto us = [&](double q) { return static_cast<double>(latency.percentile(q)) / 1e3; };
  r.p50_us = us(0.5);
  r.p99_us = us(0.99);
  r.p999_us = us(0.999);
  r.max_us = static_cast<double>(latency.max()) / 1e3;
  if (r.messages > 0) r.cpu_s_per_million = r.cpu_seconds / static_cast<double>(r.messages) * 1e6;
  if (base_rtt_ns > 0) {
    r.base_rtt_us = base_rtt_ns / 1e3;
    r.window_cap_msgs_per_s = window_sum / (base_rtt_ns / 1e9);
    r.window_bound = r.msgs_per_s > 0.5 * r.window_cap_msgs_per_s;
  }
  return r;
}

std::string warm_up(Rig& rig, uint64_t messages) {
  const uint64_t stream = std::clamp<uint64_t>(messages, 256, 2048);
  for (Pattern p : {Pattern::kPingPong, Pattern::kFanIn, Pattern::kFanOut}) {
    const uint64_t n = p == Pattern::kPingPong ? std::min<uint64_t>(200, stream) : stream;
    auto results =
        run_drives(rig, drives_of(rig, p), p == Pattern::kPingPong ? "ping-pong" : "stream", n, 64,
                   absl::Seconds(60));
    for (auto& r : results) {
      if (!r.ok()) return absl::StrCat("warm-up: ", r.status().message());
      if (!r->error.empty()) return absl::StrCat("warm-up: ", r->error);
    }
  }
  return "";
}

}  // namespace postal::tools::bench
