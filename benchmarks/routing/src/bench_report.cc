#include "bench_report.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "postal/wire/absl_compat.h"

namespace postal::tools::bench {
namespace {

// The first line `command` prints, or "" when it fails.
std::string first_line(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(command.c_str(), "r"), ::pclose);
  if (!p) return "";
  char buf[256];
  if (std::fgets(buf, sizeof buf, p.get()) == nullptr) return "";
  std::string out(buf);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string commit_in(const std::string& dir) {
  const std::string git = dir.empty() ? "git" : absl::StrCat("git -C '", dir, "'");
  std::string commit = first_line(git + " rev-parse --short HEAD 2>/dev/null");
  if (commit.empty()) return "";
  if (!first_line(git + " status --porcelain --untracked-files=no 2>/dev/null").empty()) {
    commit += "-dirty";
  }
  return commit;
}

}  // namespace

std::string Ratio::target_text() const {
  if (target == Target::kNone) return "-";
  const std::string op = target == Target::kAtLeast ? ">= " : "<= ";
  return percent ? absl::StrCat(op, absl::StrFormat("%.0f %%", threshold * 100))
                 : absl::StrCat(op, absl::StrFormat("%.2fx", threshold));
}

std::string Ratio::postal_text() const {
  return unit == "us" ? micros(postal_value) : absl::StrCat(si(postal_value), " ", unit);
}

std::string Ratio::peer_text() const {
  return unit == "us" ? micros(peer_value) : absl::StrCat(si(peer_value), " ", unit);
}

std::string Ratio::value_text() const {
  return percent ? absl::StrFormat("%.1f %%", value * 100) : absl::StrFormat("%.3gx", value);
}

MachineInfo machine_info() {
  MachineInfo m;
  m.nproc = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      if (auto colon = line.find(':'); colon != std::string::npos)
        m.cpu_model = line.substr(colon + 2);
      break;
    }
  }
  ::getloadavg(m.load_before, 3);
  m.commit = commit_in("");
#ifdef POSTAL_SOURCE_DIR
  if (m.commit.empty()) m.commit = commit_in(POSTAL_SOURCE_DIR);
#endif
  m.started_utc = absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::Now(), absl::UTCTimeZone());
  return m;
}

void finish_machine_info(MachineInfo& info, double seconds) {
  ::getloadavg(info.load_after, 3);
  info.seconds = seconds;
}

std::string si(double v) {
  if (v >= 1e9) return absl::StrFormat("%.2f G", v / 1e9);
  if (v >= 1e6) return absl::StrFormat("%.2f M", v / 1e6);
  if (v >= 1e4) return absl::StrFormat("%.1f k", v / 1e3);
  if (v >= 100) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.3g", v);
}

std::string micros(double us) {
  if (us >= 1e6) return absl::StrFormat("%.2f s", us / 1e6);
  if (us >= 1e3) return absl::StrFormat("%.2f ms", us / 1e3);
  return absl::StrFormat("%.1f us", us);
}

void print_progress_line(size_t index, size_t total, const ScenarioResult& r) {
  std::printf(
      "[%3zu/%zu] %-30s %10s msgs/s %9s MB/s  p50 %-9s  cpu %6.2f s/M msgs  peak RSS %.0f MiB "
      "procs, %.0f MiB bench  failures %llu%s%s%s\n",
      index, total, r.name.c_str(), si(r.msgs_per_s).c_str(),
      absl::StrFormat("%.2f", r.mb_per_s).c_str(), micros(r.p50_us).c_str(), r.cpu_s_per_million,
      r.rss_procs_mib, r.rss_bench_mib, static_cast<unsigned long long>(r.failures),
      r.window_bound ? "  WINDOW-BOUND (raise the window)" : "",
      r.error.empty() ? "" : "  error: ", r.error.c_str());
  std::fflush(stdout);
}

void print_report(const Report& report) {
  const MachineInfo& m = report.machine;
  std::printf(
      "\npostal bench — %s, commit %s, %d CPUs (%s), load average %.2f %.2f %.2f at the "
      "start, %.2f %.2f %.2f at the end\n\n",
      report.mode.c_str(), m.commit.empty() ? "unknown" : m.commit.c_str(), m.nproc,
      m.cpu_model.c_str(), m.load_before[0], m.load_before[1], m.load_before[2], m.load_after[0],
      m.load_after[1], m.load_after[2]);
  std::printf("%-30s %9s %10s %9s  %-7s %9s %9s %9s %9s %10s %8s %11s\n", "scenario", "messages",
              "msgs/s", "MB/s", "latency", "p50", "p99", "p99.9", "max", "cpu s/M", "failures",
              "window cap");
  for (const auto& r : report.scenarios) {
    const std::string cap = r.window_cap_msgs_per_s > 0
                                ? si(r.window_cap_msgs_per_s) + (r.window_bound ? "!" : "")
                                : "-";
    std::printf("%-30s %9llu %10s %9.2f  %-7s %9s %9s %9s %9s %10.2f %8llu %11s%s%s\n",
                r.name.c_str(), static_cast<unsigned long long>(r.messages),
                si(r.msgs_per_s).c_str(), r.mb_per_s, r.latency_kind.c_str(),
                micros(r.p50_us).c_str(), micros(r.p99_us).c_str(), micros(r.p999_us).c_str(),
                micros(r.max_us).c_str(), r.cpu_s_per_million,
                static_cast<unsigned long long>(r.failures), cap.c_str(),
                r.error.empty() ? "" : "  ", r.error.c_str());
  }
  std::printf(
      "\nwindow cap: what the stream drivers' windows allow at the path's unloaded round "
      "trip (Σ targets × window ÷ ping-pong p50 just before); \"!\" marks a scenario "
      "over half of it\n");
  if (report.peers_skipped) std::printf("\npeers: skipped (--no-peers)\n");
  if (!report.authenticated) std::printf("\nchannels: unauthenticated (--no-auth)\n");
  if (report.tls) std::printf("\nchannels: TLS 1.3 on every tcp channel (--tls)\n");
  for (const auto& note : report.peers.notes) std::printf("\nnote: %s", note.c_str());
  if (!report.peers.notes.empty()) std::printf("\n");
  if (report.ratios.empty()) return;
  std::printf("\n%-52s %-6s %15s %15s %10s %10s  %s\n", "ratio", "size", "postal", "peer", "ratio",
              "target", "met?");
  for (const auto& r : report.ratios) {
    std::printf("%-52s %-6s %15s %15s %10s %10s  %s\n", r.name.c_str(), r.size.c_str(),
                r.postal_text().c_str(), r.peer_text().c_str(), r.value_text().c_str(),
                r.target_text().c_str(),
                !r.has_target() ? "-"
                : r.met()       ? "yes"
                                : "NO");
  }
}

}  // namespace postal::tools::bench
