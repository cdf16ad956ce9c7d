// The ratios of a `postal bench` run against its peers and across gateway hops (the list and
// targets are in bench_report.h). A ratio is made only when both of its sides were measured in
// this run, and never from a scenario that failed.
#include "absl/strings/str_cat.h"
#include "bench_report.h"

namespace postal::tools::bench {
namespace {

class RatioMaker {
 public:
  RatioMaker(const std::vector<ScenarioResult>& scenarios, const PeerSet& peers, uint64_t size)
      : scenarios_(scenarios), peers_(peers), size_(size), label_(size_label(size)) {}

  // The successful scenario `<transport>/hops<hops>/<this size>/<pattern>`, or null.
  const ScenarioResult* scenario(const char* transport, int hops, const char* pattern) const {
    const std::string name = absl::StrCat(transport, "/hops", hops, "/", label_, "/", pattern);
    for (const auto& s : scenarios_) {
      if (s.name == name && s.error.empty() && s.messages > 0) return &s;
    }
    return nullptr;
  }
  const PeerRun* peer(const char* name, const char* transport) const {
    return peers_.find(name, transport, size_);
  }

  // Appends `postal_value / peer_value` (both measured) with an optional target.
  void ratio(std::vector<Ratio>& out, std::string name, const std::string& postal, std::string peer,
             double postal_value, double peer_value, Ratio::Target target = Ratio::Target::kNone,
             double threshold = 0, const char* unit = "msgs/s") const {
    if (!(postal_value > 0 && peer_value > 0)) return;
    Ratio r{std::move(name), label_, postal, std::move(peer)};
    r.postal_value = postal_value;
    r.peer_value = peer_value;
    r.value = postal_value / peer_value;
    r.target = target;
    r.threshold = threshold;
    r.unit = unit;
    out.push_back(std::move(r));
  }

 private:
  const std::vector<ScenarioResult>& scenarios_;
  const PeerSet& peers_;
  const uint64_t size_;
  const std::string label_;
};

// ipc stream against the raw Unix-socket floor, batched (the target) and unbatched.
void floor_ratios(const RatioMaker& m, std::vector<Ratio>& out) {
  const ScenarioResult* s = m.scenario("ipc", 0, "stream");
  const PeerRun* raw = m.peer("raw_socket", "ipc");
  if (s == nullptr || raw == nullptr) return;
  m.ratio(out, "ipc stream / raw Unix floor (batched)", s->name,
          "raw_socket ipc stream_batched msgs/s", s->msgs_per_s,
          json_number(raw->result, {"stream_batched", "msgs_per_s"}), Ratio::Target::kAtLeast,
          0.70);
  m.ratio(out, "ipc stream / raw Unix floor (unbatched)", s->name,
          "raw_socket ipc stream_unbatched msgs/s", s->msgs_per_s,
          json_number(raw->result, {"stream_unbatched", "msgs_per_s"}));
  m.ratio(out, "ipc stream / framed floor (parses, copies)", s->name,
          "raw_socket ipc stream_framed msgs/s", s->msgs_per_s,
          json_number(raw->result, {"stream_framed", "msgs_per_s"}));
}

// tcp stream against CAF remote actors and NATS publish/subscribe, with issue 9's targets.
void tcp_stream_ratios(const RatioMaker& m, std::vector<Ratio>& out) {
  const ScenarioResult* s = m.scenario("tcp", 0, "stream");
  if (s == nullptr) return;
  if (const PeerRun* caf = m.peer("caf_remote", "tcp")) {
    m.ratio(out, "tcp stream / CAF remote stream", s->name, "caf_remote stream msgs/s",
            s->msgs_per_s, json_number(caf->result, {"stream", "msgs_per_s"}),
            Ratio::Target::kAtLeast, 5.0);  // issue 9
  }
  if (const PeerRun* nats = m.peer("nats", "tcp")) {
    m.ratio(out, "tcp stream / NATS pub/sub", s->name, "nats stream msgs/s", s->msgs_per_s,
            json_number(nats->result, {"stream", "msgs_per_s"}), Ratio::Target::kAtLeast, 1.0);
  }
}

// nats:// channels against raw NATS on the same kind of server (issue 15's targets: at most 25 %
// throughput overhead, at most 1.3x the p50 round trip).
void nats_ratios(const RatioMaker& m, std::vector<Ratio>& out) {
  const PeerRun* nats = m.peer("nats", "nats");
  if (nats == nullptr) return;
  if (const ScenarioResult* s = m.scenario("nats", 0, "stream")) {
    m.ratio(out, "nats:// stream / NATS pub/sub", s->name, "nats stream msgs/s", s->msgs_per_s,
            json_number(nats->result, {"stream", "msgs_per_s"}), Ratio::Target::kAtLeast, 0.75);
  }
  if (const ScenarioResult* s = m.scenario("nats", 0, "ping-pong")) {
    m.ratio(out, "nats:// ping-pong p50 / NATS request/reply p50", s->name,
            "nats nats round_trip p50_us", s->p50_us,
            json_number(nats->result, {"round_trip", "p50_us"}), Ratio::Target::kAtMost, 1.3,
            "us");
  }
}

// Ping-pong p50 against the raw round trip (the target), CAF's and NATS request/reply.
void round_trip_ratios(const RatioMaker& m, std::vector<Ratio>& out) {
  struct Peer {
    const char* name;
    const char* what;
  };
  for (const char* transport : {"ipc", "tcp"}) {
    const ScenarioResult* s = m.scenario(transport, 0, "ping-pong");
    if (s == nullptr) continue;
    for (Peer p :
         {Peer{"raw_socket", "raw round trip p50"}, Peer{"caf_remote", "CAF round trip p50"},
          Peer{"nats", "NATS request/reply p50"}}) {
      const PeerRun* run = m.peer(p.name, transport);
      if (run == nullptr) continue;
      const bool raw = std::string_view(p.name) == "raw_socket";
      m.ratio(out, absl::StrCat(transport, " ping-pong p50 / ", p.what), s->name,
              absl::StrCat(p.name, " ", transport, " round_trip p50_us"), s->p50_us,
              json_number(run->result, {"round_trip", "p50_us"}),
              raw ? Ratio::Target::kAtMost : Ratio::Target::kNone, 1.5, "us");
    }
  }
}

// Per gateway hop: 1 - stream msgs/s at hops N / at hops N-1.
void hop_ratios(const RatioMaker& m, std::vector<Ratio>& out) {
  for (const char* transport : {"inproc", "ipc", "tcp"}) {
    for (int hops = 1; hops <= 2; ++hops) {
      const ScenarioResult* before = m.scenario(transport, hops - 1, "stream");
      const ScenarioResult* after = m.scenario(transport, hops, "stream");
      if (before == nullptr || after == nullptr) continue;
      const size_t n = out.size();
      m.ratio(out,
              absl::StrCat(transport, " gateway hop cost (hops", hops - 1, " -> hops", hops, ")"),
              after->name, before->name, after->msgs_per_s, before->msgs_per_s,
              Ratio::Target::kAtMost, 0.25);
      if (out.size() == n) continue;
      out.back().value = 1.0 - out.back().value;  // the share of throughput the hop cost
      out.back().percent = true;
    }
  }
}

}  // namespace

std::vector<Ratio> compute_ratios(const std::vector<ScenarioResult>& scenarios,
                                  const PeerSet& peers) {
  // One list per kind of ratio, each in size order; the kinds follow one another.
  std::vector<Ratio> kinds[5];
  for (uint64_t size : kSizes) {
    const RatioMaker m(scenarios, peers, size);
    floor_ratios(m, kinds[0]);
    tcp_stream_ratios(m, kinds[1]);
    round_trip_ratios(m, kinds[2]);
    hop_ratios(m, kinds[3]);
    nats_ratios(m, kinds[4]);
  }
  std::vector<Ratio> out;
  for (auto& kind : kinds) out.insert(out.end(), kind.begin(), kind.end());
  return out;
}

}  // namespace postal::tools::bench
