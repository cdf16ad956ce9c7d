// The floor: raw Boost.Fiber ping-pong, no actors, no envelopes, no mailboxes.
//
// Two fibers pass an int back and forth through two boost::fibers::buffered_channel<int>, 10,000
// round trips (20,000 messages) per iteration like the ping-pong cases of postal_bench and
// caf_bench. A postal message costs at least this much; the distance between this and
// BM_PostalPingPong is what the runtime adds.
//
//   BM_FiberPingPong          both fibers on the main thread: a message is a fiber switch.
//   BM_FiberPingPong2Threads  the ponger fiber on its own thread (default round_robin scheduler,
//                             which sleeps on a condition variable when it has no ready fiber),
//                             so a message also crosses threads and usually wakes a sleeper.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <benchmark/benchmark.h>

#include "boost/fiber/all.hpp"

namespace {

constexpr int kRoundTrips = 10000;    // per benchmark iteration
constexpr std::size_t kCapacity = 2;  // buffered_channel needs a power of two >= 2

using Channel = boost::fibers::buffered_channel<int>;

// Answers every ping with the same value until the ping channel closes.
void pong_loop(Channel& pings, Channel& pongs) {
  int x = 0;
  while (pings.pop(x) == boost::fibers::channel_op_status::success) {
    if (pongs.push(x) != boost::fibers::channel_op_status::success) return;
  }
}

// One iteration from the pinger's side: kRoundTrips pings, each waiting for its pong.
void ping_round(Channel& pings, Channel& pongs) {
  for (int i = kRoundTrips; i > 0; --i) {
    int y = 0;
    if (pings.push(i) != boost::fibers::channel_op_status::success ||
        pongs.pop(y) != boost::fibers::channel_op_status::success || y != i) {
      std::fprintf(stderr, "fiber_floor_bench: channel failed\n");
      std::abort();
    }
  }
}

void report(benchmark::State& state) {
  const double msgs = static_cast<double>(state.iterations()) * 2.0 * kRoundTrips;
  state.SetItemsProcessed(static_cast<int64_t>(msgs));
  state.counters["msgs_per_s"] = benchmark::Counter(msgs, benchmark::Counter::kIsRate);
}

void BM_FiberPingPong(benchmark::State& state) {
  Channel pings(kCapacity);
  Channel pongs(kCapacity);
  boost::fibers::fiber ponger([&] { pong_loop(pings, pongs); });
  for (auto _ : state) ping_round(pings, pongs);  // the main fiber is the pinger
  pings.close();
  ponger.join();
  pongs.close();
  report(state);
}

void BM_FiberPingPong2Threads(benchmark::State& state) {
  Channel pings(kCapacity);
  Channel pongs(kCapacity);
  std::thread other([&] {
    boost::fibers::fiber ponger([&] { pong_loop(pings, pongs); });
    ponger.join();
  });
  for (auto _ : state) ping_round(pings, pongs);
  pings.close();
  other.join();
  pongs.close();
  report(state);
}

}  // namespace

BENCHMARK(BM_FiberPingPong)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_FiberPingPong2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
