// mail_store_bench: appends per second to a SqliteMailStore, in process (issue 12).
//   BM_StoreAppend/<tier>/<bytes>   urgent (durable) appends of `bytes`, each awaited (synchronous
//                                   publish); with ->Threads(n), n publishers share one store, so
//                                   the writer's group commit carries up to n per transaction.
//   tier 0 = os (synchronous=NORMAL), 1 = disk (synchronous=FULL, fsync before every ack).
// Counters: items/s, and commits/s is not exposed; messages per commit = threads at saturation.
// No JetStream peer yet: docs/benchmarks.md says how it is meant to be compared.
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "postal/mail/sqlite_mail_store.h"

namespace postal::mail {
namespace {

std::filesystem::path g_dir;
std::unique_ptr<MailStore> g_store;

void BM_StoreAppend(benchmark::State& state) {
  const auto tier = state.range(0) == 1 ? Durability::kDisk : Durability::kOs;
  const std::string body(static_cast<size_t>(state.range(1)), 'x');
  if (state.thread_index() == 0) {
    g_dir = std::filesystem::temp_directory_path() /
            absl::StrCat("postal-mail-store-bench-", ::getpid());
    std::filesystem::remove_all(g_dir);
    std::filesystem::create_directories(g_dir);
    auto store = SqliteMailStore::open(g_dir / "bench.db", {.durability = tier});
    if (!store.ok() || !(*store)->create({.name = "bench"}).ok()) {
      state.SkipWithError("cannot open the store");
      return;
    }
    g_store = *std::move(store);
  }
  for (auto _ : state) {
    if (!g_store->append("bench", Priority::kUrgent, body).ok()) {
      state.SkipWithError("append failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * state.range(1));
  if (state.thread_index() == 0) {
    g_store.reset();
    std::filesystem::remove_all(g_dir);
  }
}
BENCHMARK(BM_StoreAppend)
    ->ArgsProduct({{0, 1}, {64, 1024}})
    ->ArgNames({"disk", "bytes"})
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime();

}  // namespace
}  // namespace postal::mail

BENCHMARK_MAIN();
