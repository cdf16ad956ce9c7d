// `postal soak FILE`: brings a topology up, keeps a load on every proc and breaks them at random
// — kill -9, SIGTERM, SIGSTOP shorter and longer than the delivery timeout, restarts — for a
// while, then accounts for every payload it sent (soak_ledger.h; decisions.md, "The soak's
// ledger"). Prints each chaos event, a progress line every 5 s and the final ledger; exits 0 only
// when nothing was duplicated, contradicted or left uncounted and no proc died unasked.
//
// The chaos loop runs on the main thread, which also launches and restarts the procs: the
// kernel's PR_SET_PDEATHSIG follows the launching thread (host.h). Ctrl-C ends the chaos early and
// still drains and prints the ledger.
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "commands.h"
#include "postal/routing/host.h"
#include "postal/routing/workload.h"
#include "soak_ledger.h"
#include "soak_traffic.h"

namespace postal::tools {
namespace {

enum class ProcState { kRunning, kStopped, kDying, kDown };

struct Chaotic {
  std::string name;
  uint32_t target = 0;
  ProcState state = ProcState::kRunning;
  absl::Time due;  // kStopped: when to SIGCONT; kDown: when to restart
  bool asked = false;  // we caused its exit
};

class Soak {
 public:
  Soak(routing::Host& host, const SoakOptions& o, const std::atomic<int>& signalled)
      : host_(host), o_(o), signalled_(signalled), rng_(o.seed), traffic_(ledger_, o.seed + 1, o.rate, o.window),
        timeout_(host.delivery_timeout()), grace_(2 * timeout_ + absl::Seconds(1)) {}

  int run() {
    absl::StatusOr<runtime::PortAddr> returns = traffic_.attach(host_.proc());
    if (!returns.ok()) return fail(returns.status().ToString());
    returns_ = *returns;
    for (const auto& p : host_.procs()) {
      absl::StatusOr<runtime::ActorAddr> echo = spawn_echo(p.name);
      if (!echo.ok()) return fail(absl::StrCat("echo on ", p.name, ": ", echo.status().message()));
      Chaotic c;
      c.name = p.name;
      c.target = traffic_.add_target(*echo);
      echoes_.push_back(*echo);
      procs_.push_back(std::move(c));
    }
    for (const Chaotic& p : procs_) {
      std::vector<runtime::ActorAddr> relays;
      if (absl::Status s = spawn_relays(p, &relays); !s.ok()) return fail(s.ToString());
      uint32_t t = 0;
      for (const Chaotic& q : procs_) {
        if (q.target != p.target) traffic_.add_relay(p.target, q.target, relays[t++]);
      }
    }
    traffic_.start();
    start_ = absl::Now();
    const absl::Time end = start_ + o_.duration;
    std::printf("soak: %zu procs, %s, seed %llu, delivery timeout %s, rate %llu/s, window %llu\n",
                procs_.size(), absl::FormatDuration(o_.duration).c_str(),
                static_cast<unsigned long long>(o_.seed), absl::FormatDuration(timeout_).c_str(),
                static_cast<unsigned long long>(o_.rate),
                static_cast<unsigned long long>(o_.window));
    absl::Time next_chaos = start_ + absl::Milliseconds(500);
    absl::Time next_report = start_ + absl::Seconds(5);
    while (absl::Now() < end) {
      if (signalled_ != 0) {
        // Ctrl-C ends the chaos early but still drains and accounts: a stopped proc must not be
        // left stopped (it would keep its death signal pending), and the ledger is the point.
        std::printf("soak %s: signal %d: ending the chaos early\n", at().c_str(), signalled_.load());
        break;
      }
      step();
      if (absl::Now() >= next_chaos) {
        chaos();
        next_chaos = absl::Now() + uniform(absl::Milliseconds(300), absl::Milliseconds(1500));
      }
      if (absl::Now() >= next_report) {
        report(ledger_.counts(false));
        next_report += absl::Seconds(5);
      }
    }
    return drain();
  }

 private:
  absl::Duration uniform(absl::Duration lo, absl::Duration hi) {
    const int64_t a = absl::ToInt64Milliseconds(lo), b = absl::ToInt64Milliseconds(hi);
    return absl::Milliseconds(a + static_cast<int64_t>(rng_() % static_cast<uint64_t>(b - a + 1)));
  }
  std::string at() const {
    return absl::StrFormat("%7.2fs", absl::ToDoubleSeconds(absl::Now() - start_));
  }
  int fail(const std::string& why) {
    std::fprintf(stderr, "postal soak: %s\n", why.c_str());
    return 1;
  }

  absl::StatusOr<runtime::ActorAddr> spawn_echo(const std::string& proc) {
    // Right after a restart the host's cached channel may still meet the old session (REJECT
    // session_unknown returns the spawn request): try again.
    absl::StatusOr<runtime::ActorAddr> echo = absl::UnavailableError("not tried");
    for (int attempt = 0; attempt < 20 && !echo.ok(); ++attempt) {
      echo = host_.spawn(proc, std::string(routing::kEchoType), "echo", {});
    }
    return echo;
  }

  // The relays on `p`, one per other proc, forwarding to its echo: `relay-<proc>`. Their
  // addresses are singletons, so a restarted proc's relays keep them.
  absl::Status spawn_relays(const Chaotic& p, std::vector<runtime::ActorAddr>* out) {
    for (const Chaotic& q : procs_) {
      if (q.target == p.target) continue;
      actors::SpawnParams params;
      params.set_value("next", wire::HeaderValue(echoes_[q.target].to_string()));
      params.set_value("returns", wire::HeaderValue(returns_.to_string()));
      absl::StatusOr<runtime::ActorAddr> relay = absl::UnavailableError("not tried");
      for (int attempt = 0; attempt < 20 && !relay.ok(); ++attempt) {
        relay = host_.spawn(p.name, std::string(routing::kRelayType), "relay-" + q.name, params);
      }
      if (!relay.ok()) {
        return absl::Status(relay.status().code(), absl::StrCat("relay on ", p.name, " to ",
                                                                q.name, ": ",
                                                                relay.status().message()));
      }
      if (out != nullptr) out->push_back(*relay);
    }
    return absl::OkStatus();
  }

  // Supervision events, due SIGCONTs and restarts, lost ids; waits at most 20 ms for an exit.
  void step() {
    if (std::optional<routing::ProcExit> e = host_.next_exit(absl::Milliseconds(20))) on_exit(*e);
    const absl::Time now = absl::Now();
    for (Chaotic& p : procs_) {
      if (p.state == ProcState::kStopped && now >= p.due) {
        (void)host_.kill(p.name, SIGCONT);
        std::printf("chaos %s: SIGCONT %s\n", at().c_str(), p.name.c_str());
        p.state = ProcState::kRunning;
      } else if (p.state == ProcState::kDown && now >= p.due) {
        restart(p);
      }
    }
    ledger_.expire(now, grace_);
  }

  void on_exit(const routing::ProcExit& e) {
    for (Chaotic& p : procs_) {
      if (p.name != e.name) continue;
      ledger_.proc_died(p.target, traffic_.incarnation(p.target), absl::Now());
      if (!p.asked) ++unexpected_exits_;
      std::printf("chaos %s: %s%s\n", at().c_str(), e.to_string().c_str(),
                  p.asked ? "" : " — UNEXPECTED: the soak did not ask for it");
      p.state = ProcState::kDown;
      p.asked = false;
      // Sometimes back before the delivery timeout (the old session meets session_unknown),
      // sometimes after it (the pending envelopes came back AckTimedOut first).
      p.due = absl::Now() + uniform(absl::Milliseconds(100), 2 * timeout_);
    }
  }

  void restart(Chaotic& p) {
    if (absl::Status s = host_.restart(p.name); !s.ok()) {
      std::printf("chaos %s: restart %s failed (%s); retrying\n", at().c_str(), p.name.c_str(),
                  std::string(s.message()).c_str());
      p.due = absl::Now() + absl::Milliseconds(500);
      return;
    }
    traffic_.next_incarnation(p.target);
    absl::StatusOr<runtime::ActorAddr> echo = spawn_echo(p.name);
    absl::Status relays = spawn_relays(p, nullptr);
    std::string what = echo.ok() ? ", echo" : absl::StrCat(", echo NOT spawned: ",
                                                           echo.status().message());
    absl::StrAppend(&what, relays.ok() ? " and relays spawned"
                                       : absl::StrCat(", relays NOT spawned: ", relays.message()));
    std::printf("chaos %s: restarted %s (pid %d)%s\n", at().c_str(), p.name.c_str(),
                static_cast<int>(host_.find_proc(p.name)->pid), what.c_str());
    ++restarts_;
    p.state = ProcState::kRunning;
  }

  // One random act on one running proc.
  void chaos() {
    std::vector<Chaotic*> running;
    for (Chaotic& p : procs_) {
      if (p.state == ProcState::kRunning) running.push_back(&p);
    }
    if (running.empty()) return;
    Chaotic& p = *running[rng_() % running.size()];
    const pid_t pid = host_.find_proc(p.name)->pid;
    switch (rng_() % 4) {
      case 0:
        ++kills_;
        p.asked = true;
        p.state = ProcState::kDying;
        (void)host_.kill(p.name, SIGKILL);
        std::printf("chaos %s: kill -9 %s (pid %d)\n", at().c_str(), p.name.c_str(), pid);
        break;
      case 1:
        ++terms_;
        p.asked = true;
        p.state = ProcState::kDying;
        (void)host_.kill(p.name, SIGTERM);
        std::printf("chaos %s: SIGTERM %s (pid %d)\n", at().c_str(), p.name.c_str(), pid);
        break;
      default: {
        // Half the pauses end before the delivery timeout (the peer resumes, nothing returns),
        // half after it (pending envelopes return AckTimedOut, possibly delivered).
        const bool longer = rng_() % 2 == 0;
        const absl::Duration d = longer ? uniform(timeout_ + timeout_ / 2, 2 * timeout_)
                                        : uniform(timeout_ / 5, timeout_ / 2);
        ++(longer ? long_stops_ : short_stops_);
        p.state = ProcState::kStopped;
        p.due = absl::Now() + d;
        (void)host_.kill(p.name, SIGSTOP);
        std::printf("chaos %s: SIGSTOP %s (pid %d) for %s (%s the delivery timeout)\n",
                    at().c_str(), p.name.c_str(), pid, absl::FormatDuration(d).c_str(),
                    longer ? "longer than" : "shorter than");
      }
    }
  }

  void report(const SoakCounts& c) const {
    std::printf("soak %s: sent %llu delivered %llu returned %llu possibly %llu lost %llu "
                "open %llu duplicates %llu\n",
                at().c_str(), static_cast<unsigned long long>(c.sent),
                static_cast<unsigned long long>(c.delivered),
                static_cast<unsigned long long>(c.returned),
                static_cast<unsigned long long>(c.possibly_delivered),
                static_cast<unsigned long long>(c.lost_with_proc),
                static_cast<unsigned long long>(c.open),
                static_cast<unsigned long long>(c.duplicates()));
  }

  // Chaos stops; every proc is resumed or restarted; nothing new is sent; the soak waits until
  // every id is resolved or the longest a return can take has passed twice over, plus a slack.
  int drain() {
    std::printf("soak %s: chaos over; resuming every proc and draining\n", at().c_str());
    traffic_.stop_sending();
    for (Chaotic& p : procs_) {
      if (p.state == ProcState::kStopped) p.due = absl::Now();
      if (p.state == ProcState::kDown) p.due = absl::Now();
    }
    // The slack is for a loaded machine: with both vCPUs busy beside it, a few payloads still
    // resolved 11 s into the drain (2 of 12 runs left 3–5 open at 2 × grace + 5 s; 6 of 6 passed
    // at + 30 s). A loss stays open however long the drain waits — and one run under `ctest -j2`
    // (2026-12-07) did leave 3 open at + 30 s, beside a logged drop of a relayed copy's return
    // while its relay's proc refused connections: an open defect (docs/semantics.md, R-CHAN-2).
    const absl::Time give_up = absl::Now() + 2 * grace_ + absl::Seconds(30);
    while (absl::Now() < give_up) {
      step();
      bool settled = ledger_.open() == 0;
      for (const Chaotic& p : procs_) settled &= p.state == ProcState::kRunning;
      if (settled) break;
    }
    traffic_.stop();
    ledger_.expire(absl::InfiniteFuture(), absl::ZeroDuration());
    const SoakCounts c = ledger_.counts(true);
    print_ledger(c);
    const bool pass = c.pass() && unexpected_exits_ == 0;
    std::printf("soak: %s\n", pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
  }

  void print_ledger(const SoakCounts& c) const {
    auto n = [](uint64_t v) { return static_cast<unsigned long long>(v); };
    auto kinds = [](const std::map<std::string, uint64_t>& m) {
      std::string out;
      for (const auto& [k, v] : m) absl::StrAppend(&out, out.empty() ? "" : ", ", k, "=", v);
      return out.empty() ? std::string("none") : out;
    };
    std::printf("chaos events: %llu kill -9, %llu SIGTERM, %llu SIGSTOP shorter and %llu longer "
                "than the delivery timeout, %llu restarts, %llu unexpected exits\n",
                n(kills_), n(terms_), n(short_stops_), n(long_stops_), n(restarts_),
                n(unexpected_exits_));
    std::printf("ledger: sent %llu\n", n(c.sent));
    std::printf("  delivered            %llu\n", n(c.delivered));
    std::printf("  returned             %llu  (%s)\n", n(c.returned), kinds(c.returned_by_kind).c_str());
    std::printf("  possibly delivered   %llu  (%s; a reply came for %llu)\n",
                n(c.possibly_delivered), kinds(c.possibly_by_kind).c_str(),
                n(c.possibly_then_delivered));
    std::printf("  lost with its proc   %llu  (open when their proc died; acked there, never "
                "answered)\n", n(c.lost_with_proc));
    std::printf("  contradicted         %llu\n", n(c.contradicted));
    std::printf("  duplicates           %llu  (%llu replies, %llu returns)\n", n(c.duplicates()),
                n(c.duplicate_replies), n(c.duplicate_returns));
    if (!c.first_duplicate.empty()) std::printf("    first: %s\n", c.first_duplicate.c_str());
    std::printf("  unknown ids          %llu\n", n(c.unknown));
    std::printf("  (relays reported    %llu returns of the copies they forwarded)\n",
                n(c.relayed_returns));
    std::printf("  late                 %llu  (resolved after being counted lost)\n", n(c.late));
    std::printf("  uncounted            %llu\n", n(c.uncounted));
    std::printf("ledger balanced: %s\n", c.balanced() ? "yes" : "NO");
  }

  routing::Host& host_;
  const SoakOptions& o_;
  const std::atomic<int>& signalled_;
  std::mt19937_64 rng_;
  SoakLedger ledger_;
  SoakTraffic traffic_;
  const absl::Duration timeout_;
  const absl::Duration grace_;  // after a death, how long an open id may still resolve
  absl::Time start_;
  std::vector<Chaotic> procs_;
  std::vector<runtime::ActorAddr> echoes_;  // by target
  runtime::PortAddr returns_;               // where relays report returns
  uint64_t kills_ = 0, terms_ = 0, short_stops_ = 0, long_stops_ = 0, restarts_ = 0;
  uint64_t unexpected_exits_ = 0;
};

}  // namespace

int soak_command(const std::string& self_binary, const SoakOptions& options) {
  absl::StatusOr<routing::TopologySpec> spec = routing::load_topology(options.file);
  if (!spec.ok()) {
    std::fprintf(stderr, "postal soak: %s\n", std::string(spec.status().message()).c_str());
    return 2;
  }
  if (options.duration <= absl::ZeroDuration() || options.rate == 0 || options.window == 0) {
    std::fprintf(stderr, "postal soak: --seconds/--minutes, --rate and --window must be > 0\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // SIGINT/SIGTERM are taken by a thread (blocked before any other thread starts): while procs
  // start they cancel Host::up, afterwards they end the chaos early (see Soak::run).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  // Only while coming up does a signal cancel the host's waits: once the chaos runs, the drain
  // after a Ctrl-C still restarts procs, which wait for their ready line too.
  static std::atomic<int> signalled{0};
  static absl::Mutex mu;
  static bool coming_up = true;
  static const int cancel_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  std::thread([stop] {
    int sig = 0;
    sigwait(&stop, &sig);
    signalled = sig;
    absl::MutexLock lock(&mu);
    const uint64_t one = 1;
    if (coming_up) (void)!::write(cancel_fd, &one, sizeof one);
  }).detach();
  // The soak stops procs itself; a proc's exit must not stop it (Host ignores on_proc_exit, the
  // soak restarts). A short delivery timeout, unless the file sets one: stopped peers are seen
  // only through it until heartbeats exist.
  routing::HostOptions host_options;
  host_options.postal_binary = self_binary;
  host_options.channel.delivery_timeout = absl::Seconds(1);
  host_options.teardown_grace = absl::Seconds(1);
  host_options.log = [](const std::string& line) { std::printf("host: %s\n", line.c_str()); };
  host_options.cancel_fd = cancel_fd;
  absl::StatusOr<std::unique_ptr<routing::Host>> host = routing::Host::up(*spec, host_options);
  if (!host.ok()) {
    std::fprintf(stderr, "postal soak: %s\n", std::string(host.status().message()).c_str());
    return 1;
  }
  {
    absl::MutexLock lock(&mu);
    coming_up = false;
  }
  int rc = Soak(**host, options, signalled).run();
  (*host)->teardown();
  return rc;
}

}  // namespace postal::tools
