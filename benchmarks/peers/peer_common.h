// What the routing benchmark's peer programs share: flags, clocks, percentiles and the one JSON
// line each prints. Header-only, standard library only, so that every peer builds without postal.
//
// Flags are `--name value` or `--name=value`. A peer prints exactly one line of JSON on stdout
// (its results) and exits 0; on error it prints `{"error": "..."}` and exits 1, so `postal bench`
// can always parse what it got.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace postal_peers {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// `--key value` / `--key=value` pairs; a bare `--key` at the end maps to "".
inline std::map<std::string, std::string> parse_flags(int argc, char** argv) {
  std::map<std::string, std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.substr(0, 2) != "--") continue;
    arg.remove_prefix(2);
    if (auto eq = arg.find('='); eq != std::string_view::npos) {
      out[std::string(arg.substr(0, eq))] = std::string(arg.substr(eq + 1));
    } else if (i + 1 < argc) {
      out[std::string(arg)] = argv[++i];
    } else {
      out[std::string(arg)] = "";
    }
  }
  return out;
}

inline uint64_t flag_u64(const std::map<std::string, std::string>& flags, const std::string& key,
                         uint64_t fallback) {
  auto it = flags.find(key);
  if (it == flags.end() || it->second.empty()) return fallback;
  return std::strtoull(it->second.c_str(), nullptr, 10);
}

inline std::string flag_str(const std::map<std::string, std::string>& flags, const std::string& key,
                            std::string fallback) {
  auto it = flags.find(key);
  return it == flags.end() ? fallback : it->second;
}

[[noreturn]] inline void fail(const std::string& peer, const std::string& what) {
  std::string clean;
  for (char c : what) clean += (c == '"' || c == '\\' || c < 0x20) ? ' ' : c;
  std::printf("{\"peer\": \"%s\", \"error\": \"%s\"}\n", peer.c_str(), clean.c_str());
  std::fflush(stdout);
  std::exit(1);
}

// A stream's figures as a JSON object.
inline std::string stream_json(uint64_t messages, uint64_t size, int64_t elapsed_ns) {
  const double s = static_cast<double>(std::max<int64_t>(elapsed_ns, 1)) / 1e9;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "{\"messages\": %llu, \"seconds\": %.6f, \"msgs_per_s\": %.1f, \"mb_per_s\": %.3f}",
                static_cast<unsigned long long>(messages), s, static_cast<double>(messages) / s,
                static_cast<double>(messages * size) / s / 1e6);
  return buf;
}

// Round-trip latencies (ns, any order) as a JSON object with microsecond percentiles.
inline std::string round_trip_json(std::vector<int64_t> ns, int64_t elapsed_ns) {
  if (ns.empty()) return "{\"messages\": 0}";
  std::sort(ns.begin(), ns.end());
  auto at = [&](double q) {
    size_t i = static_cast<size_t>(q * static_cast<double>(ns.size() - 1));
    return static_cast<double>(ns[i]) / 1e3;
  };
  const double s = static_cast<double>(std::max<int64_t>(elapsed_ns, 1)) / 1e9;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "{\"messages\": %zu, \"round_trips_per_s\": %.1f, \"p50_us\": %.3f, \"p99_us\": "
                "%.3f, \"p999_us\": %.3f, \"max_us\": %.3f}",
                ns.size(), static_cast<double>(ns.size()) / s, at(0.5), at(0.99), at(0.999),
                static_cast<double>(ns.back()) / 1e3);
  return buf;
}

}  // namespace postal_peers
