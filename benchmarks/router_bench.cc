// router_bench: the in-process cost of routing decisions, apart from any channel.
//
//   BM_RouterLookup/N/P               routing::Router::lookup (reader lock + longest prefix)
//   BM_LockedPrefixTableLookup/N/P    a reader lock + PrefixTable<V>::lookup: the Router before
//                                     FlatPrefixTable, measured beside it
//   BM_LockedFlatPrefixTableLookup/N/P  a reader lock + FlatPrefixTable<V>::lookup
//   BM_PrefixTableLookup/N/P          the bare PrefixTable<V>::lookup (three flat_hash_maps), no
//   lock BM_FlatPrefixTableLookup/N/P      the bare FlatPrefixTable<V>::lookup (one flat table), no
//   lock BM_MissFloorDependent/MiB         one random load per op, each load's address from the
//   last:
//                                     the latency of one cache miss
//   BM_MissFloorLocked/MiB            a reader lock + one random load per op: the floor of a
//                                     Router lookup that misses once (the lock's atomic
//                                     read-modify-writes keep one op's miss from overlapping the
//                                     next's)
//   BM_MissFloorIndependent/MiB       one random load per op, addresses known ahead: the misses
//                                     overlap, as bare-table lookups in a loop can
//   BM_GatewayHops/H                  one envelope posted through H in-process Gateways (0, 1, 2)
//
// Routes (N = 10, 10 000, 1 000 000): half proc prefixes, a quarter actor prefixes, a quarter port
// prefixes, every id a random uid; V is a MailboxSender*, as in Router. Lookups hit, in equal
// shares, a port route, an actor route (the port level misses first) and a proc route (port and
// actor levels miss first), cycling through precomputed port ids; the access pattern P is
//   0 hot      1 Ki ids: a hot set, the table's lines it touches stay in cache
//   1 64Ki     64 Ki ids (the pattern of the first measurement): at 1 M routes a part of the table
//   2 whole    max(64 Ki, N) ids rounded up to a power of two, spread over the whole table: at 1 M
//              routes every lookup is a cache miss, the memory-bound case.
// Target: > 10 M lookups/s at 1 M routes (counter `lookups_per_s`). The miss floors run on 80 MiB
// (what FlatPrefixTable holds at 1 M routes), with the same huge-page hint.
//
// Gateway hops: hops 0 posts straight to the sink; hops 1 addresses the envelope `g1.inproc://1`
// (g1 peels itself and delivers to the attached proc); hops 2 `g1.g2.inproc://1` (g1 peels and
// passes to its peer g2, which peels and delivers). The envelope is reused: after each post its
// next hop and TTL are reset, so the loop measures routing, not allocation of the envelope (each
// peel still makes the new, shorter Location). The cost per hop is the difference between rows.
//
// POSTAL_BENCH_ABSL_DEADLOCK_DETECTION=off turns off absl::Mutex deadlock detection (Debian's
// libabsl leaves it on; Router and Gateway take a reader lock per lookup), as in postal_bench.
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "absl/synchronization/mutex.h"
#include "postal/routing/flat_prefix_table.h"
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

const char* const kPatternNames[] = {"hot", "64Ki", "whole"};

size_t query_count(int64_t n, int64_t pattern) {
  if (pattern == 0) return size_t{1} << 10;
  if (pattern == 1) return size_t{1} << 16;
  size_t q = size_t{1} << 16;
  while (q < static_cast<size_t>(n)) q *= 2;
  return q;
}

// N routes and the lookups that hit them under access pattern P (see the file comment), built
// once per (N, P); the routes depend on N only.
const RouteSet& routes(int64_t n, int64_t pattern) {
  static std::map<std::pair<int64_t, int64_t>, std::unique_ptr<RouteSet>> cache;
  auto& slot = cache[{n, pattern}];
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
  const size_t n_queries = query_count(n, pattern);
  for (size_t i = 0; i < n_queries; ++i) {
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

// Runs `lookup(query)` over the pattern's queries; fails the run if one misses.
template <class Lookup>
void run_lookups(benchmark::State& state, const RouteSet& set, size_t routes, Lookup lookup) {
  size_t i = 0, misses = 0;
  const size_t mask = set.queries.size() - 1;
  for (auto _ : state) {
    MailboxSender* found = lookup(set.queries[i]);
    misses += found == nullptr;
    benchmark::DoNotOptimize(found);
    i = (i + 1) & mask;
  }
  if (misses != 0) state.SkipWithError("a lookup that should hit missed");
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(kPatternNames[state.range(1)]);
  state.counters["routes"] = static_cast<double>(routes);
  state.counters["lookups_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_RouterLookup(benchmark::State& state) {
  const RouteSet& set = routes(state.range(0), state.range(1));
  NullSender sender;
  postal::routing::Router router;
  for (const auto& p : set.prefixes) router.add(p, &sender);
  run_lookups(state, set, router.size(), [&](const PortId& id) { return router.lookup(id); });
}

template <class Table>
void BM_TableLookup(benchmark::State& state) {
  const RouteSet& set = routes(state.range(0), state.range(1));
  NullSender sender;
  Table table;
  for (const auto& p : set.prefixes) table.add(p, &sender);
  run_lookups(state, set, table.size(), [&](const PortId& id) {
    MailboxSender* const* found = table.lookup(id);
    return found != nullptr ? *found : nullptr;
  });
}

// As Router::lookup does it: a reader lock around the table's lookup.
template <class Table>
void BM_LockedTableLookup(benchmark::State& state) {
  const RouteSet& set = routes(state.range(0), state.range(1));
  NullSender sender;
  absl::Mutex mu;
  Table table;
  for (const auto& p : set.prefixes) table.add(p, &sender);
  run_lookups(state, set, table.size(), [&](const PortId& id) {
    absl::ReaderMutexLock lock(&mu);
    MailboxSender* const* found = table.lookup(id);
    return found != nullptr ? *found : nullptr;
  });
}

using OldTable = postal::routing::PrefixTable<MailboxSender*>;
using FlatTable = postal::routing::FlatPrefixTable<MailboxSender*>;

void BM_PrefixTableLookup(benchmark::State& s) { BM_TableLookup<OldTable>(s); }
void BM_FlatPrefixTableLookup(benchmark::State& s) { BM_TableLookup<FlatTable>(s); }
void BM_LockedPrefixTableLookup(benchmark::State& s) { BM_LockedTableLookup<OldTable>(s); }
void BM_LockedFlatPrefixTableLookup(benchmark::State& s) { BM_LockedTableLookup<FlatTable>(s); }

// A buffer of `mib` MiB of 64-byte lines, with the huge-page hint FlatPrefixTable gives its slots.
struct Lines {
  struct Line {
    uint64_t next;
    uint64_t pad[7];
  };
  explicit Lines(int64_t mib) : count(static_cast<size_t>(mib) << 20 >> 6) {
    const size_t bytes = count * sizeof(Line);
    line = static_cast<Line*>(std::aligned_alloc(size_t{2} << 20, bytes));
    madvise(line, bytes, MADV_HUGEPAGE);
    std::memset(line, 0, bytes);
  }
  ~Lines() { std::free(line); }
  size_t count;
  Line* line;
};

void BM_MissFloorDependent(benchmark::State& state) {
  Lines lines(state.range(0));
  std::vector<uint32_t> order(lines.count);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
  for (size_t i = 0; i < order.size(); ++i) {
    lines.line[order[i]].next = order[(i + 1) % order.size()];  // one random cycle
  }
  uint64_t at = order[0];
  for (auto _ : state) {
    at = lines.line[at].next;
    benchmark::DoNotOptimize(at);
  }
  state.counters["loads_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

template <bool kLocked>
void miss_floor_independent(benchmark::State& state) {
  Lines lines(state.range(0));
  std::mt19937_64 rng(7);
  std::vector<uint32_t> at(size_t{1} << 20);
  for (auto& a : at) a = static_cast<uint32_t>(rng() % lines.count);
  absl::Mutex mu;
  size_t i = 0;
  uint64_t sum = 0;
  for (auto _ : state) {
    if constexpr (kLocked) {
      absl::ReaderMutexLock lock(&mu);
      sum += lines.line[at[i]].next;
    } else {
      sum += lines.line[at[i]].next;
    }
    i = (i + 1) & (at.size() - 1);
  }
  benchmark::DoNotOptimize(sum);
  state.counters["loads_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
void BM_MissFloorLocked(benchmark::State& s) { miss_floor_independent<true>(s); }
void BM_MissFloorIndependent(benchmark::State& s) { miss_floor_independent<false>(s); }

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

void lookup_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"routes", "pattern"})->ArgsProduct({{10, 10'000, 1'000'000}, {0, 1, 2}});
}
BENCHMARK(BM_RouterLookup)->Apply(lookup_args);
BENCHMARK(BM_LockedPrefixTableLookup)->Apply(lookup_args);
BENCHMARK(BM_LockedFlatPrefixTableLookup)->Apply(lookup_args);
BENCHMARK(BM_PrefixTableLookup)->Apply(lookup_args);
BENCHMARK(BM_FlatPrefixTableLookup)->Apply(lookup_args);
BENCHMARK(BM_MissFloorDependent)->ArgName("MiB")->Arg(80);
BENCHMARK(BM_MissFloorLocked)->ArgName("MiB")->Arg(80);
BENCHMARK(BM_MissFloorIndependent)->ArgName("MiB")->Arg(80);
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
