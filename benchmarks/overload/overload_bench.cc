// overload_bench: the overload demonstration of issue 10 (R-FLOW-1, R-FLOW-2).
//
// Two real procs over ipc: this process (the producer's Node) starts a consumer proc (a child,
// overload_consumer.cc) whose "consumer" actor takes 1 ms per message and has a bounded mailbox,
// and whose "echo" actor sits behind the same connection. A producer actor sends Work at full
// speed; a Client pings "echo" 50 times a second. Every second it prints the consumer's handled
// rate, the bytes queued for it (its mailbox's own accounting, asked of the consumer's proc),
// the Overloaded returns, both processes' VmRSS and the pings' p50/p99 (beside a baseline taken
// for half a second before the producer starts). At the end the producer
// stops, everything in flight drains, and a summary line says whether every envelope was
// handled or returned and every ping answered (exit 0) or not (exit 1).
//
//   overload_bench [--seconds N] [--bound-bytes B] [--bound-messages M] [--payload P]
//                  [--per-destination D]
// 60 s is the measurement for the record (docs/benchmarks.md); 5 s a smoke run. The test
// tests/tools/overload_bench_test.cc runs it for 2 s with a small bound.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "overload_consumer.h"
#include "postal/postal.h"
#include "postal/routing/node.h"

extern char** environ;

namespace postal::overload {
namespace {

struct Args {
  int seconds = 5;
  uint64_t bound_bytes = 4 << 20;
  uint64_t bound_messages = 100'000;
  size_t payload = 256;
  size_t per_destination = 1024;
};

struct Counters {
  std::atomic<bool> running{true};
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> returned{0};
  std::atomic<uint64_t> overloaded{0};  // returned as Overloaded (the sender's or the consumer's)
};

class Producer : public actors::Actor, public actors::Handles<Tick> {
 public:
  Producer(Counters* c, runtime::PortRef<Work> to, size_t payload)
      : c_(c), to_(std::move(to)), pad_(payload, 'w') {}
  absl::Status init(actors::Context& cx) override { return tick(cx); }
  absl::Status handle(actors::Context& cx, Tick) override {
    if (!c_->running.load()) return absl::OkStatus();
    for (int i = 0; i < 32; ++i) to_.send(cx, Work{seq_++, pad_});
    c_->sent.fetch_add(32);
    return tick(cx);  // returns queued meanwhile are handled before the next burst
  }
  absl::Status handle_undeliverable(actors::Context&,
                                    const runtime::MessageEnvelope& env) override {
    const runtime::DeliveryFailure* root = env.root_failure();
    if (root != nullptr && root->transport == runtime::TransportReason::kOverloaded) {
      c_->overloaded.fetch_add(1);
    }
    c_->returned.fetch_add(1);
    return absl::OkStatus();
  }

 private:
  absl::Status tick(actors::Context& cx) {
    runtime::PortRef<Tick>(cx.self_addr().port(runtime::Port::handler(wire::type_hash<Tick>())))
        .send(cx, Tick{});
    return absl::OkStatus();
  }
  Counters* c_;
  runtime::PortRef<Work> to_;
  std::string pad_;
  int64_t seq_ = 0;
};

// Pings at a low rate and keeps the round trips of the current second.
struct Pinger {
  absl::Mutex mu;
  std::vector<double> rtt_us ABSL_GUARDED_BY(mu);
  std::atomic<int> sent{0}, answered{0};
  std::atomic<bool> stop{false};

  void run(runtime::Client& client, const runtime::PortRef<Ping>& echo) {
    for (int n = 0; !stop.load(); ++n) {
      const absl::Time t0 = absl::Now();
      sent.fetch_add(1);
      absl::StatusOr<int64_t> back = runtime::request(client, echo, Ping{n, {}}, absl::Seconds(5));
      if (back.ok() && *back == n) {
        answered.fetch_add(1);
        absl::MutexLock lock(&mu);
        rtt_us.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  std::vector<double> take() {
    absl::MutexLock lock(&mu);
    std::vector<double> out;
    out.swap(rtt_us);
    std::sort(out.begin(), out.end());
    return out;
  }
};

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()))];
}

template <class T>
runtime::PortRef<T> port_of(const std::string& actor) {
  return runtime::PortRef<T>(
      runtime::ActorAddr::parse(actor)->port(runtime::Port::handler(wire::type_hash<T>())));
}

struct Child {
  pid_t pid = -1;
  int to_child = -1;    // its stdin: closing it ends the child
  int from_child = -1;  // its stdout: the ready line
};

absl::StatusOr<Child> start_consumer(const Args& a, const std::string& listen) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError("pipe failed");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  std::vector<std::string> args = {"overload_bench",
                                   "--role",
                                   "consumer",
                                   "--listen",
                                   listen,
                                   "--bound-bytes",
                                   absl::StrCat(a.bound_bytes),
                                   "--bound-messages",
                                   absl::StrCat(a.bound_messages),
                                   "--per-destination",
                                   absl::StrCat(a.per_destination)};
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  Child c;
  const int rc = posix_spawn(&c.pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  c.to_child = in[1];
  c.from_child = out[0];
  if (rc != 0) return absl::InternalError(absl::StrCat("posix_spawn: ", rc));
  return c;
}

// The child's ready line ("ready <consumer> <echo> <stats>"), within 20 s.
absl::StatusOr<std::vector<std::string>> read_ready(int fd) {
  std::string line;
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (line.find('\n') == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    const int left = static_cast<int>(absl::ToInt64Milliseconds(give_up - absl::Now()));
    if (left <= 0 || ::poll(&p, 1, left) <= 0) return absl::DeadlineExceededError("no ready line");
    char buf[512];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return absl::UnavailableError("the consumer exited before its ready line");
    line.append(buf, static_cast<size_t>(n));
  }
  std::vector<std::string> words = absl::StrSplit(line.substr(0, line.find('\n')), ' ');
  if (words.size() != 4 || words[0] != "ready") return absl::DataLossError("bad ready line");
  return words;
}

int run(const Args& a) {
  const std::string tag = absl::StrCat("postal-overload-", ::getpid());
  const runtime::ChannelAddr consumer_listen = *runtime::ChannelAddr::ipc_abstract(tag + "-c");
  absl::StatusOr<Child> child = start_consumer(a, consumer_listen.to_string());
  if (!child.ok()) {
    std::fprintf(stderr, "overload_bench: %s\n", child.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<std::vector<std::string>> ready = read_ready(child->from_child);
  if (!ready.ok()) {
    std::fprintf(stderr, "overload_bench: %s\n", ready.status().ToString().c_str());
    ::kill(child->pid, SIGKILL);
    ::waitpid(child->pid, nullptr, 0);
    return 2;
  }
  routing::NodeOptions o;
  o.id = runtime::ProcId{runtime::Uid::singleton(*runtime::Label::parse("overload-producer"))};
  o.listen = *runtime::ChannelAddr::ipc_abstract(tag + "-p");
  o.scheduler.workers = 2;
  o.system_actors = false;
  o.channel.max_queue_per_destination = a.per_destination;  // R-FLOW-2
  std::unique_ptr<routing::Node> node = *routing::Node::start(std::move(o));
  runtime::Proc& proc = node->proc();
  auto monitor = *runtime::Client::attach(proc, "monitor");
  auto pinger_client = *runtime::Client::attach(proc, "pinger");
  const auto stats_port = port_of<StatsQuery>((*ready)[3]);

  Counters counters;
  Pinger pinger;
  std::thread pings([&] { pinger.run(*pinger_client, port_of<Ping>((*ready)[2])); });
  // The second actor's latency before the flood, to compare with under it.
  absl::SleepFor(absl::Milliseconds(500));
  const std::vector<double> baseline = pinger.take();
  std::printf("baseline (no producer) ping p50=%.0f us p99=%.0f us (n=%zu)\n",
              quantile(baseline, 0.5), quantile(baseline, 0.99), baseline.size());
  auto producer =
      *actors::spawn<Producer>(proc, "producer", &counters, port_of<Work>((*ready)[1]), a.payload);

  std::printf(
      "overload_bench: %d s, consumer bound %llu bytes / %llu messages, payload %zu B, "
      "per-destination cap %zu\n",
      a.seconds, static_cast<unsigned long long>(a.bound_bytes),
      static_cast<unsigned long long>(a.bound_messages), a.payload, a.per_destination);
  uint64_t last_handled = 0, last_overloaded = 0, max_bytes = 0, max_rss_p = 0, max_rss_c = 0;
  bool stats_ok = true;
  ConsumerStats s;
  for (int t = 1; t <= a.seconds; ++t) {
    absl::SleepFor(absl::Seconds(1));
    absl::StatusOr<ConsumerStats> got =
        runtime::request(*monitor, stats_port, StatsQuery{}, absl::Seconds(5));
    if (!got.ok()) {
      std::printf("t=%ds consumer stats: %s\n", t, got.status().ToString().c_str());
      stats_ok = false;
      continue;
    }
    s = *got;
    const uint64_t over = counters.overloaded.load();
    const uint64_t rss_p = rss_kib(), rss_c = s.rss_kib;
    max_bytes = std::max({max_bytes, s.queued_bytes, s.max_queued_bytes});
    max_rss_p = std::max(max_rss_p, rss_p);
    max_rss_c = std::max(max_rss_c, rss_c);
    const std::vector<double> rtt = pinger.take();
    std::printf(
        "t=%ds handled/s=%llu queued_bytes=%llu/%llu overloaded=%llu (+%llu) "
        "rss_producer=%llu KiB rss_consumer=%llu KiB ping p50=%.0f us p99=%.0f us (n=%zu)\n",
        t, static_cast<unsigned long long>(s.handled - last_handled),
        static_cast<unsigned long long>(s.queued_bytes),
        static_cast<unsigned long long>(s.bound_bytes), static_cast<unsigned long long>(over),
        static_cast<unsigned long long>(over - last_overloaded),
        static_cast<unsigned long long>(rss_p), static_cast<unsigned long long>(rss_c),
        quantile(rtt, 0.5), quantile(rtt, 0.99), rtt.size());
    std::fflush(stdout);
    last_handled = s.handled;
    last_overloaded = over;
  }
  // Drain: no more Work; wait until everything sent is handled or returned.
  counters.running.store(false);
  pinger.stop.store(true);
  pings.join();
  int64_t unaccounted = -1;
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (absl::Now() < give_up) {
    absl::StatusOr<ConsumerStats> got =
        runtime::request(*monitor, stats_port, StatsQuery{}, absl::Seconds(5));
    if (got.ok()) {
      s = *got;
      max_bytes = std::max(max_bytes, s.max_queued_bytes);
      unaccounted = static_cast<int64_t>(counters.sent.load()) -
                    static_cast<int64_t>(s.handled + counters.returned.load() + s.dropped);
      if (unaccounted == 0 && s.queued == 0) break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  std::printf(
      "summary seconds=%d sent=%llu handled=%llu returned=%llu overloaded=%llu "
      "dropped_at_consumer=%llu unaccounted=%lld max_queued_bytes=%llu bound_bytes=%llu pings=%d "
      "pongs=%d "
      "max_rss_producer_kib=%llu max_rss_consumer_kib=%llu\n",
      a.seconds, static_cast<unsigned long long>(counters.sent.load()),
      static_cast<unsigned long long>(s.handled),
      static_cast<unsigned long long>(counters.returned.load()),
      static_cast<unsigned long long>(counters.overloaded.load()),
      static_cast<unsigned long long>(s.dropped), static_cast<long long>(unaccounted),
      static_cast<unsigned long long>(max_bytes), static_cast<unsigned long long>(a.bound_bytes),
      pinger.sent.load(), pinger.answered.load(), static_cast<unsigned long long>(max_rss_p),
      static_cast<unsigned long long>(max_rss_c));
  std::fflush(stdout);
  producer.stop("done");
  ::close(child->to_child);
  ::waitpid(child->pid, nullptr, 0);
  const bool ok = stats_ok && unaccounted == 0 && max_bytes <= a.bound_bytes &&
                  pinger.sent.load() == pinger.answered.load();
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace postal::overload

int main(int argc, char** argv) {
  using namespace postal::overload;
  Args a;
  ConsumerArgs c;
  std::string role;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--seconds")
      a.seconds = std::atoi(v.c_str());
    else if (k == "--bound-bytes")
      a.bound_bytes = c.bound_bytes = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--bound-messages")
      a.bound_messages = c.bound_messages = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--payload")
      a.payload = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--per-destination")
      a.per_destination = c.per_destination = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--role")
      role = v;
    else if (k == "--listen")
      c.listen = v;
    else {
      std::fprintf(stderr, "overload_bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (role == "consumer") return run_consumer(c);
  return run(a);
}
