// postal_demo: the main job on embedded defaults (`make demo`).
//
// One proc with two worker threads runs a real workload and prints what it measured:
//   1. ping-pong between two actors — messages/s and round-trip latency percentiles;
//   2. fan-out 1→4 — a producer streams to four workers; messages/s and one-way latency;
//   3. request/reply — an actor blocks on replies from a server; round trips/s and latency.
// Every latency is measured per message (steady_clock stamps carried in the message), and the
// percentiles come from all samples, not a mean. Failures are read from the proc's statistics.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "postal/postal.h"

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Ball {
  int64_t sent_ns = 0;
  int hits = 0;
  postal::PortRef<Ball> back;
  template <class A>
  void serialize(A& a) {
    a(sent_ns, hits, back);
  }
};
struct Item {
  int64_t sent_ns = 0;
  template <class A>
  void serialize(A& a) {
    a(sent_ns);
  }
};
struct Produce {
  int per_worker = 0;
  template <class A>
  void serialize(A& a) {
    a(per_worker);
  }
};
struct Credit {  // a worker has consumed `n` more items
  int worker = 0;
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(worker, n);
  }
};
struct Square {
  using Reply = int64_t;
  int64_t x = 0;
  postal::OncePortRef<int64_t> reply_to;
  template <class A>
  void serialize(A& a) {
    a(x, reply_to);
  }
};
struct RunRequests {
  int count = 0;
  template <class A>
  void serialize(A& a) {
    a(count);
  }
};
struct Samples {
  std::vector<int64_t> ns;
  template <class A>
  void serialize(A& a) {
    a(ns);
  }
};

}  // namespace

POSTAL_MESSAGE(Ball, "demo.Ball");
POSTAL_MESSAGE(Item, "demo.Item");
POSTAL_MESSAGE(Produce, "demo.Produce");
POSTAL_MESSAGE(Credit, "demo.Credit");
POSTAL_MESSAGE(Square, "demo.Square");
POSTAL_MESSAGE(RunRequests, "demo.RunRequests");
POSTAL_MESSAGE(Samples, "demo.Samples");
POSTAL_MESSAGE(int64_t, "demo.Int64");

namespace {

using postal::Context;

struct Ponger : postal::Actor, postal::Handles<Ball> {
  absl::Status handle(Context& cx, Ball b) override {
    b.back.send(cx, Ball{b.sent_ns, b.hits + 1, cx.self<Ponger>().port<Ball>()});
    return absl::OkStatus();
  }
};

// Times each round trip; reports all samples when done.
struct Pinger : postal::Actor, postal::Handles<Ball> {
  int limit;
  postal::PortRef<Samples> report;
  Samples rtt;
  Pinger(int l, postal::PortRef<Samples> r) : limit(l), report(r) { rtt.ns.reserve(l); }
  absl::Status handle(Context& cx, Ball b) override {
    int64_t now = now_ns();
    if (b.hits > 0) rtt.ns.push_back(now - b.sent_ns);
    if (b.hits / 2 >= limit) {
      report.send(cx, std::move(rtt));
      return absl::OkStatus();
    }
    b.back.send(cx, Ball{now, b.hits + 1, cx.self<Pinger>().port<Ball>()});
    return absl::OkStatus();
  }
};

// Fan-out with flow control: the producer keeps at most kWindow items in flight per worker and
// workers return credit every kCreditEvery items, so latency measures delivery, not a backlog.
constexpr int kWindow = 256;
constexpr int kCreditEvery = 64;

struct Worker : postal::Actor, postal::Handles<Item> {
  int index;
  int expected;
  postal::PortRef<Credit> credit;
  postal::PortRef<Samples> report;
  Samples latency;
  Worker(int i, int e, postal::PortRef<Credit> c, postal::PortRef<Samples> r)
      : index(i), expected(e), credit(c), report(r) {
    latency.ns.reserve(e);
  }
  absl::Status handle(Context& cx, Item m) override {
    latency.ns.push_back(now_ns() - m.sent_ns);
    const int got = static_cast<int>(latency.ns.size());
    if (got % kCreditEvery == 0) credit.send(cx, Credit{index, kCreditEvery});
    if (got == expected) report.send(cx, std::move(latency));
    return absl::OkStatus();
  }
};

}  // namespace

struct Configure {
  std::vector<postal::ActorRef<Worker>> workers;
  template <class A>
  void serialize(A& a) {
    a(workers);
  }
};

POSTAL_MESSAGE(Configure, "demo.Configure");

namespace {

struct Producer : postal::Actor, postal::Handles<Configure, Produce, Credit> {
  std::vector<postal::ActorRef<Worker>> workers;
  std::vector<int> in_flight, remaining;
  absl::Status handle(Context&, Configure c) override {
    workers = std::move(c.workers);
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Produce p) override {
    in_flight.assign(workers.size(), 0);
    remaining.assign(workers.size(), p.per_worker);
    for (size_t w = 0; w < workers.size(); ++w) top_up(cx, w);
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Credit c) override {
    in_flight[c.worker] -= c.n;
    top_up(cx, c.worker);
    return absl::OkStatus();
  }
  void top_up(Context& cx, size_t w) {
    while (in_flight[w] < kWindow && remaining[w] > 0) {
      workers[w].send(cx, Item{now_ns()});
      ++in_flight[w];
      --remaining[w];
    }
  }
};

struct SquareServer : postal::Actor, postal::Handles<Square> {
  absl::Status handle(Context& cx, Square s) override {
    s.reply_to.send(cx, s.x * s.x);
    return absl::OkStatus();
  }
};

struct Asker : postal::Actor, postal::Handles<RunRequests> {
  postal::ActorRef<SquareServer> server;
  postal::PortRef<Samples> report;
  Asker(postal::ActorRef<SquareServer> s, postal::PortRef<Samples> r) : server(s), report(r) {}
  absl::Status handle(Context& cx, RunRequests r) override {
    Samples rtt;
    rtt.ns.reserve(r.count);
    for (int i = 0; i < r.count; ++i) {
      int64_t t0 = now_ns();
      absl::StatusOr<int64_t> y = server.request(cx, Square{i, {}}, absl::Seconds(5));
      if (!y.ok()) return y.status();
      rtt.ns.push_back(now_ns() - t0);
    }
    report.send(cx, std::move(rtt));
    return absl::OkStatus();
  }
};

void print_row(const char* name, size_t messages, double seconds, std::vector<int64_t> lat,
               const char* lat_kind) {
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double p) {
    if (lat.empty()) return 0.0;
    size_t i = std::min(lat.size() - 1, static_cast<size_t>(p * static_cast<double>(lat.size())));
    return static_cast<double>(lat[i]) / 1e3;
  };
  std::printf("%-16s %10zu %8.1f ms %9.2f M/s  %-9s p50 %7.2f  p99 %8.2f  p99.9 %8.2f  max %9.2f us\n",
              name, messages, seconds * 1e3, static_cast<double>(messages) / seconds / 1e6,
              lat_kind, pct(0.50), pct(0.99), pct(0.999),
              lat.empty() ? 0.0 : static_cast<double>(lat.back()) / 1e3);
}

int run() {
  constexpr int kRoundTrips = 500'000;
  constexpr int kPerWorker = 250'000;
  constexpr int kRequests = 100'000;
  const absl::Duration kDeadline = absl::Seconds(60);

  postal::Proc proc(postal::ProcOptions::threads(2));
  auto client = *postal::Client::attach(proc, "demo");
  std::printf("postal demo: proc %s, %d worker threads\n\n", proc.addr().to_string().c_str(),
              proc.scheduler().worker_count());
  std::printf("%-16s %10s %11s %13s  %s\n", "workload", "messages", "time", "rate",
              "latency (us)");

  {  // 1. ping-pong
    auto [report, rx] = postal::runtime::open_port<Samples>(*client);
    auto ponger = *postal::spawn<Ponger>(proc, "ponger");
    auto pinger = *postal::spawn<Pinger>(proc, "pinger", kRoundTrips, report.bind());
    auto t0 = std::chrono::steady_clock::now();
    pinger.ref().send(*client, Ball{0, 0, ponger.ref().port<Ball>()});
    auto rtt = rx.recv(kDeadline);
    if (!rtt.ok()) return std::printf("ping-pong: %s\n", rtt.status().ToString().c_str()), 1;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print_row("ping-pong", 2 * kRoundTrips, s, std::move(rtt->ns), "rtt");
  }
  {  // 2. fan-out 1→4, flow-controlled
    auto [report, rx] = postal::runtime::open_port<Samples>(*client);
    auto producer = *postal::spawn<Producer>(proc, "producer");
    Configure config;
    for (int i = 0; i < 4; ++i) {
      config.workers.push_back(
          postal::spawn<Worker>(proc, "worker" + std::to_string(i), i, kPerWorker,
                                producer.ref().port<Credit>(), report.bind())
              ->ref());
    }
    producer.ref().send(*client, std::move(config));
    auto t0 = std::chrono::steady_clock::now();
    producer.ref().send(*client, Produce{kPerWorker});
    std::vector<int64_t> all;
    for (int i = 0; i < 4; ++i) {
      auto lat = rx.recv(kDeadline);
      if (!lat.ok()) return std::printf("fan-out: %s\n", lat.status().ToString().c_str()), 1;
      all.insert(all.end(), lat->ns.begin(), lat->ns.end());
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print_row("fan-out 1->4", 4 * static_cast<size_t>(kPerWorker), s, std::move(all), "one-way");
  }
  {  // 3. request/reply, blocking the asker's fiber
    auto [report, rx] = postal::runtime::open_port<Samples>(*client);
    auto server = *postal::spawn<SquareServer>(proc, "square");
    auto asker = *postal::spawn<Asker>(proc, "asker", server.ref(), report.bind());
    auto t0 = std::chrono::steady_clock::now();
    asker.ref().send(*client, RunRequests{kRequests});
    auto rtt = rx.recv(kDeadline);
    if (!rtt.ok()) return std::printf("request/reply: %s\n", rtt.status().ToString().c_str()), 1;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print_row("request/reply", 2 * static_cast<size_t>(kRequests), s, std::move(rtt->ns), "rtt");
  }

  postal::runtime::SchedulerStats sched = proc.scheduler().stats();
  postal::runtime::ProcStatsSnapshot stats = proc.stats();
  std::printf("\nproc: %s\n", stats.to_string().c_str());
  std::printf("scheduler: slices=%llu steals=%llu sleeps=%llu wakeups=%llu extra-runners=%llu\n",
              static_cast<unsigned long long>(sched.slices),
              static_cast<unsigned long long>(sched.steals),
              static_cast<unsigned long long>(sched.sleeps),
              static_cast<unsigned long long>(sched.wakeups),
              static_cast<unsigned long long>(sched.runners));
  const uint64_t failures = stats.invalid_reference + stats.transport + stats.port_gone +
                            stats.expired + stats.dropped;
  std::printf("failures: %llu\n", static_cast<unsigned long long>(failures));
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main() { return run(); }
