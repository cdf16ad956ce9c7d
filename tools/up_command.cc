// `postal up FILE`: the host agent in the foreground.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "commands.h"
#include "drive.h"
#include "postal/wire/absl_compat.h"
#include "topology_state.h"

namespace postal::tools {
namespace {

// Watches the host's children: every exit is printed and recorded in the state file at once
// (`postal status` shows the proc dead), during the workload as after it.
class Supervision {
 public:
  explicit Supervision(routing::Host& host) : host_(host) {}

  // Waits up to `wait` for a child to exit; true when the topology must stop (on_proc_exit =
  // teardown).
  bool poll(absl::Duration wait) {
    std::optional<routing::ProcExit> exit = host_.next_exit(wait);
    if (!exit) return false;
    std::printf("supervision: proc %s\n", exit->to_string().c_str());
    exits_.push_back(*exit);
    (void)write_topology_state(host_, exits_);
    if (host_.spec().on_proc_exit != routing::OnProcExit::kTeardown) return false;
    std::printf("on_proc_exit = teardown: stopping the topology\n");
    return true;
  }
  const std::vector<routing::ProcExit>& exits() const { return exits_; }

 private:
  routing::Host& host_;
  std::vector<routing::ProcExit> exits_;
};

// Runs the file's [workload] once, if it has one, and prints the result; a signal abandons it,
// and so does a proc's death when the topology tears down on one (it is seen at once, not after
// the workload's delivery timeout). Sets `stop` when the topology must stop.
bool run_workload(routing::Host& host, const std::atomic<int>& signalled, Supervision& supervision,
                  bool& stop) {
  const auto& w = host.spec().workload;
  if (!w) return true;
  std::optional<runtime::ActorAddr> from = host.actor_addr(w->from.proc, w->from.actor);
  std::optional<runtime::ActorAddr> to = host.actor_addr(w->to.proc, w->to.actor);
  if (!from || !to) {
    std::fprintf(stderr, "postal up: the workload's actors were not spawned\n");
    return false;
  }
  DriveSpec spec{absl::StrCat(sv(routing::to_string(w->pattern)), " ", w->from.to_string(), "->",
                              w->to.to_string()),
                 w->pattern == routing::WorkloadPattern::kPingPong ? "ping-pong" : "stream",
                 *from,
                 {*to},
                 static_cast<uint64_t>(w->messages),
                 static_cast<uint64_t>(w->size)};
  auto [reply_to, result] = runtime::open_once_port<routing::DriveResult>(host.client());
  routing::DriveRequest request{spec.pattern, {routing::payload_port(*to)}, spec.messages, spec.size,
                                1024, reply_to};
  routing::drive_port(*from).send(host.client(), std::move(request));
  absl::StatusOr<routing::DriveResult> r = absl::DeadlineExceededError("interrupted");
  for (;;) {
    if (signalled != 0) {
      r = absl::CancelledError("interrupted by a signal before it finished");
      break;
    }
    if (supervision.poll(absl::ZeroDuration())) {
      stop = true;
      r = absl::AbortedError(absl::StrCat("a proc died during the workload: ",
                                          supervision.exits().back().to_string()));
      break;
    }
    r = result.recv(absl::Milliseconds(200));
    if (r.ok() || r.status().code() != absl::StatusCode::kDeadlineExceeded) break;
  }
  print_drive_header();
  if (!r.ok()) {
    std::printf("%-34s failed: %s\n", spec.label.c_str(), std::string(r.status().message()).c_str());
    return false;
  }
  print_drive_row(spec, *r);
  return r->error.empty();
}

}  // namespace

int up_command(const std::string& self_binary, const std::string& file) {
  absl::StatusOr<routing::TopologySpec> spec = routing::load_topology(file);
  if (!spec.ok()) {
    std::fprintf(stderr, "postal up: %s\n", std::string(spec.status().message()).c_str());
    return 2;
  }
  // Ctrl-C and SIGTERM are taken by a thread; block them before any other thread starts.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::atomic<int> signalled{0};
  std::thread([&stop, &signalled] {
    int sig = 0;
    sigwait(&stop, &sig);
    signalled = sig;
  }).detach();

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines reach a log file as they happen
  routing::HostOptions options;
  options.postal_binary = self_binary;
  options.log = [](const std::string& line) { std::printf("%s\n", line.c_str()); };
  std::printf("postal up: topology %s from %s\n", spec->name.c_str(), file.c_str());
  absl::StatusOr<std::unique_ptr<routing::Host>> host = routing::Host::up(*spec, options);
  if (!host.ok()) {
    std::fprintf(stderr, "postal up: %s\n", std::string(host.status().message()).c_str());
    return 1;
  }
  if (absl::Status s = write_topology_state(**host, {}); !s.ok()) {
    std::fprintf(stderr, "postal up: %s; `postal status` will not see this topology\n",
                 std::string(s.message()).c_str());
  }
  Supervision supervision(**host);
  bool torn_down = false;
  const bool ok = run_workload(**host, signalled, supervision, torn_down);
  int rc = ok && !torn_down ? 0 : 1;
  if (!torn_down) {
    std::printf("topology %s is up; `postal status %s` inspects it; Ctrl-C tears it down\n",
                spec->name.c_str(), spec->name.c_str());
    std::fflush(stdout);
  }
  while (!torn_down && signalled == 0) {
    if (supervision.poll(absl::Milliseconds(200))) {
      rc = 1;
      break;
    }
  }
  if (signalled != 0) std::printf("signal %d: tearing down\n", signalled.load());
  (*host)->teardown();
  remove_topology_state(spec->name);
  return rc;
}

}  // namespace postal::tools
