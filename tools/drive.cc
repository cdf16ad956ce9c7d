#include "drive.h"

#include <cstdio>

namespace postal::tools {

absl::StatusOr<routing::DriveResult> drive(routing::Host& host, const DriveSpec& spec,
                                           absl::Duration timeout) {
  routing::DriveRequest request;
  request.pattern = spec.pattern;
  for (const auto& e : spec.echoes) request.targets.push_back(routing::payload_port(e));
  request.messages = spec.messages;
  request.size = spec.size;
  return runtime::request(host.client(), routing::drive_port(spec.driver), std::move(request),
                          timeout);
}

void print_drive_header() {
  std::printf("%-34s %9s %9s %10s %9s  %-8s %8s %8s %8s %9s  %s\n", "workload", "messages",
              "time ms", "msgs/s", "MB/s", "latency", "p50 us", "p99 us", "p99.9 us", "max us",
              "failures");
}

void print_drive_row(const DriveSpec& spec, const routing::DriveResult& r) {
  const double s = r.seconds() > 0 ? r.seconds() : 1e-9;
  auto us = [&](double q) { return static_cast<double>(r.latency.percentile(q)) / 1e3; };
  std::printf("%-34s %9llu %9.1f %10.0f %9.2f  %-8s %8.2f %8.2f %8.2f %9.2f  %llu%s%s\n",
              spec.label.c_str(), static_cast<unsigned long long>(r.messages), s * 1e3,
              static_cast<double>(r.messages) / s, static_cast<double>(r.bytes) / s / 1e6,
              spec.pattern == "ping-pong" ? "rtt" : "one-way", us(0.5), us(0.99), us(0.999),
              static_cast<double>(r.latency.max()) / 1e3,
              static_cast<unsigned long long>(r.failures), r.error.empty() ? "" : "  error: ",
              r.error.c_str());
}

void print_drive_accounting(const routing::DriveResult& r) {
  if (r.failures == 0 && r.unresolved == 0 && !r.stopped) return;
  std::string kinds;
  for (const auto& [kind, n] : r.returned_by_kind) {
    kinds += (kinds.empty() ? "" : ", ") + kind + "=" + std::to_string(n);
  }
  std::printf("accounted: sent %llu = delivered %llu + returned %llu + unresolved %llu; "
              "returned by kind: %s; possibly delivered %llu%s\n",
              static_cast<unsigned long long>(r.sent), static_cast<unsigned long long>(r.messages),
              static_cast<unsigned long long>(r.failures),
              static_cast<unsigned long long>(r.unresolved), kinds.empty() ? "none" : kinds.c_str(),
              static_cast<unsigned long long>(r.possibly_delivered),
              r.stopped ? " (the drive was stopped: unresolved ones were in flight)" : "");
}

void print_status_table(const std::vector<actors::ProcStatus>& status, bool with_actors) {
  std::printf("%-58s %7s %10s %10s %8s %8s  %s\n", "proc", "actors", "posted", "delivered",
              "returned", "dropped", "failures by kind");
  for (const auto& p : status) {
    const auto& s = p.stats;
    std::printf("%-58s %7zu %10llu %10llu %8llu %8llu  invalid_reference=%llu transport=%llu "
                "port_gone=%llu expired=%llu\n",
                p.proc.c_str(), p.actors.size(), static_cast<unsigned long long>(s.posted),
                static_cast<unsigned long long>(s.delivered),
                static_cast<unsigned long long>(s.returned),
                static_cast<unsigned long long>(s.dropped),
                static_cast<unsigned long long>(s.invalid_reference),
                static_cast<unsigned long long>(s.transport),
                static_cast<unsigned long long>(s.port_gone),
                static_cast<unsigned long long>(s.expired));
    if (!with_actors) continue;
    for (const auto& a : p.actors) {
      // R-FLOW-1: the mailbox's depth against its bound.
      std::printf("    %-50s %-12s queued=%llu/%llu bytes=%llu/%llu\n", a.id.c_str(),
                  a.state.c_str(), static_cast<unsigned long long>(a.queued),
                  static_cast<unsigned long long>(a.max_messages),
                  static_cast<unsigned long long>(a.queued_bytes),
                  static_cast<unsigned long long>(a.max_bytes));
    }
  }
}

}  // namespace postal::tools
