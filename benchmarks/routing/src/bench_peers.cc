#include "bench_peers.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "nats_server.h"
#include "postal/wire/absl_compat.h"

namespace postal::tools::bench {
namespace {

using postal::bench::find_nats_server;
using postal::bench::NatsServer;
using postal::bench::spawn_child;

namespace fs = std::filesystem;

bool executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// The peer program `name`: in --peers-dir, next to postal, or in the build tree's
// benchmarks/peers/ (postal is <build>/tools/postal). Empty when not found.
std::string find_peer(const PeerOptions& o, const std::string& name) {
  std::vector<fs::path> dirs;
  if (!o.peers_dir.empty()) dirs.emplace_back(o.peers_dir);
  const fs::path self_dir = fs::path(o.self_binary).parent_path();
  dirs.push_back(self_dir);
  dirs.push_back(self_dir.parent_path() / "benchmarks" / "peers");
  for (const auto& d : dirs) {
    if (executable(d / name)) return (d / name).string();
  }
  return "";
}

// Runs `args` and returns the last line it printed on stdout; kills it after `timeout`.
absl::StatusOr<std::string> run_capture(const std::vector<std::string>& args,
                                        absl::Duration timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  absl::StatusOr<pid_t> pid = spawn_child(args, fds[1], false);
  ::close(fds[1]);
  if (!pid.ok()) {
    ::close(fds[0]);
    return pid.status();
  }
  std::string out;
  const absl::Time deadline = absl::Now() + timeout;
  bool timed_out = false;
  for (;;) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1000)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    char buf[4096];
    ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(*pid, SIGKILL);
  int status = 0;
  ::waitpid(*pid, &status, 0);
  if (timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat(args[0], " did not finish within ", absl::FormatDuration(timeout)));
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  const size_t nl = out.rfind('\n');
  std::string last = nl == std::string::npos ? out : out.substr(nl + 1);
  if (last.empty()) {
    return absl::InternalError(absl::StrCat(args[0], " printed nothing (exit status ",
                                            WIFEXITED(status) ? WEXITSTATUS(status) : -1, ")"));
  }
  return last;
}

std::string summary(const PeerRun& run) {
  if (!run.error.empty()) return absl::StrCat("failed: ", run.error);
  auto k = [](double v) { return absl::StrCat(static_cast<int64_t>(v / 1e3), " k"); };
  if (run.peer == "raw_socket") {
    return absl::StrCat(
        k(json_number(run.result, {"stream_unbatched", "msgs_per_s"})), " msgs/s unbatched, ",
        k(json_number(run.result, {"stream_batched", "msgs_per_s"})), " msgs/s batched, ",
        k(json_number(run.result, {"stream_framed", "msgs_per_s"})),
        " msgs/s framed, round trip p50 ",
        static_cast<int64_t>(json_number(run.result, {"round_trip", "p50_us"})), " us");
  }
  return absl::StrCat(
      k(json_number(run.result, {"stream", "msgs_per_s"})), " msgs/s stream, round trip p50 ",
      static_cast<int64_t>(json_number(run.result, {"round_trip", "p50_us"})), " us");
}

PeerRun run_one(const std::string& peer, const std::string& transport, uint64_t size,
                std::vector<std::string> args) {
  PeerRun run{peer, transport, size, nlohmann::json::object(), ""};
  absl::StatusOr<std::string> line = run_capture(args, absl::Minutes(5));
  if (!line.ok()) {
    run.error = std::string(line.status().message());
    return run;
  }
  nlohmann::json j = nlohmann::json::parse(*line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    run.error = absl::StrCat(peer, " printed a line that is not a JSON object: ", *line);
    return run;
  }
  if (j.contains("error"))
    run.error = j["error"].is_string() ? j["error"].get<std::string>() : "error";
  run.result = std::move(j);
  return run;
}

}  // namespace

double json_number(const nlohmann::json& j, std::initializer_list<const char*> path) {
  const nlohmann::json* at = &j;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return -1;
    at = &(*at)[key];
  }
  return at->is_number() ? at->get<double>() : -1;
}

const PeerRun* PeerSet::find(std::string_view peer, std::string_view transport,
                             uint64_t size) const {
  for (const auto& r : runs) {
    if (r.peer == peer && r.transport == transport && r.size == size && r.error.empty()) return &r;
  }
  return nullptr;
}

namespace {

// The flags every peer takes: the size and the message counts of postal's own scenarios.
std::vector<std::string> count_flags(const PeerOptions& o, uint64_t size) {
  const uint64_t stream = o.messages > 0 ? o.messages : default_messages(Pattern::kStream, size);
  const uint64_t rtt = o.messages > 0 ? o.messages : default_messages(Pattern::kPingPong, size);
  return {"--size",         std::to_string(size), "--messages", std::to_string(stream),
          "--rtt-messages", std::to_string(rtt)};
}

class PeerRunner {
 public:
  PeerRunner(const PeerOptions& o, PeerSet& out) : o_(o), out_(out) {}

  // Runs `binary` (or notes `missing` when it was not found) once per size, with `extra` flags.
  void each_size(const std::string& peer, const std::string& transport, const std::string& binary,
                 const std::set<uint64_t>& sizes, const std::vector<std::string>& extra,
                 const std::string& missing) {
    if (sizes.empty()) return;
    if (binary.empty()) {
      if (!missing.empty()) out_.notes.push_back(missing);
      return;
    }
    for (uint64_t size : sizes) {
      std::vector<std::string> args{binary};
      args.insert(args.end(), extra.begin(), extra.end());
      for (auto& a : count_flags(o_, size)) args.push_back(a);
      PeerRun run = run_one(peer, transport, size, args);
      if (o_.progress) {
        o_.progress(
            absl::StrCat("peer ", peer, " ", transport, " ", size_label(size), ": ", summary(run)));
      }
      out_.runs.push_back(std::move(run));
    }
  }

 private:
  const PeerOptions& o_;
  PeerSet& out_;
};

}  // namespace

PeerSet run_peers(const std::vector<Scenario>& scenarios, const PeerOptions& o) {
  PeerSet out;
  std::set<uint64_t> ipc_sizes, tcp_sizes, nats_sizes;
  for (const auto& s : scenarios) {
    if (s.transport == Transport::kIpc) ipc_sizes.insert(s.size);
    if (s.transport == Transport::kTcp) tcp_sizes.insert(s.size);
    if (s.transport == Transport::kNats) nats_sizes.insert(s.size);
  }
  PeerRunner runner(o, out);
  const std::string raw = find_peer(o, "raw_socket_bench");
  const std::string no_raw =
      "raw_socket_bench not found (build the target raw_socket_bench, or "
      "pass --peers-dir): no raw-socket floor";
  runner.each_size("raw_socket", "ipc", raw, ipc_sizes, {"--transport", "ipc"}, no_raw);
  runner.each_size("raw_socket", "tcp", raw, tcp_sizes, {"--transport", "tcp"},
                   ipc_sizes.empty() ? no_raw : "");  // the note once
  if (tcp_sizes.empty() && nats_sizes.empty()) return out;

  if (!tcp_sizes.empty()) {
    runner.each_size("caf_remote", "tcp", find_peer(o, "caf_remote_bench"), tcp_sizes,
                     {"--threads", std::to_string(o.workers), "--window", std::to_string(o.window)},
                     "caf_remote_bench not found (needs libcaf-dev; build the target "
                     "caf_remote_bench): no CAF remote-actor peer");
  }

  const std::string nats = find_peer(o, "nats_bench");
  const std::string nats_server = find_nats_server();
  if (nats.empty() || nats_server.empty()) {
    out.notes.push_back(nats.empty() ? "nats_bench not found (needs libnats-dev; build the target "
                                       "nats_bench): no NATS peer"
                                     : "nats-server not found on PATH or in /usr/sbin (apt-get "
                                       "install nats-server): no NATS peer");
    return out;
  }
  absl::StatusOr<std::unique_ptr<NatsServer>> server = NatsServer::start({.binary = nats_server});
  if (!server.ok()) {
    out.notes.push_back(
        absl::StrCat("nats-server did not start: ", server.status().message(), ": no NATS peer"));
    return out;
  }
  const std::string window = std::to_string(o.window);
  runner.each_size("nats", "tcp", nats, tcp_sizes, {"--url", (*server)->url(), "--window", window},
                   "");
  // The same raw NATS, beside postal's nats:// channels (their own nats-server, bench_rig.cc).
  runner.each_size("nats", "nats", nats, nats_sizes, {"--url", (*server)->url(), "--window", window},
                   "");
  return out;
}

}  // namespace postal::tools::bench
