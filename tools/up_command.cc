// `postal up FILE`: the host agent in the foreground.
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

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
// the workload's delivery timeout): the driver is then stopped and reports what it counted so
// far. Sets `stop` when the topology must stop.
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
  // After a first return the driver waits this long for the rest to be acked or returned: the
  // channels' delivery timeout returns whatever a dead peer left unacked.
  const absl::Duration settle = host.delivery_timeout() + absl::Seconds(1);
  request.settle_ms = absl::ToInt64Milliseconds(settle);
  routing::drive_port(*from).send(host.client(), std::move(request));
  absl::StatusOr<routing::DriveResult> r = absl::DeadlineExceededError("interrupted");
  std::string abandoned;  // why the drive was stopped early
  // on_proc_exit = ignore: when the driver's or the echo's proc dies, the drive cannot finish
  // (what the dead echo was handling is never acknowledged): it is stopped once the settle time
  // has let the channels return what they still held.
  std::optional<absl::Time> stop_at;
  std::string died;
  for (;;) {
    if (signalled != 0) {
      abandoned = "interrupted by a signal before it finished";
      break;
    }
    const size_t seen = supervision.exits().size();
    if (supervision.poll(absl::ZeroDuration())) {
      stop = true;
      abandoned = absl::StrCat("a proc died during the workload: ",
                               supervision.exits().back().to_string());
      break;
    }
    if (supervision.exits().size() > seen && !stop_at) {
      const routing::ProcExit& e = supervision.exits().back();
      if (e.name == w->from.proc || e.name == w->to.proc) {
        stop_at = absl::Now() + settle;
        died = e.to_string();
      }
    }
    if (stop_at && absl::Now() >= *stop_at) {
      abandoned = absl::StrCat("a proc of the workload died: ", died);
      break;
    }
    r = result.recv(absl::Milliseconds(200));
    if (r.ok() || r.status().code() != absl::StatusCode::kDeadlineExceeded) break;
  }
  if (!abandoned.empty()) {
    // The driver reports what it counted; its own proc may be the one that died.
    std::printf("%s; stopping the drive\n", abandoned.c_str());
    routing::drive_stop_port(*from).send(host.client(), routing::DriveStop{});
    r = result.recv(absl::Seconds(2));
    if (!r.ok()) {
      r = absl::AbortedError(absl::StrCat(abandoned, "; the driver did not report (",
                                          r.status().message(), ")"));
    }
  }
  print_drive_header();
  if (!r.ok()) {
    std::printf("%-34s failed: %s\n", spec.label.c_str(), std::string(r.status().message()).c_str());
    return false;
  }
  print_drive_row(spec, *r);
  print_drive_accounting(*r);
  return r->error.empty() && abandoned.empty();
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
  // Finding 5: a signal while a proc is still starting (Host::up waits for its ready line) makes
  // the host give up at once and tear down what it started, not wait out the ready timeout.
  const int cancel_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  std::thread([&stop, &signalled, cancel_fd] {
    int sig = 0;
    sigwait(&stop, &sig);
    signalled = sig;
    const uint64_t one = 1;
    (void)!::write(cancel_fd, &one, sizeof one);
  }).detach();

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines reach a log file as they happen
  routing::HostOptions options;
  options.postal_binary = self_binary;
  options.log = [](const std::string& line) { std::printf("%s\n", line.c_str()); };
  options.cancel_fd = cancel_fd;
  std::printf("postal up: topology %s from %s\n", spec->name.c_str(), file.c_str());
  absl::StatusOr<std::unique_ptr<routing::Host>> host = routing::Host::up(*spec, options);
  if (!host.ok()) {
    if (signalled != 0) {
      std::fprintf(stderr, "postal up: signal %d while coming up: %s; tore down what was started\n",
                   signalled.load(), std::string(host.status().message()).c_str());
    } else {
      std::fprintf(stderr, "postal up: %s\n", std::string(host.status().message()).c_str());
    }
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
