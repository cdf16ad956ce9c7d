// churn_bench: resident memory over millions of spawn/stop cycles (issue 11, R-ACT-7), beside
// CAF's BM_CafChurn in caf_bench (same cycles, same rounds, two scheduler threads).
//
// A long-lived parent spawns children in rounds of kRound (each a fresh instance of one label,
// as a server spawns its workers) and stops each at once; the main thread waits until every
// child of the round has stopped. RSS (/proc/self/statm) is read after every million cycles.
// postal keeps an ended actor as a tombstone for its grace (10 s), at most
// ProcOptions::max_tombstones of them (100,000 by default); CAF keeps nothing of an ended actor.
//   BM_PostalChurn          the defaults: the grace and the bound
//   BM_PostalChurnGraceOnly no bound (max_tombstones = SIZE_MAX): the grace alone
// Counters: rss_1M_MiB (after the first million cycles), rss_max_MiB (the most after it),
// rss_end_MiB, tombstones (mailboxes left in the muxer at the end), cycles_per_s.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "absl/strings/str_cat.h"
#include "postal/postal.h"
#include "resident_memory.h"

namespace churn {
struct Churn {  // spawn and stop this many children
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};
}  // namespace churn

POSTAL_MESSAGE(churn::Churn, "bench.churn.Churn");

namespace {

constexpr int kRound = 10'000;
constexpr int64_t kPerSample = 1'000'000;
const absl::Duration kTimeout = absl::Seconds(60);

struct Life {
  std::atomic<int64_t> started{0};
  std::atomic<int64_t> stopped{0};
};

class Leaf : public postal::Actor, public postal::Handles<churn::Churn> {
 public:
  explicit Leaf(Life* life) : life_(life) {}
  absl::Status init(postal::Context&) override {
    life_->started.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  void on_stop(postal::Context&, const postal::ActorStatus&) override {
    life_->stopped.fetch_add(1, std::memory_order_release);
  }
  absl::Status handle(postal::Context&, churn::Churn) override { return absl::OkStatus(); }

 private:
  Life* life_;
};

// The long-lived parent: each Churn spawns that many children named "leaf" (each a fresh
// instance of the label) and stops each at once.
class Churner : public postal::Actor, public postal::Handles<churn::Churn> {
 public:
  explicit Churner(Life* life) : life_(life) {}
  absl::Status handle(postal::Context& cx, churn::Churn m) override {
    for (int i = 0; i < m.n; ++i) {
      absl::StatusOr<postal::ActorHandle<Leaf>> child = cx.spawn<Leaf>("leaf", life_);
      if (!child.ok()) return child.status();
      child->stop();
    }
    return absl::OkStatus();
  }

 private:
  Life* life_;
};

// -1 when /proc/self/statm cannot be read.
double rss_mib() {
  absl::StatusOr<size_t> rss = postal::bench::resident_bytes();
  return rss.ok() ? static_cast<double>(*rss) / (1024.0 * 1024.0) : -1;
}

void churn(benchmark::State& state, postal::ProcOptions options) {
  const int64_t cycles = state.range(0);
  postal::Proc proc(std::move(options));
  absl::StatusOr<std::unique_ptr<postal::Client>> client = postal::Client::attach(proc, "main");
  Life life;
  absl::StatusOr<postal::ActorHandle<Churner>> churner =
      postal::spawn<Churner>(proc, "churner", &life);
  if (!client.ok() || !churner.ok()) {
    state.SkipWithError("could not attach the client or spawn the churner");
    return;
  }
  double rss_1m = 0, rss_max = 0;
  for (auto _ : state) {
    for (int64_t done = kRound; done <= cycles; done += kRound) {
      churner->ref().send(**client, churn::Churn{kRound});
      const absl::Time deadline = absl::Now() + kTimeout;
      while (life.stopped.load(std::memory_order_acquire) < done) {
        if (absl::Now() > deadline) {
          state.SkipWithError("a round's children did not all stop within 60 s");
          return;
        }
        sched_yield();
      }
      if (done % kPerSample == 0) {
        const double rss = rss_mib();
        if (done == kPerSample) {
          rss_1m = rss;
        } else {
          rss_max = std::max(rss_max, rss);
        }
      }
    }
  }
  state.counters["rss_1M_MiB"] = rss_1m;
  state.counters["rss_max_MiB"] = rss_max;
  state.counters["rss_end_MiB"] = rss_mib();
  state.counters["tombstones"] = static_cast<double>(proc.mailbox_count());
  state.counters["started"] = static_cast<double>(life.started.load());
  state.counters["cycles_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * cycles), benchmark::Counter::kIsRate);
}

void BM_PostalChurn(benchmark::State& state) {
  churn(state, postal::ProcOptions::threads(2));
}

void BM_PostalChurnGraceOnly(benchmark::State& state) {
  postal::ProcOptions o = postal::ProcOptions::threads(2);
  o.max_tombstones = std::numeric_limits<size_t>::max();
  churn(state, std::move(o));
}

}  // namespace

BENCHMARK(BM_PostalChurn)->Arg(10'000'000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_PostalChurnGraceOnly)
    ->Arg(10'000'000)
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

BENCHMARK_MAIN();
