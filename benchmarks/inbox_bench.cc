// inbox_bench: the Inbox (M-INBOX-1…3) beside hand-written SQLite doing the same work at the same
// durability tier, in the same run (issue 14). Ratios Inbox/Baseline are what to read; the target
// is ≥ 50 % for both.
//   BM_InboxAccept/disk:T        Inbox::accept of a fresh identity (canonical JSON, SHA-256,
//                                BEGIN IMMEDIATE + INSERT … ON CONFLICT DO NOTHING + COMMIT)
//   BM_BaselineAccept/disk:T     the same insert in its own BEGIN IMMEDIATE … COMMIT, by hand, into
//                                a table with the same unique identity and ready index (what a
//                                hand-written inbox needs to claim), without fingerprint/metadata
//   BM_InboxProcess/disk:T/workers:W     kRecords records processed by W InboxWorkers (threads),
//                                        a handler writing one row
//   BM_BaselineProcess/disk:T/workers:W  the same by hand: a claim transaction of 16 rows, then a
//                                        transaction with per row the handler's insert and the
//                                        token-guarded completion
//   tier 0 = os (synchronous=NORMAL), 1 = disk (synchronous=FULL).
// Build and smoke-run only on a shared machine; measure on a quiet one.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "postal/mail/inbox.h"
#include "postal/mail/inbox_worker.h"

namespace postal::mail {
namespace {

constexpr int kRecords = 2000;
constexpr int kBatch = 16;

std::filesystem::path fresh_dir(std::string_view name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   absl::StrCat("postal-inbox-bench-", ::getpid(), "-", std::string(name));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

Durability tier_of(const benchmark::State& state) {
  return state.range(0) == 1 ? Durability::kDisk : Durability::kOs;
}

InboxMessage bench_message(int64_t n) {
  InboxMessage m;
  m.scope = InboxScope::tenant(std::string("t1"));
  m.source = std::string("bench");
  m.consumer = std::string("bench.v1");
  m.message_id = absl::StrCat("m-", n);
  m.event_type = std::string("order.created");
  m.payload = absl::StrCat(R"({"tenant":"t1","orderId":)", n, R"(,"lines":[1,2,3]})");
  return m;
}

// A raw connection with the tier's pragmas; the baselines' SQLite.
sqlite3* raw_connect(const std::filesystem::path& file, Durability tier) {
  sqlite3* db = nullptr;
  sqlite3_open(file.c_str(), &db);
  sqlite3_busy_timeout(db, 10000);
  sqlite3_exec(db, "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr);
  sqlite3_exec(
      db, tier == Durability::kDisk ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL",
      nullptr, nullptr, nullptr);
  return db;
}

bool run(sqlite3_stmt* s) {
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
  }
  sqlite3_reset(s);
  return rc == SQLITE_DONE;
}

void BM_InboxAccept(benchmark::State& state) {
  const std::filesystem::path dir = fresh_dir("accept");
  auto inbox = Inbox::open(dir / "inbox.db", {.durability = tier_of(state)});
  if (!inbox.ok()) return state.SkipWithError("cannot open the inbox");
  int64_t n = 0;
  for (auto _ : state) {
    if (!(*inbox)->accept(bench_message(n++)).ok()) return state.SkipWithError("accept failed");
  }
  state.SetItemsProcessed(state.iterations());
  inbox->reset();
  std::filesystem::remove_all(dir);
}

void BM_BaselineAccept(benchmark::State& state) {
  const std::filesystem::path dir = fresh_dir("baseline-accept");
  sqlite3* db = raw_connect(dir / "raw.db", tier_of(state));
  sqlite3_exec(db,
               "CREATE TABLE inbox (id INTEGER PRIMARY KEY, scope_kind TEXT, scope_id TEXT, "
               "source TEXT, consumer TEXT, message_id TEXT, event_type TEXT, schema_version "
               "INTEGER, payload TEXT, status TEXT, accepted_ms INTEGER, next_attempt_ms INTEGER, "
               "UNIQUE (scope_kind, scope_id, source, consumer, message_id)); "
               "CREATE INDEX inbox_ready ON inbox (consumer, status, next_attempt_ms)",
               nullptr, nullptr, nullptr);
  sqlite3_stmt *begin, *insert, *commit;
  sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, nullptr);
  sqlite3_prepare_v2(
      db,
      "INSERT INTO inbox (scope_kind, scope_id, source, consumer, message_id, "
      "event_type, schema_version, payload, status, accepted_ms, next_attempt_ms) VALUES "
      "('tenant', 't1', 'bench', 'bench.v1', ?, 'order.created', 1, ?, 'PENDING', "
      "0, 0) "
      "ON CONFLICT DO NOTHING",
      -1, &insert, nullptr);
  sqlite3_prepare_v2(db, "COMMIT", -1, &commit, nullptr);
  int64_t n = 0;
  for (auto _ : state) {
    const InboxMessage m = bench_message(n++);  // the same strings built, not canonicalized
    sqlite3_bind_text(insert, 1, m.message_id.data(), static_cast<int>(m.message_id.size()),
                      SQLITE_TRANSIENT);
    sqlite3_bind_text(insert, 2, m.payload.data(), static_cast<int>(m.payload.size()),
                      SQLITE_TRANSIENT);
    if (!run(begin) || !run(insert) || !run(commit)) return state.SkipWithError("insert failed");
  }
  state.SetItemsProcessed(state.iterations());
  for (sqlite3_stmt* s : {begin, insert, commit}) sqlite3_finalize(s);
  sqlite3_close(db);
  std::filesystem::remove_all(dir);
}

void BM_InboxProcess(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(1));
  int64_t n = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::filesystem::path dir = fresh_dir("process");
    auto inbox = Inbox::open(dir / "inbox.db", {.durability = tier_of(state)});
    if (!inbox.ok()) return state.SkipWithError("cannot open the inbox");
    sqlite3* app = raw_connect(dir / "inbox.db", tier_of(state));
    sqlite3_exec(app, "CREATE TABLE effect (message_id TEXT)", nullptr, nullptr, nullptr);
    sqlite3_close(app);
    for (int i = 0; i < kRecords; ++i) (void)(*inbox)->accept(bench_message(n++));
    std::vector<std::unique_ptr<InboxWorker>> ws;
    for (int w = 0; w < workers; ++w) {
      std::vector<HandlerRegistration> h;
      h.push_back({.consumer = "bench.v1",
                   .supports = {{"order.created", 1}},
                   .handler = [](std::string_view, HandlerContext& ctx) {
                     return ctx.tx.execute("INSERT INTO effect (message_id) VALUES (?)",
                                           {ctx.record.message.message_id});
                   }});
      auto worker = InboxWorker::create(**inbox, std::move(h), {.batch = kBatch});
      if (!worker.ok()) return state.SkipWithError("cannot create a worker");
      ws.push_back(*std::move(worker));
    }
    std::atomic<int64_t> done{0};
    state.ResumeTiming();
    std::vector<std::thread> threads;
    for (auto& w : ws) {
      threads.emplace_back([&, worker = w.get()] {
        while (done.load() < kRecords) {
          absl::StatusOr<ProcessResult> r = worker->run_once();
          if (!r.ok()) continue;  // lock contention: try again
          done += r->completed;
          if (r->completed == 0 && r->stale == 0) std::this_thread::yield();
        }
      });
    }
    for (std::thread& t : threads) t.join();
    state.PauseTiming();
    ws.clear();
    inbox->reset();
    std::filesystem::remove_all(dir);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kRecords);
}

void BM_BaselineProcess(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(1));
  for (auto _ : state) {
    state.PauseTiming();
    const std::filesystem::path dir = fresh_dir("baseline-process");
    const std::filesystem::path file = dir / "raw.db";
    sqlite3* setup = raw_connect(file, tier_of(state));
    sqlite3_exec(setup,
                 "CREATE TABLE work (id INTEGER PRIMARY KEY, status TEXT, token INTEGER, "
                 "message_id TEXT, lease_ms INTEGER); CREATE INDEX work_ready ON work (status); "
                 "CREATE TABLE effect (message_id TEXT); BEGIN;",
                 nullptr, nullptr, nullptr);
    for (int i = 0; i < kRecords; ++i) {
      sqlite3_exec(
          setup,
          absl::StrCat("INSERT INTO work (status, message_id) VALUES ('P', 'm-", i, "')").c_str(),
          nullptr, nullptr, nullptr);
    }
    sqlite3_exec(setup, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(setup);
    std::atomic<int64_t> done{0};
    std::atomic<int64_t> tokens{1};
    state.ResumeTiming();
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) {
      threads.emplace_back([&] {
        sqlite3* db = raw_connect(file, tier_of(state));
        sqlite3_stmt *pick, *claim, *effect, *complete;
        sqlite3_prepare_v2(db, "SELECT id, message_id FROM work WHERE status = 'P' LIMIT ?", -1,
                           &pick, nullptr);
        sqlite3_prepare_v2(db, "UPDATE work SET status = 'R', token = ?, lease_ms = 0 WHERE id = ?",
                           -1, &claim, nullptr);
        sqlite3_prepare_v2(db, "INSERT INTO effect (message_id) VALUES (?)", -1, &effect, nullptr);
        sqlite3_prepare_v2(db,
                           "UPDATE work SET status = 'C', token = NULL WHERE id = ? AND token = ?",
                           -1, &complete, nullptr);
        while (done.load() < kRecords) {
          std::vector<std::pair<int64_t, std::string>> rows;
          const int64_t token = tokens++;
          if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) continue;
          sqlite3_bind_int(pick, 1, kBatch);
          while (sqlite3_step(pick) == SQLITE_ROW) {
            rows.emplace_back(sqlite3_column_int64(pick, 0),
                              reinterpret_cast<const char*>(sqlite3_column_text(pick, 1)));
          }
          sqlite3_reset(pick);
          for (const auto& r : rows) {
            sqlite3_bind_int64(claim, 1, token);
            sqlite3_bind_int64(claim, 2, r.first);
            run(claim);
          }
          sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
          if (rows.empty()) {
            std::this_thread::yield();
            continue;
          }
          // Claimed rows must be finished: wait for the write lock as long as it takes.
          while (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
          }
          for (const auto& r : rows) {
            sqlite3_bind_text(effect, 1, r.second.data(), static_cast<int>(r.second.size()),
                              SQLITE_TRANSIENT);
            run(effect);
            sqlite3_bind_int64(complete, 1, r.first);
            sqlite3_bind_int64(complete, 2, token);
            run(complete);
          }
          if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK) {
            done += static_cast<int64_t>(rows.size());
          } else {
            sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
          }
        }
        for (sqlite3_stmt* s : {pick, claim, effect, complete}) sqlite3_finalize(s);
        sqlite3_close(db);
      });
    }
    for (std::thread& t : threads) t.join();
    state.PauseTiming();
    std::filesystem::remove_all(dir);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kRecords);
}

BENCHMARK(BM_InboxAccept)->ArgsProduct({{0, 1}})->ArgNames({"disk"})->UseRealTime();
BENCHMARK(BM_BaselineAccept)->ArgsProduct({{0, 1}})->ArgNames({"disk"})->UseRealTime();
BENCHMARK(BM_InboxProcess)
    ->ArgsProduct({{0, 1}, {1, 4}})
    ->ArgNames({"disk", "workers"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BaselineProcess)
    ->ArgsProduct({{0, 1}, {1, 4}})
    ->ArgNames({"disk", "workers"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace postal::mail

BENCHMARK_MAIN();
