// router_bench: the in-process cost of routing decisions, apart from any channel.
//
//   BM_RouterLookup/N       routing::Router::lookup (reader lock + longest prefix) over N routes
//   BM_PrefixTableLookup/N  the bare PrefixTable<V>::lookup underneath, no lock
//   BM_GatewayHops/H        one envelope posted through H in-process Gateways (0, 1, 2) to a sink
//
// Routes: half proc prefixes, a quarter actor prefixes, a quarter port prefixes, every id a random
// uid. Lookups cycle through 64 Ki precomputed port ids that hit, in equal shares, a port route,
// an actor route (the port table is probed first and misses), and a proc route (two misses
// first) — so every level of the longest-prefix match is exercised. Target: > 10 M lookups/s at
// 1 M routes (counter `lookups_per_s`).
//
// Gateway hops: hops 0 posts straight to the sink; hops 1 addresses the envelope `g1.inproc://1`
// (g1 peels itself and delivers to the attached proc); hops 2 `g1.g2.inproc://1` (g1 peels and
// passes to its peer g2, which peels and delivers). The envelope is reused: after each post its
// next hop and TTL are reset, so the loop measures routing, not allocation of the envelope (each
// peel still makes the new, shorter Location). The cost per hop is the difference between rows.
//
// POSTAL_BENCH_ABSL_DEADLOCK_DETECTION=off turns off absl::Mutex deadlock detection (Debian's
// libabsl leaves it on; Router and Gateway take a reader lock per lookup), as in postal_bench.
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string_view>
#include <vector>

#include <benchmark/benchmark.h>

#include "absl/synchronization/mutex.h"
#include "postal/routing/gateway.h"
#include "postal/routing/prefix_table.h"
#include "postal/routing/router.h"
#include "postal/runtime/message_envelope.h"

namespace {

using postal::runtime::ActorId;
using postal::runtime::EnvelopePtr;
using postal::runtime::Label;
using postal::runtime::MailboxSender;
using postal::runtime::Port;
using postal::runtime::PortId;
using postal::runtime::ProcId;
using postal::runtime::Uid;

struct RouteSet {
  std::vector<postal::routing::RoutePrefix> prefixes;
  std::vector<PortId> queries;
};

// N routes and the lookups that hit them (see the file comment), built once per N.
const RouteSet& routes(int64_t n) {
  static std::map<int64_t, std::unique_ptr<RouteSet>> cache;
  auto& slot = cache[n];
  if (slot) return *slot;
  slot = std::make_unique<RouteSet>();
  const Label label = *Label::parse("r");
  std::mt19937_64 rng(42);
  std::vector<ProcId> procs;
  std::vector<ActorId> actors;
  std::vector<PortId> ports;
  const int64_t n_procs = std::max<int64_t>(1, n / 2);
  const int64_t n_actors = std::max<int64_t>(1, n / 4);
  const int64_t n_ports = std::max<int64_t>(1, n - n_procs - n_actors);
  for (int64_t i = 0; i < n_procs; ++i) procs.push_back(ProcId{Uid::instance(rng(), label)});
  for (int64_t i = 0; i < n_actors; ++i) {
    actors.push_back(ActorId{procs[rng() % procs.size()], Uid::instance(rng(), label)});
  }
  for (int64_t i = 0; i < n_ports; ++i) {
    ports.push_back(PortId{actors[rng() % actors.size()], Port::handler(rng())});
  }
  for (const auto& p : procs) slot->prefixes.emplace_back(p);
  for (const auto& a : actors) slot->prefixes.emplace_back(a);
  for (const auto& p : ports) slot->prefixes.emplace_back(p);
  constexpr size_t kQueries = 1 << 16;
  for (size_t i = 0; i < kQueries; ++i) {
    switch (i % 3) {
      case 0:  // a routed port
        slot->queries.push_back(ports[rng() % ports.size()]);
        break;
      case 1:  // an unrouted port of a routed actor
        slot->queries.push_back(PortId{actors[rng() % actors.size()], Port::handler(rng())});
        break;
      default:  // an unrouted actor of a routed proc
        slot->queries.push_back(
            PortId{ActorId{procs[rng() % procs.size()], Uid::instance(rng(), label)},
                   Port::handler(rng())});
    }
  }
  return *slot;
}

class NullSender final : public MailboxSender {
 public:
  void post_unchecked(EnvelopePtr, postal::runtime::ReturnHandle&) override {}
};

void BM_RouterLookup(benchmark::State& state) {
  const RouteSet& set = routes(state.range(0));
  NullSender sender;
  postal::routing::Router router;
  for (const auto& p : set.prefixes) router.add(p, &sender);
  size_t i = 0, misses = 0;
  for (auto _ : state) {
    MailboxSender* found = router.lookup(set.queries[i]);
    misses += found == nullptr;
    benchmark::DoNotOptimize(found);
    i = (i + 1) & (set.queries.size() - 1);
  }
  if (misses != 0) state.SkipWithError("a lookup that should hit missed");
  state.SetItemsProcessed(state.iterations());
  state.counters["routes"] = static_cast<double>(router.size());
  state.counters["lookups_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_PrefixTableLookup(benchmark::State& state) {
  const RouteSet& set = routes(state.range(0));
  postal::routing::PrefixTable<int> table;
  for (const auto& p : set.prefixes) table.add(p, 1);
  size_t i = 0, misses = 0;
  for (auto _ : state) {
    const int* found = table.lookup(set.queries[i]);
    misses += found == nullptr;
    benchmark::DoNotOptimize(found);
    i = (i + 1) & (set.queries.size() - 1);
  }
  if (misses != 0) state.SkipWithError("a lookup that should hit missed");
  state.SetItemsProcessed(state.iterations());
  state.counters["routes"] = static_cast<double>(table.size());
  state.counters["lookups_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

struct Nothing {
  template <class A>
  void serialize(A&) {}
};

}  // namespace

POSTAL_MESSAGE(Nothing, "bench.router.Nothing");

namespace {

// Keeps what it is given, so the loop can post the same envelope again.
class Sink final : public MailboxSender {
 public:
  void post_unchecked(EnvelopePtr env, postal::runtime::ReturnHandle&) override {
    last = std::move(env);
  }
  EnvelopePtr last;
};

class Returns final : public postal::runtime::ReturnHandle {
 public:
  void return_envelope(EnvelopePtr) override { ++returned; }
  void drop(EnvelopePtr, postal::runtime::DropCause) override { ++returned; }
  int returned = 0;
};

void BM_GatewayHops(benchmark::State& state) {
  const int hops = static_cast<int>(state.range(0));
  const Uid g1_uid = Uid::singleton(*Label::parse("g1"));
  const Uid g2_uid = Uid::singleton(*Label::parse("g2"));
  const ProcId proc{Uid::singleton(*Label::parse("p"))};
  const auto channel = postal::runtime::Location::parse("inproc://1").value();
  Sink sink;
  Returns returns;
  postal::routing::Gateway g2(g2_uid, channel);
  postal::routing::Gateway g1(g1_uid, channel);
  if (!g2.attach(proc, &sink).ok() || !g1.attach(proc, &sink).ok() ||
      !g1.add_peer(g2_uid, &g2).ok()) {
    state.SkipWithError("gateway setup failed");
    return;
  }

  const char* where[] = {"inproc://1", "g1.inproc://1", "g1.g2.inproc://1"};
  auto dest = postal::runtime::PortAddr::parse(std::string("a.p:e0@") + where[hops]).value();
  MailboxSender* entry = hops == 0 ? static_cast<MailboxSender*>(&sink) : &g1;
  EnvelopePtr env = postal::runtime::MessageEnvelope::make(postal::runtime::ActorAddr{}, dest,
                                                           postal::wire::Any::make(Nothing{}));
  for (auto _ : state) {
    env->set_ttl(postal::runtime::kDefaultTtl);
    env->set_next_hop(dest);
    entry->post(std::move(env), returns);
    env = std::move(sink.last);
    if (!env) break;
  }
  if (!env || returns.returned != 0) state.SkipWithError("the envelope did not reach the sink");
  state.SetItemsProcessed(state.iterations());
  state.counters["posts_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_RouterLookup)->Arg(10)->Arg(10'000)->Arg(1'000'000);
BENCHMARK(BM_PrefixTableLookup)->Arg(10)->Arg(10'000)->Arg(1'000'000);
BENCHMARK(BM_GatewayHops)->Arg(0)->Arg(1)->Arg(2);

}  // namespace

int main(int argc, char** argv) {
  const char* mode = std::getenv("POSTAL_BENCH_ABSL_DEADLOCK_DETECTION");
  const bool off = mode != nullptr && std::string_view(mode) == "off";
  if (off) absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  benchmark::AddCustomContext("absl_deadlock_detection", off ? "off" : "default");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
