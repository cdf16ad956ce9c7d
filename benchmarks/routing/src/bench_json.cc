// The JSON form of a `postal bench` report (`--json FILE`):
//
//   { "postal_bench": 1, "mode": ..., "machine": {...}, "options": {...},
//     "scenarios": [ {name, transport, hops, size, pattern, messages, msgs_per_s, mb_per_s,
//                     latency_us: {kind, p50, p99, p999, max}, cpu_s_per_million, failures, ...} ],
//     "peers": [ {peer, transport, size, result: <the peer's JSON line>, error} ],
//     "peer_notes": [...], "ratios": [ {name, size, postal, peer, value, target, met} ] }
#include "bench_report.h"
#include "nlohmann/json.hpp"

namespace postal::tools::bench {

std::string to_json(const Report& report) {
  using nlohmann::json;
  const MachineInfo& m = report.machine;
  json out;
  out["postal_bench"] = 1;
  out["mode"] = report.mode;
  out["machine"] = {
      {"nproc", m.nproc},
      {"cpu_model", m.cpu_model},
      {"load_average_start", {m.load_before[0], m.load_before[1], m.load_before[2]}},
      {"load_average_end", {m.load_after[0], m.load_after[1], m.load_after[2]}},
      {"commit", m.commit},
      {"started_utc", m.started_utc},
      {"seconds", m.seconds},
  };
  out["options"] = {{"messages_override", report.messages_override},
                    {"workers_per_proc", report.workers},
                    {"peers", !report.peers_skipped},
                    {"authenticated", report.authenticated},
                    {"tls", report.tls}};
  json scenarios = json::array();
  for (const auto& r : report.scenarios) {
    scenarios.push_back({
        {"name", r.name},
        {"transport", r.transport},
        {"hops", r.hops},
        {"size", r.size},
        {"pattern", r.pattern},
        {"messages", r.messages},
        {"expected", r.expected},
        {"bytes", r.bytes},
        {"seconds", r.seconds},
        {"msgs_per_s", r.msgs_per_s},
        {"mb_per_s", r.mb_per_s},
        {"latency_us",
         {{"kind", r.latency_kind},
          {"p50", r.p50_us},
          {"p99", r.p99_us},
          {"p999", r.p999_us},
          {"max", r.max_us}}},
        {"cpu_seconds", r.cpu_seconds},
        {"peak_rss_procs_mib", r.rss_procs_mib},
        {"peak_rss_bench_mib", r.rss_bench_mib},
        {"cpu_s_per_million", r.cpu_s_per_million},
        {"failures", r.failures},
        {"out_of_order", r.out_of_order},
        {"base_rtt_us", r.base_rtt_us},
        {"window_cap_msgs_per_s", r.window_cap_msgs_per_s},
        {"window_bound", r.window_bound},
        {"error", r.error},
    });
  }
  out["scenarios"] = std::move(scenarios);
  json peers = json::array();
  for (const auto& p : report.peers.runs) {
    peers.push_back({{"peer", p.peer},
                     {"transport", p.transport},
                     {"size", p.size},
                     {"result", p.result},
                     {"error", p.error}});
  }
  out["peers"] = std::move(peers);
  out["peer_notes"] = report.peers.notes;
  json ratios = json::array();
  for (const auto& r : report.ratios) {
    json target = nullptr;
    if (r.has_target()) {
      target = {{"op", r.target == Ratio::Target::kAtLeast ? ">=" : "<="}, {"value", r.threshold}};
    }
    ratios.push_back({{"name", r.name},
                      {"size", r.size},
                      {"postal", r.postal},
                      {"peer", r.peer},
                      {"postal_value", r.postal_value},
                      {"peer_value", r.peer_value},
                      {"unit", r.unit},
                      {"value", r.value},
                      {"percent", r.percent},
                      {"target", target},
                      {"met", r.has_target() ? json(r.met()) : json(nullptr)}});
  }
  out["ratios"] = std::move(ratios);
  // Replace invalid UTF-8 rather than throw: error texts come from peers and the OS.
  return out.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace postal::tools::bench
