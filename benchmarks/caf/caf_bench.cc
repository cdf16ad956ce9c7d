// CAF 0.17 peer benchmarks for postal.
//
// Every benchmark builds its own caf::actor_system once per benchmark run
// (outside the timing loop) and lets the system's destructor await all
// actors, so every case must leave no live actors behind.
//
// CAF 0.17 notes:
//  * there is no `caf::scheduler_max_threads` helper in 0.17; the thread count
//    is set with cfg.set("scheduler.max-threads", N).
//  * atoms are `caf::atom_constant<caf::atom("...")>` (<= 10 chars).
//  * CAF's config is never fed argc/argv here (Google Benchmark owns them).

#include <caf/all.hpp>

#include <benchmark/benchmark.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

using start_atom = caf::atom_constant<caf::atom("start")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using ping_atom = caf::atom_constant<caf::atom("ping")>;
using pong_atom = caf::atom_constant<caf::atom("pong")>;

constexpr int kPingPongRoundTrips = 10000;  // per benchmark iteration
constexpr int kFanMessages = 10000;         // K, per sender/receiver pair
constexpr int kFanWidth = 4;
constexpr int kRequestRoundTrips = 10000;   // per benchmark iteration
constexpr int kSpawnCount = 10000;          // per benchmark iteration

caf::actor_system_config make_config(int threads) {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<size_t>(threads));
  return cfg;
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "caf_bench: %s\n", what);
  std::abort();
}

// Wait for a single `done` (or die on error) from a scoped_actor request.
template <class... Ts>
void request_and_wait(caf::scoped_actor& self, const caf::actor& dest,
                      Ts&&... xs) {
  self->request(dest, caf::infinite, std::forward<Ts>(xs)...)
    .receive([](done_atom) {},
             [](caf::error&) { die("request failed"); });
}

// ---------------------------------------------------------------------------
// Ping-pong
// ---------------------------------------------------------------------------

caf::behavior pong_actor(caf::event_based_actor* self) {
  // Replies by sending back to the sender; for an async (non-request) message
  // the returned value is delivered as an ordinary async message.
  (void)self;
  return {
    [](ping_atom, int x) { return caf::make_message(pong_atom::value, x); },
  };
}

struct ping_state {
  caf::response_promise rp;
};

caf::behavior ping_actor(caf::stateful_actor<ping_state>* self,
                         caf::actor pong) {
  return {
    [=](start_atom, int n) {
      self->state.rp = self->make_response_promise();
      self->send(pong, ping_atom::value, n);
    },
    [=](pong_atom, int x) {
      if (x <= 1) {
        self->state.rp.deliver(done_atom::value);
        return;
      }
      self->send(pong, ping_atom::value, x - 1);
    },
  };
}

void run_ping_pong(benchmark::State& state, int threads) {
  auto cfg = make_config(threads);
  caf::actor_system sys{cfg};
  {
    auto pong = sys.spawn(pong_actor);
    auto ping = sys.spawn(ping_actor, pong);
    caf::scoped_actor self{sys};
    for (auto _ : state)
      request_and_wait(self, ping, start_atom::value, kPingPongRoundTrips);
    self->send_exit(ping, caf::exit_reason::user_shutdown);
    self->send_exit(pong, caf::exit_reason::user_shutdown);
  }
  const auto msgs = static_cast<double>(state.iterations()) * 2.0 *
                    kPingPongRoundTrips;
  state.SetItemsProcessed(static_cast<int64_t>(msgs));
  state.counters["msgs_per_s"] =
    benchmark::Counter(msgs, benchmark::Counter::kIsRate);
}

void BM_CafPingPong(benchmark::State& state) { run_ping_pong(state, 2); }
void BM_CafPingPong1Thread(benchmark::State& state) {
  run_ping_pong(state, 1);
}

// ---------------------------------------------------------------------------
// Fan-out: one sender -> 4 receivers, K messages to each receiver.
// ---------------------------------------------------------------------------

struct counting_receiver_state {
  int count = 0;
};

// Counts `int` messages; after `expected` of them sends `done` to `notify`
// and resets its counter for the next round.
caf::behavior counting_receiver(
  caf::stateful_actor<counting_receiver_state>* self, int expected,
  caf::actor notify) {
  return {
    [=](int) {
      if (++self->state.count == expected) {
        self->state.count = 0;
        self->send(notify, done_atom::value);
      }
    },
  };
}

caf::behavior fan_out_sender(caf::event_based_actor* self,
                             std::vector<caf::actor> receivers, int k) {
  return {
    [=](start_atom) {
      for (int i = 0; i < k; ++i)
        for (auto& r : receivers)
          self->send(r, i);
    },
  };
}

void BM_CafFanOut4(benchmark::State& state) {
  auto cfg = make_config(2);
  caf::actor_system sys{cfg};
  {
    caf::scoped_actor self{sys};
    auto notify = caf::actor_cast<caf::actor>(self);
    std::vector<caf::actor> receivers;
    for (int i = 0; i < kFanWidth; ++i)
      receivers.push_back(sys.spawn(counting_receiver, kFanMessages, notify));
    auto sender = sys.spawn(fan_out_sender, receivers, kFanMessages);
    for (auto _ : state) {
      self->send(sender, start_atom::value);
      int done = 0;
      self->receive_while([&] { return done < kFanWidth; })(
        [&](done_atom) { ++done; });
    }
    self->send_exit(sender, caf::exit_reason::user_shutdown);
    for (auto& r : receivers)
      self->send_exit(r, caf::exit_reason::user_shutdown);
  }
  const auto msgs = static_cast<double>(state.iterations()) * kFanWidth *
                    kFanMessages;
  state.SetItemsProcessed(static_cast<int64_t>(msgs));
  state.counters["msgs_per_s"] =
    benchmark::Counter(msgs, benchmark::Counter::kIsRate);
}

// ---------------------------------------------------------------------------
// Fan-in: 4 senders -> one receiver, K messages from each sender.
// ---------------------------------------------------------------------------

caf::behavior fan_in_sender(caf::event_based_actor* self, caf::actor target,
                            int k) {
  return {
    [=](start_atom) {
      for (int i = 0; i < k; ++i)
        self->send(target, i);
    },
  };
}

void BM_CafFanIn4(benchmark::State& state) {
  auto cfg = make_config(2);
  caf::actor_system sys{cfg};
  {
    caf::scoped_actor self{sys};
    auto notify = caf::actor_cast<caf::actor>(self);
    auto receiver = sys.spawn(counting_receiver, kFanWidth * kFanMessages,
                              notify);
    std::vector<caf::actor> senders;
    for (int i = 0; i < kFanWidth; ++i)
      senders.push_back(sys.spawn(fan_in_sender, receiver, kFanMessages));
    for (auto _ : state) {
      for (auto& s : senders)
        self->send(s, start_atom::value);
      self->receive([](done_atom) {});
    }
    for (auto& s : senders)
      self->send_exit(s, caf::exit_reason::user_shutdown);
    self->send_exit(receiver, caf::exit_reason::user_shutdown);
  }
  const auto msgs = static_cast<double>(state.iterations()) * kFanWidth *
                    kFanMessages;
  state.SetItemsProcessed(static_cast<int64_t>(msgs));
  state.counters["msgs_per_s"] =
    benchmark::Counter(msgs, benchmark::Counter::kIsRate);
}

// ---------------------------------------------------------------------------
// Request/reply: event-based client chains request(...).then(...).
// ---------------------------------------------------------------------------

caf::behavior rr_server(caf::event_based_actor* self) {
  (void)self;
  return {
    [](int x) { return x + 1; },
  };
}

struct rr_client_state {
  caf::actor server;
  caf::response_promise rp;
  int remaining = 0;
};

using rr_client_actor = caf::stateful_actor<rr_client_state>;

void rr_next(rr_client_actor* self, int x) {
  self->request(self->state.server, caf::infinite, x)
    .then(
      [=](int y) {
        if (--self->state.remaining == 0)
          self->state.rp.deliver(done_atom::value);
        else
          rr_next(self, y);
      },
      [=](caf::error& err) { self->state.rp.deliver(std::move(err)); });
}

caf::behavior rr_client(rr_client_actor* self, caf::actor server) {
  self->state.server = std::move(server);
  return {
    [=](start_atom, int n) {
      self->state.remaining = n;
      self->state.rp = self->make_response_promise();
      rr_next(self, 0);
    },
  };
}

void BM_CafRequestReply(benchmark::State& state) {
  auto cfg = make_config(2);
  caf::actor_system sys{cfg};
  {
    auto server = sys.spawn(rr_server);
    auto client = sys.spawn(rr_client, server);
    caf::scoped_actor self{sys};
    for (auto _ : state)
      request_and_wait(self, client, start_atom::value, kRequestRoundTrips);
    self->send_exit(client, caf::exit_reason::user_shutdown);
    self->send_exit(server, caf::exit_reason::user_shutdown);
  }
  const auto rts = static_cast<double>(state.iterations()) *
                   kRequestRoundTrips;
  state.SetItemsProcessed(static_cast<int64_t>(rts));
  state.counters["round_trips_per_s"] =
    benchmark::Counter(rts, benchmark::Counter::kIsRate);
  state.counters["msgs_per_s"] =
    benchmark::Counter(2.0 * rts, benchmark::Counter::kIsRate);
}

// ---------------------------------------------------------------------------
// Spawn: N trivial event-based actors per iteration. The iteration spawns all
// of them, waits until each has run its initialization (i.e. exists and has
// its behavior), drops the handles and waits until the registry's running
// count is back to the baseline (so teardown is included and nothing piles up
// across iterations).
// ---------------------------------------------------------------------------

caf::behavior trivial_actor(caf::event_based_actor* self,
                            std::atomic<int>* started) {
  (void)self;
  started->fetch_add(1, std::memory_order_relaxed);
  return {
    [](int) {},
  };
}

void spin_until(const std::atomic<int>& counter, int expected) {
  while (counter.load(std::memory_order_acquire) < expected)
    std::this_thread::yield();
}

void BM_CafSpawn(benchmark::State& state) {
  auto cfg = make_config(2);
  caf::actor_system sys{cfg};
  const auto baseline = sys.registry().running();
  std::vector<caf::actor> handles;
  handles.reserve(kSpawnCount);
  std::atomic<int> started{0};
  for (auto _ : state) {
    started.store(0, std::memory_order_relaxed);
    for (int i = 0; i < kSpawnCount; ++i)
      handles.push_back(sys.spawn(trivial_actor, &started));
    spin_until(started, kSpawnCount);
    handles.clear();  // last strong refs gone -> actors terminate (unreachable)
    sys.registry().await_running_count_equal(baseline);
  }
  state.SetItemsProcessed(state.iterations() * kSpawnCount);
  state.counters["spawns_per_s"] = benchmark::Counter(
    static_cast<double>(state.iterations()) * kSpawnCount,
    benchmark::Counter::kIsRate);
}

// ---------------------------------------------------------------------------
// Memory per idle actor.
// ---------------------------------------------------------------------------

size_t rss_bytes() {
  long pages_total = 0;
  long pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr)
    die("cannot open /proc/self/statm");
  if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2)
    die("cannot parse /proc/self/statm");
  std::fclose(f);
  return static_cast<size_t>(pages_resident) *
         static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

void BM_CafBytesPerIdleActor(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  auto cfg = make_config(2);
  caf::actor_system sys{cfg};
  const auto baseline = sys.registry().running();
  double bytes_per_actor = 0;
  for (auto _ : state) {
    std::atomic<int> started{0};
    std::vector<caf::actor> handles;
    handles.reserve(n);  // handle storage is allocated before the baseline
    const auto before = rss_bytes();
    for (int i = 0; i < n; ++i)
      handles.push_back(sys.spawn(trivial_actor, &started));
    spin_until(started, n);
    // Give the scheduler a moment to finish the last initializations.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto after = rss_bytes();
    bytes_per_actor = (static_cast<double>(after) -
                       static_cast<double>(before)) /
                      static_cast<double>(n);
    for (auto& h : handles)
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
    handles.clear();
    sys.registry().await_running_count_equal(baseline);
  }
  state.counters["bytes_per_actor"] = bytes_per_actor;
}

// Churn: resident memory over millions of spawn/stop cycles, in rounds of 10,000 (spawn, wait
// until each ran its initialization, send each an exit, wait until none runs), RSS read after
// every million cycles — as churn_bench's BM_PostalChurn.
void BM_CafChurn(benchmark::State& state) {
  constexpr int kRound = 10000;
  constexpr int64_t kPerSample = 1000000;
  const int64_t cycles = state.range(0);
  auto cfg = make_config(2);
  caf::actor_system sys{cfg};
  const auto baseline = sys.registry().running();
  std::vector<caf::actor> handles;
  handles.reserve(kRound);
  const double mib = 1024.0 * 1024.0;
  double rss_1m = 0, rss_max = 0;
  for (auto _ : state) {
    for (int64_t done = 0; done < cycles; done += kRound) {
      std::atomic<int> started{0};
      for (int i = 0; i < kRound; ++i)
        handles.push_back(sys.spawn(trivial_actor, &started));
      spin_until(started, kRound);
      for (auto& h : handles)
        caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
      handles.clear();
      sys.registry().await_running_count_equal(baseline);
      if ((done + kRound) % kPerSample == 0) {
        const double rss = static_cast<double>(rss_bytes()) / mib;
        if (done + kRound == kPerSample)
          rss_1m = rss;
        else
          rss_max = std::max(rss_max, rss);
      }
    }
  }
  state.counters["rss_1M_MiB"] = rss_1m;
  state.counters["rss_max_MiB"] = rss_max;
  state.counters["rss_end_MiB"] = static_cast<double>(rss_bytes()) / mib;
  state.counters["cycles_per_s"] = benchmark::Counter(
    static_cast<double>(state.iterations() * cycles), benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_CafPingPong)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CafPingPong1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CafFanOut4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CafFanIn4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CafRequestReply)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CafSpawn)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CafBytesPerIdleActor)
  ->Arg(100000)
  ->Arg(1000000)
  ->Iterations(1)
  ->Unit(benchmark::kMillisecond)
  ->UseRealTime();

BENCHMARK(BM_CafChurn)
  ->Arg(10000000)
  ->Iterations(1)
  ->Unit(benchmark::kSecond)
  ->UseRealTime();

BENCHMARK_MAIN();
