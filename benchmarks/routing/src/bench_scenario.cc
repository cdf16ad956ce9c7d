#include "bench_scenario.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "postal/wire/absl_compat.h"

namespace postal::tools::bench {

std::string_view to_string(Transport t) {
  switch (t) {
    case Transport::kInproc:
      return "inproc";
    case Transport::kIpc:
      return "ipc";
    case Transport::kTcp:
      return "tcp";
    case Transport::kNats:
      return "nats";
  }
  return "?";
}

std::string_view to_string(Pattern p) {
  switch (p) {
    case Pattern::kStream:
      return "stream";
    case Pattern::kPingPong:
      return "ping-pong";
    case Pattern::kFanOut:
      return "fan-out";
    case Pattern::kFanIn:
      return "fan-in";
  }
  return "?";
}

std::string size_label(uint64_t bytes) {
  if (bytes >= (1 << 30) && bytes % (1 << 30) == 0) return absl::StrCat(bytes >> 30, "GiB");
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return absl::StrCat(bytes >> 20, "MiB");
  if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return absl::StrCat(bytes >> 10, "KiB");
  return absl::StrCat(bytes, "B");
}

std::string Scenario::name() const {
  return absl::StrCat(sv(to_string(transport)), "/hops", hops, "/", size_label(size), "/",
                      sv(to_string(pattern)));
}

uint64_t default_messages(Pattern pattern, uint64_t size) {
  // Streams: 50 000 payloads, or about 300 MB of bodies for the large sizes; ping-pong: 5 000
  // round trips, or about 60 MB. Never fewer than 100.
  if (pattern == Pattern::kPingPong) {
    return std::clamp<uint64_t>((uint64_t{60} << 20) / size, 100, 5'000);
  }
  // Past 64 MiB (large-message runs, wire.md §9): 3 payloads.
  if (size > (uint64_t{64} << 20)) return 3;
  return std::clamp<uint64_t>((uint64_t{300} << 20) / size, 256, 50'000);
}

// "64B", "1KiB", "256MiB", "1GiB": any whole number of those units, at least 1 byte.
std::optional<uint64_t> parse_size(std::string_view label) {
  for (auto [suffix, shift] :
       {std::pair<std::string_view, int>{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}) {
    if (label.size() <= suffix.size() || label.substr(label.size() - suffix.size()) != suffix) {
      continue;
    }
    const std::string digits(label.substr(0, label.size() - suffix.size()));
    uint64_t n = 0;
    if (!absl::SimpleAtoi(digits, &n) || n == 0 || n > (uint64_t{4} << (30 - shift))) {
      return std::nullopt;
    }
    return n << shift;
  }
  return std::nullopt;
}

absl::StatusOr<Scenario> parse_scenario(std::string_view name) {
  const std::string n(name);
  std::vector<std::string> parts = absl::StrSplit(n, '/');
  auto bad = [&](std::string what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scenario \"", n, "\": ", what,
        "; write <transport>/hops<0|1|2>/<size>/<pattern>, e.g. ipc/hops1/64B/stream "
        "(transports inproc, ipc, tcp, nats; sizes like 64B, 1KiB, 64KiB, 1MiB, 1GiB (at most 4GiB); "
        "patterns stream, ping-pong, "
        "fan-out, fan-in)"));
  };
  if (parts.size() != 4) return bad("it has not four parts");
  Scenario s;
  if (parts[0] == "inproc") {
    s.transport = Transport::kInproc;
  } else if (parts[0] == "ipc") {
    s.transport = Transport::kIpc;
  } else if (parts[0] == "tcp") {
    s.transport = Transport::kTcp;
  } else if (parts[0] == "nats") {
    s.transport = Transport::kNats;
  } else {
    return bad(absl::StrCat("unknown transport \"", parts[0], "\""));
  }
  if (parts[1] == "hops0" || parts[1] == "hops1" || parts[1] == "hops2") {
    s.hops = parts[1][4] - '0';
  } else {
    return bad(absl::StrCat("hops \"", parts[1], "\" is not hops0, hops1 or hops2"));
  }
  std::optional<uint64_t> size = parse_size(parts[2]);
  if (!size) return bad(absl::StrCat("unknown size \"", parts[2], "\""));
  s.size = *size;
  bool pattern_ok = false;
  for (Pattern p : {Pattern::kStream, Pattern::kPingPong, Pattern::kFanOut, Pattern::kFanIn}) {
    if (to_string(p) == parts[3]) {
      s.pattern = p;
      pattern_ok = true;
    }
  }
  if (!pattern_ok) return bad(absl::StrCat("unknown pattern \"", parts[3], "\""));
  s.messages = default_messages(s.pattern, s.size);
  return s;
}

absl::StatusOr<std::vector<Scenario>> suite(std::string_view name) {
  std::vector<Scenario> out;
  if (name == "quick") {
    for (const char* n :
         {"inproc/hops0/64B/ping-pong", "inproc/hops1/64B/stream", "ipc/hops0/64B/stream",
          "ipc/hops1/1KiB/fan-out", "tcp/hops0/64B/ping-pong", "tcp/hops2/64B/fan-in"}) {
      out.push_back(*parse_scenario(n));
    }
    return out;
  }
  if (name == "nats") {  // nats:// channels beside raw NATS (issue 15)
    for (const char* n : {"nats/hops0/64B/stream", "nats/hops0/64B/ping-pong",
                          "nats/hops0/1KiB/stream", "nats/hops1/64B/stream"}) {
      out.push_back(*parse_scenario(n));
    }
    return out;
  }
  if (name != "standard" && name != "full") {
    return absl::InvalidArgumentError(
        absl::StrCat("suite \"", sv(name), "\" is not quick, standard, full or nats"));
  }
  for (Transport t : {Transport::kInproc, Transport::kIpc, Transport::kTcp}) {
    for (int hops = 0; hops <= 2; ++hops) {
      for (uint64_t size : kSizes) {
        if (name == "standard" && size == kSizes[3]) continue;
        for (Pattern p :
             {Pattern::kStream, Pattern::kPingPong, Pattern::kFanOut, Pattern::kFanIn}) {
          Scenario s{t, hops, size, p, default_messages(p, size)};
          out.push_back(s);
        }
      }
    }
  }
  return out;
}

}  // namespace postal::tools::bench
