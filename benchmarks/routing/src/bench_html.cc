// The HTML form of a `postal bench` report (`--html FILE`): one self-contained page — inline CSS
// and SVG drawn by bench_svg.cc, no scripts, nothing fetched — with, in order: the machine and
// load, the ratio table against the peers (targets met or missed), throughput by message size
// (bars per transport, peers beside them), latency distributions per scenario, the cost per
// gateway hop, and every scenario's numbers.
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench_report.h"
#include "bench_svg.h"
#include "postal/wire/absl_compat.h"

namespace postal::tools::bench {
namespace {

const char* kTransportColor[] = {"#16a085", "#2471a3", "#e67e22"};  // inproc, ipc, tcp
const char* kTransports[] = {"inproc", "ipc", "tcp"};
const char* kPatterns[] = {"stream", "ping-pong", "fan-out", "fan-in"};

const ScenarioResult* find(const Report& r, std::string_view transport, int hops, uint64_t size,
                           std::string_view pattern) {
  for (const auto& s : r.scenarios) {
    if (s.transport == transport && s.hops == hops && s.size == size && s.pattern == pattern &&
        s.messages > 0) {
      return &s;
    }
  }
  return nullptr;
}

std::vector<uint64_t> sizes_of(const Report& r) {
  std::set<uint64_t> sizes;
  for (const auto& s : r.scenarios) {
    if (!s.transport.empty()) sizes.insert(s.size);
  }
  return {sizes.begin(), sizes.end()};
}

// Peer figures drawn beside postal's bars: (label, colour, peer, transport, json path).
struct PeerBar {
  const char* label;
  const char* color;
  const char* peer;
  const char* transport;
  const char* object;
  const char* field;
};

const PeerBar kStreamPeers[] = {
    {"raw ipc batched", "#7f8c8d", "raw_socket", "ipc", "stream_batched", "msgs_per_s"},
    {"raw ipc unbatched", "#bdc3c7", "raw_socket", "ipc", "stream_unbatched", "msgs_per_s"},
    {"raw tcp batched", "#5d6d7e", "raw_socket", "tcp", "stream_batched", "msgs_per_s"},
    {"raw tcp unbatched", "#aab7b8", "raw_socket", "tcp", "stream_unbatched", "msgs_per_s"},
    {"CAF remote tcp", "#8e44ad", "caf_remote", "tcp", "stream", "msgs_per_s"},
    {"NATS tcp", "#27ae60", "nats", "tcp", "stream", "msgs_per_s"},
};
const PeerBar kRoundTripPeers[] = {
    {"raw ipc", "#7f8c8d", "raw_socket", "ipc", "round_trip", "round_trips_per_s"},
    {"raw tcp", "#5d6d7e", "raw_socket", "tcp", "round_trip", "round_trips_per_s"},
    {"CAF remote tcp", "#8e44ad", "caf_remote", "tcp", "round_trip", "round_trips_per_s"},
    {"NATS request/reply", "#27ae60", "nats", "tcp", "round_trip", "round_trips_per_s"},
};

std::string throughput_chart(const Report& r, std::string_view pattern, bool mb) {
  BarChart c;
  c.title = absl::StrCat(sv(pattern), mb ? ": MB/s" : ": messages/s", " by size, hops 0");
  c.y_label = mb ? "MB/s (log)" : (pattern == "ping-pong" ? "round trips/s (log)" : "msgs/s (log)");
  c.log_y = true;
  const std::vector<uint64_t> sizes = sizes_of(r);
  for (uint64_t s : sizes) c.categories.push_back(size_label(s));
  for (int t = 0; t < 3; ++t) {
    Series series{absl::StrCat("postal ", kTransports[t]), kTransportColor[t], {}};
    bool any = false;
    for (uint64_t size : sizes) {
      const ScenarioResult* s = find(r, kTransports[t], 0, size, pattern);
      series.values.push_back(s ? (mb ? s->mb_per_s : s->msgs_per_s) : 0);
      any |= s != nullptr;
    }
    if (any) c.series.push_back(std::move(series));
  }
  auto add_peers = [&](const auto& bars) {
    for (const PeerBar& b : bars) {
      Series series{b.label, b.color, {}};
      bool any = false;
      for (uint64_t size : sizes) {
        const PeerRun* p = r.peers.find(b.peer, b.transport, size);
        double v = p ? json_number(p->result, {b.object, b.field}) : 0;
        if (mb && v > 0) v = v * static_cast<double>(size) / 1e6;
        series.values.push_back(v);
        any |= v > 0;
      }
      if (any) c.series.push_back(std::move(series));
    }
  };
  if (pattern == "stream") add_peers(kStreamPeers);
  if (pattern == "ping-pong" && !mb) add_peers(kRoundTripPeers);
  return render(c);
}

std::string latency_chart(const Report& r, std::string_view pattern) {
  RangeChart c;
  c.title = absl::StrCat(sv(pattern), ": latency (",
                         pattern == "ping-pong" ? "round trip" : "one-way, send to echo", ")");
  for (const auto& s : r.scenarios) {
    if (s.pattern == pattern && s.messages > 0) {
      c.rows.push_back({s.name, s.p50_us, s.p99_us, s.p999_us, s.max_us, false});
    }
  }
  for (const auto& p : r.peers.runs) {
    if (!p.error.empty()) continue;
    const char* object = pattern == "ping-pong"                    ? "round_trip"
                         : pattern == "stream" && p.peer == "nats" ? "stream_one_way"
                                                                   : nullptr;
    if (object == nullptr) continue;
    auto v = [&](const char* f) { return json_number(p.result, {object, f}); };
    c.rows.push_back({absl::StrCat("peer ", p.peer, " ", p.transport, " ", size_label(p.size),
                                   pattern == "ping-pong" ? " round trip" : " pub/sub"),
                      v("p50_us"), v("p99_us"), v("p999_us"), v("max_us"), true});
  }
  return render(c);
}

// Per hop: stream msgs/s at hops N relative to hops N-1 (the target: >= 75 %, a cost <= 25 %).
std::string hop_chart(const Report& r) {
  BarChart c;
  c.title = "Cost per gateway hop: stream msgs/s relative to one hop fewer";
  c.y_label = "% of the previous hop count";
  c.reference = 75;
  c.reference_label = "target: each hop keeps >= 75 % (cost <= 25 %)";
  c.format = [](double v) { return absl::StrFormat("%.0f %%", v); };
  Series one{"hops1 / hops0", "#2471a3", {}}, two{"hops2 / hops1", "#85c1e9", {}};
  for (const char* t : kTransports) {
    for (uint64_t size : sizes_of(r)) {
      const ScenarioResult* h[3];
      for (int hops = 0; hops < 3; ++hops) h[hops] = find(r, t, hops, size, "stream");
      if (!(h[0] && h[1]) && !(h[1] && h[2])) continue;  // no pair to compare
      c.categories.push_back(absl::StrCat(t, " ", size_label(size)));
      one.values.push_back(h[0] && h[1] ? 100 * h[1]->msgs_per_s / h[0]->msgs_per_s : 0);
      two.values.push_back(h[1] && h[2] ? 100 * h[2]->msgs_per_s / h[1]->msgs_per_s : 0);
    }
  }
  c.series = {one, two};
  c.clip = 150;  // a hop that made things several times faster would flatten every other bar
  return render(c);
}

std::string cpu_chart(const Report& r) {
  BarChart c;
  c.title = "CPU seconds per million messages, stream, by gateway hops";
  c.y_label = "CPU s / M msgs (log)";
  c.log_y = true;
  Series s[3] = {{"hops0", "#1a5276", {}}, {"hops1", "#2e86c1", {}}, {"hops2", "#aed6f1", {}}};
  for (const char* t : kTransports) {
    for (uint64_t size : sizes_of(r)) {
      const ScenarioResult* h[3];
      bool any = false;
      for (int hops = 0; hops < 3; ++hops) {
        h[hops] = find(r, t, hops, size, "stream");
        any |= h[hops] != nullptr;
      }
      if (!any) continue;
      c.categories.push_back(absl::StrCat(t, " ", size_label(size)));
      for (int hops = 0; hops < 3; ++hops) {
        s[hops].values.push_back(h[hops] ? h[hops]->cpu_s_per_million : 0);
      }
    }
  }
  c.series = {s[0], s[1], s[2]};
  c.format = [](double v) { return absl::StrFormat("%.4g", v); };
  return render(c);
}

std::string ratio_table(const Report& r) {
  if (r.ratios.empty()) {
    return "<p class=\"note\">No ratios: the peers were not run, or no scenario had a peer to "
           "compare with (ratios use the hops-0 stream and ping-pong scenarios and the hop "
           "scenarios).</p>";
  }
  std::string out =
      "<table><tr><th>ratio</th><th>size</th><th>postal</th><th>peer</th><th class=\"n\">postal "
      "value</th><th class=\"n\">peer value</th><th class=\"n\">ratio</th><th>target</th>"
      "<th>met?</th></tr>";
  for (const auto& x : r.ratios) {
    const char* cls = !x.has_target() ? "" : x.met() ? " class=\"met\"" : " class=\"missed\"";
    absl::StrAppend(&out, "<tr", cls, "><td>", escape(x.name), "</td><td>", x.size, "</td><td>",
                    escape(x.postal), "</td><td>", escape(x.peer), "</td><td class=\"n\">",
                    x.postal_text(), "</td><td class=\"n\">", x.peer_text(),
                    "</td><td class=\"n\">", x.value_text(), "</td><td>", escape(x.target_text()),
                    "</td><td>",
                    !x.has_target() ? "—"
                    : x.met()       ? "met"
                                    : "<b>missed</b>",
                    "</td></tr>");
  }
  return out + "</table>";
}

std::string scenario_table(const Report& r) {
  std::string out =
      "<table><tr><th>scenario</th><th class=\"n\">messages</th><th class=\"n\">msgs/s</th>"
      "<th class=\"n\">MB/s</th><th>latency</th><th class=\"n\">p50</th><th class=\"n\">p99</th>"
      "<th class=\"n\">p99.9</th><th class=\"n\">max</th><th class=\"n\">CPU s / M msgs</th>"
      "<th class=\"n\">failures</th><th>error</th></tr>";
  for (const auto& s : r.scenarios) {
    absl::StrAppend(
        &out, "<tr", s.error.empty() ? "" : " class=\"missed\"", "><td>", escape(s.name),
        "</td><td class=\"n\">", s.messages, "</td><td class=\"n\">", si(s.msgs_per_s),
        "</td><td class=\"n\">", absl::StrFormat("%.2f", s.mb_per_s), "</td><td>", s.latency_kind,
        "</td><td class=\"n\">", micros(s.p50_us), "</td><td class=\"n\">", micros(s.p99_us),
        "</td><td class=\"n\">", micros(s.p999_us), "</td><td class=\"n\">", micros(s.max_us),
        "</td><td class=\"n\">", absl::StrFormat("%.2f", s.cpu_s_per_million),
        "</td><td class=\"n\">", s.failures, "</td><td>", escape(s.error), "</td></tr>");
  }
  return out + "</table>";
}

std::string peer_table(const Report& r) {
  std::string out;
  if (r.peers_skipped) out += "<p class=\"note\">Peers skipped (<code>--no-peers</code>).</p>";
  if (!r.authenticated) {
    out += "<p class=\"note\">Channels unauthenticated (<code>--no-auth</code>).</p>";
  }
  for (const auto& n : r.peers.notes)
    absl::StrAppend(&out, "<p class=\"note\">", escape(n), "</p>");
  if (r.peers.runs.empty()) return out;
  out +=
      "<table><tr><th>peer</th><th>transport</th><th>size</th><th class=\"n\">stream msgs/s</th>"
      "<th class=\"n\">batched msgs/s</th><th class=\"n\">round trip p50</th>"
      "<th class=\"n\">round trip p99</th><th>error</th></tr>";
  for (const auto& p : r.peers.runs) {
    const bool raw = p.peer == "raw_socket";
    const double stream =
        json_number(p.result, {raw ? "stream_unbatched" : "stream", "msgs_per_s"});
    const double batched = raw ? json_number(p.result, {"stream_batched", "msgs_per_s"}) : -1;
    absl::StrAppend(
        &out, "<tr><td>", p.peer, "</td><td>", p.transport, "</td><td>", size_label(p.size),
        "</td><td class=\"n\">", stream > 0 ? si(stream) : "—", "</td><td class=\"n\">",
        batched > 0 ? si(batched) : "—", "</td><td class=\"n\">",
        micros(json_number(p.result, {"round_trip", "p50_us"})), "</td><td class=\"n\">",
        micros(json_number(p.result, {"round_trip", "p99_us"})), "</td><td>", escape(p.error),
        "</td></tr>");
  }
  return out + "</table>";
}

constexpr char kStyle[] = R"(<style>
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1240px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 12px; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; white-space: nowrap; }
th { background: #f0f0f0; } td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.met td { background: #e9f7ef; } tr.missed td { background: #fdedec; }
.note { color: #7d6608; background: #fef9e7; padding: 6px 10px; border-left: 3px solid #f1c40f; }
.meta td { border: none; padding: 1px 12px 1px 0; font-size: 13px; }
svg { display: block; margin: 12px 0; }
</style>)";

}  // namespace

std::string to_html(const Report& r) {
  const MachineInfo& m = r.machine;
  std::string out = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>postal bench: ",
      escape(r.mode), "</title>", kStyle, "</head><body><h1>postal bench — routing</h1>",
      "<table class=\"meta\"><tr><td>run</td><td>", escape(r.mode),
      "</td></tr><tr><td>commit</td><td>", escape(m.commit.empty() ? "unknown" : m.commit),
      "</td></tr><tr><td>started</td><td>", escape(m.started_utc),
      absl::StrFormat(", %.0f s", m.seconds), "</td></tr><tr><td>machine</td><td>", m.nproc,
      " CPUs (nproc), ", escape(m.cpu_model), "</td></tr><tr><td>load average</td><td>",
      absl::StrFormat("%.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end", m.load_before[0],
                      m.load_before[1], m.load_before[2], m.load_after[0], m.load_after[1],
                      m.load_after[2]),
      "</td></tr><tr><td>procs</td><td>", r.workers, " worker thread(s) per proc",
      r.messages_override > 0 ? absl::StrCat("; --messages ", r.messages_override) : "",
      "</td></tr></table>");
  if (m.load_before[0] > 0.25 * m.nproc || m.load_after[0] > 0.25 * m.nproc) {
    absl::StrAppend(&out,
                    "<p class=\"note\">The machine was busy (load average above a quarter "
                    "of its CPUs): other work competed with the benchmark, so these numbers "
                    "are noisy. Measure on a quiet machine before comparing.</p>");
  }
  absl::StrAppend(&out, "<h2>Ratios against the peers</h2>", ratio_table(r));
  absl::StrAppend(&out, "<h2>Throughput by message size</h2>");
  for (const char* p : kPatterns) absl::StrAppend(&out, throughput_chart(r, p, false));
  absl::StrAppend(&out, throughput_chart(r, "stream", true));
  absl::StrAppend(&out, "<h2>Latency distributions</h2>");
  for (const char* p : kPatterns) absl::StrAppend(&out, latency_chart(r, p));
  absl::StrAppend(&out, "<h2>Cost per gateway hop</h2>", hop_chart(r), cpu_chart(r));
  absl::StrAppend(&out, "<h2>Every scenario</h2>", scenario_table(r));
  absl::StrAppend(&out, "<h2>Peers</h2>", peer_table(r));
  absl::StrAppend(&out, "</body></html>\n");
  return out;
}

}  // namespace postal::tools::bench
