// postal peer benchmarks: the workloads of benchmarks/caf/caf_bench.cc on postal actors.
//
// Every BM_PostalX has a BM_CafX twin with the same work per iteration and the same counters, so
// scripts/bench_report.py can pair them. Variants without a twin (LowPower, RequestReplyBlocking,
// SpawnOnly, BytesPerIdleRootActor) say in their comment what they add.
//
// Like the CAF file, every benchmark builds its proc once per benchmark run (outside the timing
// loop), drives the actors from the main thread through a `Client`, and stops what it spawned.
// Every wait has a deadline: a hang becomes a benchmark error naming the case, never a stuck run.
//
// Every case that crosses threads also reports the scheduler's counters over the timed loop:
//   wakeups_per_msg  sleeping workers notified, per message (≈0: the receiver was spinning/awake)
//   sleeps           times a worker went to sleep
//   steals           runnables one worker took from another's queue

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "absl/strings/str_cat.h"
#include "postal/postal.h"
#include "resident_memory.h"

namespace postal_bench {

// Drives a workload: `n` messages, round trips or actors, depending on the receiver.
struct Start {
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};
// Sent to the main thread when a workload finished; n < 0 reports an error (printed by the actor).
struct Done {
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};
struct Pong {
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};
// Like CAF's pong, the ponger answers whoever asked: the ping carries its reply port.
struct Ping {
  int n = 0;
  postal::PortRef<Pong> reply_to;
  template <class A>
  void serialize(A& a) {
    a(n, reply_to);
  }
};
// The payload of fan-out / fan-in (CAF sends a bare int).
struct Item {
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};
struct Resp {
  int x = 0;
  template <class A>
  void serialize(A& a) {
    a(x);
  }
};
// Event-based request: the reply goes to a normal port of the client actor, which continues the
// chain in its Resp handler (CAF's request(...).then(...)).
struct Req {
  int x = 0;
  postal::PortRef<Resp> reply_to;
  template <class A>
  void serialize(A& a) {
    a(x, reply_to);
  }
};
// Blocking request: postal's request/reply (`ref.request(cx, msg, timeout)`).
struct BlockingReq {
  using Reply = Resp;
  int x = 0;
  postal::OncePortRef<Resp> reply_to;
  template <class A>
  void serialize(A& a) {
    a(x, reply_to);
  }
};
// Asks a parent actor to spawn `n` idle children.
struct SpawnChildren {
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};

}  // namespace postal_bench

POSTAL_MESSAGE(postal_bench::Start, "bench.Start");
POSTAL_MESSAGE(postal_bench::Done, "bench.Done");
POSTAL_MESSAGE(postal_bench::Ping, "bench.Ping");
POSTAL_MESSAGE(postal_bench::Pong, "bench.Pong");
POSTAL_MESSAGE(postal_bench::Item, "bench.Item");
POSTAL_MESSAGE(postal_bench::Req, "bench.Req");
POSTAL_MESSAGE(postal_bench::Resp, "bench.Resp");
POSTAL_MESSAGE(postal_bench::BlockingReq, "bench.BlockingReq");
POSTAL_MESSAGE(postal_bench::SpawnChildren, "bench.SpawnChildren");

namespace postal_bench {
namespace {

using postal::Actor;
using postal::ActorHandle;
using postal::Client;
using postal::Context;
using postal::Handles;
using postal::PortRef;
using postal::Proc;
using postal::ProcOptions;

constexpr int kPingPongRoundTrips = 10000;  // per benchmark iteration
constexpr int kFanMessages = 10000;         // K, per sender/receiver pair
constexpr int kFanWidth = 4;
constexpr int kRequestRoundTrips = 10000;  // per benchmark iteration
constexpr int kSpawnCount = 10000;         // per benchmark iteration
// How long any single wait may take before the case is reported as hung.
const absl::Duration kTimeout = absl::Seconds(30);

ProcOptions threads_options(int threads, bool low_power = false) {
  ProcOptions o = ProcOptions::threads(threads);
  if (low_power) {
    o.scheduler = postal::SchedulerOptions::low_power();
    o.scheduler.workers = threads;
  }
  return o;
}

// --- Actors -------------------------------------------------------------------------------

struct Ponger : Actor, Handles<Ping> {
  absl::Status handle(Context& cx, Ping p) override {
    p.reply_to.send(cx, Pong{p.n});
    return absl::OkStatus();
  }
};

struct Pinger : Actor, Handles<Start, Pong> {
  PortRef<Ping> ponger;
  PortRef<Done> done;
  PortRef<Pong> self;
  Pinger(PortRef<Ping> p, PortRef<Done> d) : ponger(std::move(p)), done(std::move(d)) {}
  absl::Status init(Context& cx) override {
    self = cx.self<Pinger>().port<Pong>();
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Start s) override {
    ponger.send(cx, Ping{s.n, self});
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Pong p) override {
    if (p.n <= 1) {
      done.send(cx, Done{0});
      return absl::OkStatus();
    }
    ponger.send(cx, Ping{p.n - 1, self});
    return absl::OkStatus();
  }
};

// Counts Items; after `expected` of them tells `done` and starts counting again.
struct CountingReceiver : Actor, Handles<Item> {
  int expected;
  int count = 0;
  PortRef<Done> done;
  CountingReceiver(int e, PortRef<Done> d) : expected(e), done(std::move(d)) {}
  absl::Status handle(Context& cx, Item) override {
    if (++count == expected) {
      count = 0;
      done.send(cx, Done{expected});
    }
    return absl::OkStatus();
  }
};

// Sends Start.n Items to each target, round robin (fan-out with 4 targets, fan-in with 1).
struct ItemSender : Actor, Handles<Start> {
  std::vector<PortRef<Item>> targets;
  explicit ItemSender(std::vector<PortRef<Item>> t) : targets(std::move(t)) {}
  absl::Status handle(Context& cx, Start s) override {
    for (int i = 0; i < s.n; ++i) {
      for (const auto& t : targets) t.send(cx, Item{i});
    }
    return absl::OkStatus();
  }
};

struct RrServer : Actor, Handles<Req> {
  absl::Status handle(Context& cx, Req r) override {
    r.reply_to.send(cx, Resp{r.x + 1});
    return absl::OkStatus();
  }
};

struct RrClient : Actor, Handles<Start, Resp> {
  PortRef<Req> server;
  PortRef<Done> done;
  PortRef<Resp> self;
  int remaining = 0;
  RrClient(PortRef<Req> s, PortRef<Done> d) : server(std::move(s)), done(std::move(d)) {}
  absl::Status init(Context& cx) override {
    self = cx.self<RrClient>().port<Resp>();
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Start s) override {
    remaining = s.n;
    server.send(cx, Req{0, self});
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Resp r) override {
    if (--remaining == 0) {
      done.send(cx, Done{r.x});
      return absl::OkStatus();
    }
    server.send(cx, Req{r.x, self});
    return absl::OkStatus();
  }
};

struct BlockingServer : Actor, Handles<BlockingReq> {
  absl::Status handle(Context& cx, BlockingReq r) override {
    r.reply_to.send(cx, Resp{r.x + 1});
    return absl::OkStatus();
  }
};

// One Start handler makes Start.n blocking requests in a row; its fiber waits for each reply.
struct BlockingClient : Actor, Handles<Start> {
  postal::ActorRef<BlockingServer> server;
  PortRef<Done> done;
  BlockingClient(postal::ActorRef<BlockingServer> s, PortRef<Done> d)
      : server(std::move(s)), done(std::move(d)) {}
  absl::Status handle(Context& cx, Start s) override {
    int x = 0;
    for (int i = 0; i < s.n; ++i) {
      absl::StatusOr<Resp> r = server.request(cx, BlockingReq{x, {}}, kTimeout);
      if (!r.ok()) {
        std::fprintf(stderr, "postal_bench: blocking request %d failed: %s\n", i,
                     r.status().ToString().c_str());
        done.send(cx, Done{-1});
        return absl::OkStatus();
      }
      x = r->x;
    }
    done.send(cx, Done{x});
    return absl::OkStatus();
  }
};

// How many Trivial actors have started (init ran) and stopped (on_stop ran).
struct LifeCounts {
  std::atomic<int> started{0};
  std::atomic<int> stopped{0};
};

// An idle actor that counts itself in `counts` when it starts and stops (one pointer, so the
// bytes-per-actor cases measure the runtime's share, not a fat test actor).
struct Trivial : Actor, Handles<Item> {
  LifeCounts* counts;
  explicit Trivial(LifeCounts* c) : counts(c) {}
  absl::Status init(Context&) override {
    counts->started.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  void on_stop(Context&, const postal::ActorStatus&) override {
    counts->stopped.fetch_add(1, std::memory_order_relaxed);
  }
  absl::Status handle(Context&, Item) override { return absl::OkStatus(); }
};

// Spawns SpawnChildren.n Trivial children and drops their handles (children live on; they stop
// when this actor stops).
struct Parent : Actor, Handles<SpawnChildren> {
  LifeCounts* counts;
  explicit Parent(LifeCounts* c) : counts(c) {}
  absl::Status handle(Context& cx, SpawnChildren m) override {
    for (int i = 0; i < m.n; ++i) {
      absl::StatusOr<ActorHandle<Trivial>> child = cx.spawn<Trivial>("idle", counts);
      if (!child.ok()) return child.status();
    }
    return absl::OkStatus();
  }
};

// --- Harness ------------------------------------------------------------------------------

// The main thread's mailbox and its Done port.
struct Driver {
  std::unique_ptr<Client> client;
  postal::runtime::PortHandle<Done> done_handle;
  postal::runtime::PortReceiver<Done> done_rx;

  static std::unique_ptr<Driver> attach(Proc& proc, benchmark::State& state) {
    absl::StatusOr<std::unique_ptr<Client>> client = Client::attach(proc, "bench");
    if (!client.ok()) {
      state.SkipWithError(client.status().ToString().c_str());
      return nullptr;
    }
    auto [handle, rx] = postal::runtime::open_port<Done>(**client);
    return std::unique_ptr<Driver>(
        new Driver{*std::move(client), std::move(handle), std::move(rx)});
  }

  PortRef<Done> done() const { return done_handle.bind(); }

  // Waits for `count` Done messages; false (and the benchmark skipped with the reason) when one
  // does not come within kTimeout or reports an error.
  bool await_done(benchmark::State& state, int count, const char* what) {
    for (int i = 0; i < count; ++i) {
      absl::StatusOr<Done> d = done_rx.recv(kTimeout);
      if (!d.ok() || d->n < 0) {
        std::string why = absl::StrCat(
            what, ": ", d.ok() ? "the actor reported an error" : d.status().ToString());
        std::fprintf(stderr, "postal_bench: %s\n", why.c_str());
        state.SkipWithError(why.c_str());
        return false;
      }
    }
    return true;
  }
};

template <class A>
bool spawned(benchmark::State& state, const absl::StatusOr<ActorHandle<A>>& h) {
  if (h.ok()) return true;
  state.SkipWithError(absl::StrCat("spawn: ", h.status().ToString()).c_str());
  return false;
}

// Stops an actor and waits until it is Stopped; complains on stderr when it does not stop.
template <class A>
void stop_and_wait(const ActorHandle<A>& h) {
  h.stop();
  absl::StatusOr<postal::ActorStatus> s = h.wait(kTimeout);
  if (!s.ok()) std::fprintf(stderr, "postal_bench: %s\n", s.status().ToString().c_str());
}

// The scheduler's counters over the timed loop.
class SchedulerProbe {
 public:
  explicit SchedulerProbe(Proc& proc) : proc_(proc), before_(proc.scheduler().stats()) {}
  void report(benchmark::State& state, double msgs) const {
    postal::runtime::SchedulerStats after = proc_.scheduler().stats();
    const double wakeups = static_cast<double>(after.wakeups - before_.wakeups);
    state.counters["wakeups_per_msg"] = msgs > 0 ? wakeups / msgs : 0.0;
    state.counters["sleeps"] = static_cast<double>(after.sleeps - before_.sleeps);
    state.counters["steals"] = static_cast<double>(after.steals - before_.steals);
  }

 private:
  Proc& proc_;
  postal::runtime::SchedulerStats before_;
};

void report_msgs(benchmark::State& state, double msgs) {
  state.SetItemsProcessed(static_cast<int64_t>(msgs));
  state.counters["msgs_per_s"] = benchmark::Counter(msgs, benchmark::Counter::kIsRate);
}

// Waits (yielding the thread, as the CAF cases do) until `counter` reaches `expected`; false when
// it did not within kTimeout.
bool spin_until_or_timeout(const std::atomic<int>& counter, int expected) {
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(kTimeout);
  while (counter.load(std::memory_order_acquire) < expected) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// --- Ping-pong ----------------------------------------------------------------------------

void run_ping_pong(benchmark::State& state, ProcOptions options) {
  Proc proc(std::move(options));
  auto driver = Driver::attach(proc, state);
  if (!driver) return;
  auto ponger = postal::spawn<Ponger>(proc, "ponger");
  if (!spawned(state, ponger)) return;
  auto pinger = postal::spawn<Pinger>(proc, "pinger", ponger->ref().port<Ping>(), driver->done());
  if (!spawned(state, pinger)) return;
  SchedulerProbe probe(proc);
  for (auto _ : state) {
    pinger->ref().send(*driver->client, Start{kPingPongRoundTrips});
    if (!driver->await_done(state, 1, "ping-pong")) break;
  }
  const double msgs = static_cast<double>(state.iterations()) * 2.0 * kPingPongRoundTrips;
  probe.report(state, msgs);
  report_msgs(state, msgs);
  stop_and_wait(*pinger);
  stop_and_wait(*ponger);
}

void BM_PostalPingPong(benchmark::State& state) { run_ping_pong(state, threads_options(2)); }
void BM_PostalPingPong1Thread(benchmark::State& state) { run_ping_pong(state, threads_options(1)); }
// postal only: idle workers sleep at once (no spin). The pair still shares one worker (LIFO
// placement), so only each iteration's Start finds a worker asleep; PingPongClientLowPower is the
// case where every message does.
void BM_PostalPingPongLowPower(benchmark::State& state) {
  run_ping_pong(state, threads_options(2, /*low_power=*/true));
}

// Round-trip percentiles in µs (rtt_p50_us, rtt_p99_us, rtt_max_us).
void report_rtt_percentiles(benchmark::State& state, std::vector<double>& rtts) {
  if (rtts.empty()) return;
  std::sort(rtts.begin(), rtts.end());
  auto at = [&](double q) {
    return rtts[static_cast<size_t>(q * static_cast<double>(rtts.size() - 1))];
  };
  state.counters["rtt_p50_us"] = at(0.5);
  state.counters["rtt_p99_us"] = at(0.99);
  state.counters["rtt_max_us"] = rtts.back();
}

// postal only: the main thread (a Client) is the pinger, so every message crosses threads: a ping
// goes through the shared inject queue to a worker, a pong wakes the main thread. With the
// default spin a worker is usually still spinning when the next ping comes; with low_power() it
// is asleep and every ping pays a wake-up (see wakeups_per_msg).
void run_client_ping_pong(benchmark::State& state, ProcOptions options) {
  Proc proc(std::move(options));
  auto driver = Driver::attach(proc, state);
  if (!driver) return;
  auto [pong_handle, pong_rx] = postal::runtime::open_port<Pong>(*driver->client);
  auto ponger = postal::spawn<Ponger>(proc, "ponger");
  if (!spawned(state, ponger)) return;
  const PortRef<Ping> ping = ponger->ref().port<Ping>();
  const PortRef<Pong> reply_to = pong_handle.bind();
  std::vector<double> rtts;  // every round trip, in µs: stalls show in the tail
  rtts.reserve(kPingPongRoundTrips);
  SchedulerProbe probe(proc);
  for (auto _ : state) {
    bool ok = true;
    for (int i = kPingPongRoundTrips; i > 0 && ok; --i) {
      const auto sent = std::chrono::steady_clock::now();
      ping.send(*driver->client, Ping{i, reply_to});
      absl::StatusOr<Pong> p = pong_rx.recv(kTimeout);
      rtts.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - sent)
              .count());
      ok = p.ok() && p->n == i;
      if (!ok) {
        const std::string why = p.ok() ? "wrong pong" : p.status().ToString();
        state.SkipWithError(absl::StrCat("client ping-pong: ", why).c_str());
      }
    }
    if (!ok) break;
  }
  const double msgs = static_cast<double>(state.iterations()) * 2.0 * kPingPongRoundTrips;
  probe.report(state, msgs);
  report_msgs(state, msgs);
  report_rtt_percentiles(state, rtts);
  stop_and_wait(*ponger);
}

void BM_PostalPingPongClient(benchmark::State& state) {
  run_client_ping_pong(state, threads_options(2));
}
void BM_PostalPingPongClientLowPower(benchmark::State& state) {
  run_client_ping_pong(state, threads_options(2, /*low_power=*/true));
}

// --- Fan-out / fan-in ---------------------------------------------------------------------

void BM_PostalFanOut4(benchmark::State& state) {
  Proc proc(threads_options(2));
  auto driver = Driver::attach(proc, state);
  if (!driver) return;
  std::vector<ActorHandle<CountingReceiver>> receivers;
  std::vector<PortRef<Item>> targets;
  for (int i = 0; i < kFanWidth; ++i) {
    auto r = postal::spawn<CountingReceiver>(proc, absl::StrCat("receiver", i), kFanMessages,
                                             driver->done());
    if (!spawned(state, r)) return;
    targets.push_back(r->ref().port<Item>());
    receivers.push_back(*std::move(r));
  }
  auto sender = postal::spawn<ItemSender>(proc, "sender", std::move(targets));
  if (!spawned(state, sender)) return;
  SchedulerProbe probe(proc);
  for (auto _ : state) {
    sender->ref().send(*driver->client, Start{kFanMessages});
    if (!driver->await_done(state, kFanWidth, "fan-out")) break;
  }
  const double msgs = static_cast<double>(state.iterations()) * kFanWidth * kFanMessages;
  probe.report(state, msgs);
  report_msgs(state, msgs);
  stop_and_wait(*sender);
  for (const auto& r : receivers) stop_and_wait(r);
}

void BM_PostalFanIn4(benchmark::State& state) {
  Proc proc(threads_options(2));
  auto driver = Driver::attach(proc, state);
  if (!driver) return;
  auto receiver =
      postal::spawn<CountingReceiver>(proc, "receiver", kFanWidth * kFanMessages, driver->done());
  if (!spawned(state, receiver)) return;
  std::vector<ActorHandle<ItemSender>> senders;
  for (int i = 0; i < kFanWidth; ++i) {
    auto s = postal::spawn<ItemSender>(proc, absl::StrCat("sender", i),
                                       std::vector<PortRef<Item>>{receiver->ref().port<Item>()});
    if (!spawned(state, s)) return;
    senders.push_back(*std::move(s));
  }
  SchedulerProbe probe(proc);
  for (auto _ : state) {
    for (const auto& s : senders) s.ref().send(*driver->client, Start{kFanMessages});
    if (!driver->await_done(state, 1, "fan-in")) break;
  }
  const double msgs = static_cast<double>(state.iterations()) * kFanWidth * kFanMessages;
  probe.report(state, msgs);
  report_msgs(state, msgs);
  for (const auto& s : senders) stop_and_wait(s);
  stop_and_wait(*receiver);
}

// --- Request/reply ------------------------------------------------------------------------

void report_round_trips(benchmark::State& state, const SchedulerProbe& probe) {
  const double rts = static_cast<double>(state.iterations()) * kRequestRoundTrips;
  probe.report(state, 2.0 * rts);
  state.SetItemsProcessed(static_cast<int64_t>(rts));
  state.counters["round_trips_per_s"] = benchmark::Counter(rts, benchmark::Counter::kIsRate);
  state.counters["msgs_per_s"] = benchmark::Counter(2.0 * rts, benchmark::Counter::kIsRate);
}

void BM_PostalRequestReply(benchmark::State& state) {
  Proc proc(threads_options(2));
  auto driver = Driver::attach(proc, state);
  if (!driver) return;
  auto server = postal::spawn<RrServer>(proc, "server");
  if (!spawned(state, server)) return;
  auto client = postal::spawn<RrClient>(proc, "client", server->ref().port<Req>(), driver->done());
  if (!spawned(state, client)) return;
  SchedulerProbe probe(proc);
  for (auto _ : state) {
    client->ref().send(*driver->client, Start{kRequestRoundTrips});
    if (!driver->await_done(state, 1, "request/reply")) break;
  }
  report_round_trips(state, probe);
  stop_and_wait(*client);
  stop_and_wait(*server);
}

// postal only: the client's handler calls ref.request() and its fiber blocks for every reply.
void BM_PostalRequestReplyBlocking(benchmark::State& state) {
  Proc proc(threads_options(2));
  auto driver = Driver::attach(proc, state);
  if (!driver) return;
  auto server = postal::spawn<BlockingServer>(proc, "server");
  if (!spawned(state, server)) return;
  auto client = postal::spawn<BlockingClient>(proc, "client", server->ref(), driver->done());
  if (!spawned(state, client)) return;
  SchedulerProbe probe(proc);
  for (auto _ : state) {
    client->ref().send(*driver->client, Start{kRequestRoundTrips});
    if (!driver->await_done(state, 1, "blocking request/reply")) break;
  }
  report_round_trips(state, probe);
  state.counters["runners_started"] = static_cast<double>(proc.scheduler().stats().runners);
  stop_and_wait(*client);
  stop_and_wait(*server);
}

// --- Spawn --------------------------------------------------------------------------------
//
// Root actors spawned from the main thread, like CAF's sys.spawn. Root names are unique per proc
// and a stopped actor stays as a tombstone (R-ACT-4), so every spawn gets a fresh name ("t<k>")
// and the proc's mailbox count grows by kSpawnCount per iteration: reported as `tombstones`.

struct SpawnRound {
  Proc& proc;
  LifeCounts counts;
  std::vector<ActorHandle<Trivial>> handles;
  int next_name = 0;

  explicit SpawnRound(Proc& p) : proc(p) { handles.reserve(kSpawnCount); }

  // Spawns kSpawnCount actors and waits until each has run init.
  bool spawn_all(benchmark::State& state) {
    counts.started.store(0, std::memory_order_relaxed);
    for (int i = 0; i < kSpawnCount; ++i) {
      auto h = postal::spawn<Trivial>(proc, absl::StrCat("t", next_name++), &counts);
      if (!spawned(state, h)) return false;
      handles.push_back(*std::move(h));
    }
    if (!spin_until_or_timeout(counts.started, kSpawnCount)) {
      state.SkipWithError("spawn: actors did not all start within the timeout");
      return false;
    }
    return true;
  }

  // Stops every actor, then waits until each is Stopped.
  bool stop_all(benchmark::State& state) {
    for (const auto& h : handles) h.stop();
    for (const auto& h : handles) {
      absl::StatusOr<postal::ActorStatus> s = h.wait(kTimeout);
      if (!s.ok()) {
        state.SkipWithError(absl::StrCat("spawn teardown: ", s.status().ToString()).c_str());
        return false;
      }
    }
    handles.clear();
    return true;
  }
};

void report_spawns(benchmark::State& state, Proc& proc, const SchedulerProbe& probe) {
  const double spawns = static_cast<double>(state.iterations()) * kSpawnCount;
  probe.report(state, spawns);
  state.SetItemsProcessed(static_cast<int64_t>(spawns));
  state.counters["spawns_per_s"] = benchmark::Counter(spawns, benchmark::Counter::kIsRate);
  state.counters["tombstones"] = static_cast<double>(proc.mailbox_count());
}

// Spawn, wait started, stop and wait stopped: all timed (CAF's case includes its teardown).
void BM_PostalSpawn(benchmark::State& state) {
  Proc proc(threads_options(2));
  SpawnRound round(proc);
  SchedulerProbe probe(proc);
  for (auto _ : state) {
    if (!round.spawn_all(state) || !round.stop_all(state)) break;
  }
  report_spawns(state, proc, probe);
}

// postal only: spawn and wait started timed; the teardown runs with the timer paused.
void BM_PostalSpawnOnly(benchmark::State& state) {
  Proc proc(threads_options(2));
  SpawnRound round(proc);
  SchedulerProbe probe(proc);
  for (auto _ : state) {
    if (!round.spawn_all(state)) break;
    state.PauseTiming();
    if (!round.stop_all(state)) break;  // no ResumeTiming after SkipWithError
    state.ResumeTiming();
  }
  report_spawns(state, proc, probe);
}

// --- Memory per idle actor ----------------------------------------------------------------

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "postal_bench: %s\n", what);
  std::abort();
}

size_t rss_bytes() {
  absl::StatusOr<size_t> rss = postal::bench::resident_bytes();
  if (!rss.ok()) die(std::string(rss.status().message()).c_str());
  return *rss;
}

double bytes_per(size_t before, size_t after, int n) {
  return (static_cast<double>(after) - static_cast<double>(before)) / static_cast<double>(n);
}

// n idle actors as children of one parent actor (the cheaper path: a child's uid is a random
// number under one shared label, and no handle is kept, while a root actor needs a distinct name,
// interned for the life of the process; see BM_PostalBytesPerIdleRootActor). Like the CAF case it
// stops them all afterwards: stopping the parent stops its children (R-ACT-3).
void BM_PostalBytesPerIdleActor(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  LifeCounts counts;  // declared before the proc: the actors point at it until the end
  Proc proc(threads_options(2));
  auto client = Client::attach(proc, "bench");
  if (!client.ok()) return state.SkipWithError(client.status().ToString().c_str());
  double bytes_per_actor = 0;
  int round = 0;
  for (auto _ : state) {
    counts.started.store(0, std::memory_order_relaxed);
    counts.stopped.store(0, std::memory_order_relaxed);
    auto parent = postal::spawn<Parent>(proc, absl::StrCat("parent", round++), &counts);
    if (!spawned(state, parent)) return;
    const size_t before = rss_bytes();
    parent->ref().send(**client, SpawnChildren{n});
    if (!spin_until_or_timeout(counts.started, n)) {
      return state.SkipWithError("idle children did not all start within the timeout");
    }
    // Give the scheduler a moment to finish the last initializations (as the CAF case does).
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const size_t after = rss_bytes();
    bytes_per_actor = bytes_per(before, after, n);
    state.counters["mailboxes"] = static_cast<double>(proc.mailbox_count());
    stop_and_wait(*parent);
    if (!spin_until_or_timeout(counts.stopped, n)) {
      return state.SkipWithError("idle children did not all stop within the timeout");
    }
  }
  state.counters["bytes_per_actor"] = bytes_per_actor;
}

// postal only: n idle root actors named "a<i>", spawned from the main thread like CAF's; their
// handles are not kept (the proc frees them when it is destroyed).
void BM_PostalBytesPerIdleRootActor(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  LifeCounts counts;  // declared before the proc: the actors point at it until the end
  Proc proc(threads_options(2));
  double bytes_per_actor = 0;
  for (auto _ : state) {
    counts.started.store(0, std::memory_order_relaxed);
    const size_t before = rss_bytes();
    for (int i = 0; i < n; ++i) {
      auto h = postal::spawn<Trivial>(proc, absl::StrCat("a", i), &counts);
      if (!spawned(state, h)) return;
    }
    if (!spin_until_or_timeout(counts.started, n)) {
      return state.SkipWithError("idle actors did not all start within the timeout");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    bytes_per_actor = bytes_per(before, rss_bytes(), n);
  }
  state.counters["bytes_per_actor"] = bytes_per_actor;
}

}  // namespace
}  // namespace postal_bench

using postal_bench::BM_PostalBytesPerIdleActor;
using postal_bench::BM_PostalBytesPerIdleRootActor;
using postal_bench::BM_PostalFanIn4;
using postal_bench::BM_PostalFanOut4;
using postal_bench::BM_PostalPingPong;
using postal_bench::BM_PostalPingPong1Thread;
using postal_bench::BM_PostalPingPongClient;
using postal_bench::BM_PostalPingPongClientLowPower;
using postal_bench::BM_PostalPingPongLowPower;
using postal_bench::BM_PostalRequestReply;
using postal_bench::BM_PostalRequestReplyBlocking;
using postal_bench::BM_PostalSpawn;
using postal_bench::BM_PostalSpawnOnly;

BENCHMARK(BM_PostalPingPong)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PostalPingPong1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PostalPingPongLowPower)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PostalPingPongClient)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PostalPingPongClientLowPower)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PostalFanOut4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PostalFanIn4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PostalRequestReply)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PostalRequestReplyBlocking)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PostalSpawn)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PostalSpawnOnly)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PostalBytesPerIdleActor)
    ->Arg(100000)
    ->Arg(1000000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PostalBytesPerIdleRootActor)
    ->Arg(100000)
    ->Arg(1000000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
