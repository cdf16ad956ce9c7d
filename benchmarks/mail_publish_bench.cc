// mail_publish_bench: durable publishes per second into postal's retained mailboxes on SQLite,
// beside nats-server JetStream (file store) measured in the same run (issue 12).
//
// The shapes are the same on both sides: one message at a time with its ack awaited (synchronous
// publish), and n publishers at once, each waiting for its own ack (`threads:8`), each with its own
// connection — a JetStream connection, or a postal Client with its own PostOffice — so the
// server's group commit can carry several. Every postal message is `urgent`, so it reaches the
// store (M-PRIO-2); every JetStream message goes to a file-store stream.
//
//   BM_JetStreamPublish/bytes/threads     js_Publish, ack awaited (across processes, tcp loopback)
//   BM_JetStreamPublishAsync/bytes        js_PublishAsync with at most 256 pending, 1 024 a round
//   BM_PostalPublishIpc/disk/bytes/threads  the `post` provider: this process → a `postal proc`
//                                         serving postal.MailboxHost on a SQLite store, over ipc
//   BM_PostalPublishInProcess/disk/bytes/threads  the `mem` provider on the same kind of store,
//                                         in this process (no socket)
//   BM_PostalPublishAsync{Ipc,InProcess}/disk/bytes  PostOffice::post_async with at most 256 in
//                                         flight, 1 024 a round (js_PublishAsync's shape)
//   BM_PostalPublishOnNats/bytes/threads  the `mem` provider in this process, its retained
//                                         mailbox on the NATS store (nats_mail_store.h) on the
//                                         same nats-server: postal's cost over JetStream itself
//   BM_PostalPublishAsyncOnNats/bytes     the same with post_async (js_PublishAsync's shape)
// disk:0 is the `os` tier (WAL, synchronous=NORMAL — the same promise as JetStream's default
// file store, which hands writes to the OS and fsyncs every 2 minutes); disk:1 is `disk` (fsync
// before every ack). JetStream in nats-server 2.9 cannot fsync per ack, so `disk` is compared with
// its default store: postal promises more there, and is measured against it anyway.
//
// POSTAL_BENCH_SERVER_SPIN_US, when set, is the hosts' `server_spin_us` spawn parameter (the
// MailboxHost's default is 250; 0 turns the server spin off), for A/B runs of it.
//
// Needs nats-server (Debian `nats-server`) and the `postal` binary (POSTAL_BINARY, built with it).
// docs/benchmarks.md, "Durable publish", has the command and the results.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nats/nats.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "nats_server.h"
#include "postal/mail/mailbox_host.h"
#include "postal/mail/mem_provider.h"
#include "postal/mail/nats_mail_store.h"
#include "postal/mail/post_office.h"
#include "postal/mail/post_provider.h"
#include "postal/mail/retained_mailboxes.h"
#include "postal/mail/sqlite_mail_store.h"
#include "postal/mail/system_headers.h"
#include "postal/routing/host.h"
#include "postal/runtime/client.h"

namespace postal::mail {
namespace {

namespace fs = std::filesystem;

constexpr int kAsyncWindow = 256;
constexpr int kAsyncRound = 1024;
constexpr char kJsSubject[] = "bench.publish";

struct World {
  std::string dir;
  std::unique_ptr<bench::NatsServer> nats;
  std::unique_ptr<routing::Host> host;   // procs "os" and "disk", each a MailboxHost on a store
  std::unique_ptr<PostOffice> local[2];  // in process: index = disk
  std::unique_ptr<PostOffice> on_nats;   // in process, the store on nats-server
  std::string error;
};
World* g_world = nullptr;

std::string body_of(int64_t bytes) { return std::string(static_cast<size_t>(bytes), 'x'); }

Letter urgent(const std::string& body) {
  Letter l = Letter::text(body);
  l.headers.set(kPriority, std::string("urgent"));
  return l;
}

// ---- JetStream ---------------------------------------------------------------------------------

struct JsConn {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  std::string error;
  explicit JsConn(int max_pending = 0) {
    jsOptions o;
    jsOptions_Init(&o);
    if (max_pending > 0) o.PublishAsync.MaxPending = max_pending;
    natsStatus s = natsConnection_ConnectTo(&nc, g_world->nats->url().c_str());
    if (s == NATS_OK) s = natsConnection_JetStream(&js, nc, &o);
    if (s != NATS_OK) error = absl::StrCat("jetstream: ", natsStatus_GetText(s));
  }
  ~JsConn() {
    if (js != nullptr) jsCtx_Destroy(js);
    if (nc != nullptr) natsConnection_Destroy(nc);
  }
};

absl::Status add_js_stream() {
  JsConn c;
  if (!c.error.empty()) return absl::UnavailableError(c.error);
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = "BENCH";
  const char* subjects[] = {"bench.>"};
  cfg.Subjects = subjects;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_AddStream(&si, c.js, &cfg, nullptr, &jerr);
  if (si != nullptr) jsStreamInfo_Destroy(si);
  if (s != NATS_OK) {
    return absl::UnavailableError(
        absl::StrCat("js_AddStream: ", natsStatus_GetText(s), " (", static_cast<int>(jerr), ")"));
  }
  return absl::OkStatus();
}

void BM_JetStreamPublish(benchmark::State& state) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  JsConn c;
  if (!c.error.empty()) return state.SkipWithError(c.error.c_str());
  const std::string body = body_of(state.range(0));
  for (auto _ : state) {
    jsPubAck* ack = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    if (js_Publish(&ack, c.js, kJsSubject, body.data(), static_cast<int>(body.size()), nullptr,
                   &jerr) != NATS_OK) {
      state.SkipWithError("js_Publish failed");
      break;
    }
    jsPubAck_Destroy(ack);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_JetStreamPublish)
    ->ArgsProduct({{64, 1024}})
    ->ArgNames({"bytes"})
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime();

void BM_JetStreamPublishAsync(benchmark::State& state) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  JsConn c(kAsyncWindow);
  if (!c.error.empty()) return state.SkipWithError(c.error.c_str());
  const std::string body = body_of(state.range(0));
  for (auto _ : state) {
    for (int i = 0; i < kAsyncRound; ++i) {
      if (js_PublishAsync(c.js, kJsSubject, body.data(), static_cast<int>(body.size()), nullptr) !=
          NATS_OK) {
        state.SkipWithError("js_PublishAsync failed");
        return;
      }
    }
    if (js_PublishAsyncComplete(c.js, nullptr) != NATS_OK) {
      state.SkipWithError("js_PublishAsyncComplete failed");
      return;
    }
  }
  state.SetItemsProcessed(state.iterations() * kAsyncRound);
}
BENCHMARK(BM_JetStreamPublishAsync)->ArgsProduct({{64, 1024}})->ArgNames({"bytes"})->UseRealTime();

// ---- postal ------------------------------------------------------------------------------------

std::string box(bool disk, bool remote) {
  return absl::StrCat(remote ? "post:" : "mem:", "bench@mail.bench/", disk ? "disk" : "os");
}

// A publisher across processes: its own Client on the host's proc, its own office.
struct IpcPublisher {
  std::unique_ptr<runtime::Client> client;
  PostOffice office;
  std::string error;
  IpcPublisher(bool disk, int thread) {
    const char* proc = disk ? "disk" : "os";
    // Google Benchmark runs a function several times, and a closed client's name stays taken
    // for its tombstone's grace (R-ACT-7): every publisher gets a name of its own.
    static std::atomic<uint64_t> next{0};
    auto c = runtime::Client::attach(g_world->host->proc(),
                                     absl::StrCat("pub-", proc, "-", thread, "-", next++));
    auto host = g_world->host->actor_addr(proc, kMailboxHostName);
    if (!c.ok() || !host.has_value()) {
      error = c.ok() ? "the host has no mailbox host actor"
                     : absl::StrCat("cannot attach a client: ", c.status().message());
      return;
    }
    client = *std::move(c);
    auto p = PostProvider::create(PostOptions{
        .context = std::shared_ptr<runtime::SendContext>(std::shared_ptr<void>(), client.get()),
        .host = *host});
    if (!p.ok() || !office.register_provider(*std::move(p)).ok() || !office.start().ok()) {
      error = "cannot start the post provider";
    }
  }
  ~IpcPublisher() { office.stop(); }
};

void publish_loop(benchmark::State& state, PostOffice& office, const std::string& to) {
  const std::string body = body_of(state.range(1));
  for (auto _ : state) {
    absl::StatusOr<PostReceipt> r = office.post(to, urgent(body));
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_PostalPublishIpc(benchmark::State& state) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  const bool disk = state.range(0) == 1;
  IpcPublisher pub(disk, state.thread_index());
  if (!pub.error.empty()) return state.SkipWithError(pub.error.c_str());
  publish_loop(state, pub.office, box(disk, true));
}
BENCHMARK(BM_PostalPublishIpc)
    ->ArgsProduct({{0, 1}, {64, 1024}})
    ->ArgNames({"disk", "bytes"})
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime();

// The same round trip without a store write (a status request): what the request path costs.
void BM_PostalStatusIpc(benchmark::State& state) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  IpcPublisher pub(false, state.thread_index());
  if (!pub.error.empty()) return state.SkipWithError(pub.error.c_str());
  const std::string to = box(false, true);
  for (auto _ : state) {
    if (absl::StatusOr<MailboxStatus> s = pub.office.status(to); !s.ok()) {
      state.SkipWithError(std::string(s.status().message()).c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PostalStatusIpc)->Threads(1)->Threads(8)->UseRealTime();

// At most kAsyncWindow posts in flight, kAsyncRound a round, all answered before the round ends
// (the same shape as BM_JetStreamPublishAsync).
void publish_window_loop(benchmark::State& state, PostOffice& office, const std::string& to) {
  const std::string body = body_of(state.range(1));
  absl::Mutex mu;
  int in_flight = 0;
  int failed = 0;
  auto below = [&](int n) {
    return [&, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return in_flight <= n; };
  };
  for (auto _ : state) {
    for (int i = 0; i < kAsyncRound; ++i) {
      {
        absl::MutexLock lock(&mu);
        auto room = below(kAsyncWindow - 1);
        mu.Await(absl::Condition(&room));
        ++in_flight;
      }
      office.post_async(to, urgent(body), [&](absl::StatusOr<PostReceipt> r) {
        absl::MutexLock lock(&mu);
        --in_flight;
        if (!r.ok()) ++failed;
      });
    }
    absl::MutexLock lock(&mu);
    auto drained = below(0);
    mu.Await(absl::Condition(&drained));
    if (failed > 0) {
      state.SkipWithError("a windowed post failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * kAsyncRound);
}

void BM_PostalPublishAsyncIpc(benchmark::State& state) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  const bool disk = state.range(0) == 1;
  IpcPublisher pub(disk, state.thread_index());
  if (!pub.error.empty()) return state.SkipWithError(pub.error.c_str());
  publish_window_loop(state, pub.office, box(disk, true));
}
BENCHMARK(BM_PostalPublishAsyncIpc)
    ->ArgsProduct({{0, 1}, {64, 1024}})
    ->ArgNames({"disk", "bytes"})
    ->UseRealTime();

void BM_PostalPublishAsyncInProcess(benchmark::State& state) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  publish_window_loop(state, *g_world->local[state.range(0) == 1 ? 1 : 0],
                      box(state.range(0) == 1, false));
}
BENCHMARK(BM_PostalPublishAsyncInProcess)
    ->ArgsProduct({{0, 1}, {64, 1024}})
    ->ArgNames({"disk", "bytes"})
    ->UseRealTime();

void BM_PostalPublishInProcess(benchmark::State& state) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  const bool disk = state.range(0) == 1;
  publish_loop(state, *g_world->local[disk ? 1 : 0], box(disk, false));
}
BENCHMARK(BM_PostalPublishInProcess)
    ->ArgsProduct({{0, 1}, {64, 1024}})
    ->ArgNames({"disk", "bytes"})
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime();

constexpr char kNatsBox[] = "mem:bench@mail.bench/nats";

void BM_PostalPublishOnNats(benchmark::State& state) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  const std::string body = body_of(state.range(0));
  for (auto _ : state) {
    absl::StatusOr<PostReceipt> r = g_world->on_nats->post(kNatsBox, urgent(body));
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PostalPublishOnNats)
    ->ArgsProduct({{64, 1024}})
    ->ArgNames({"bytes"})
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime();

void BM_PostalPublishAsyncOnNats(benchmark::State& state) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  publish_window_loop(state, *g_world->on_nats, kNatsBox);
}
BENCHMARK(BM_PostalPublishAsyncOnNats)
    ->ArgsProduct({{0}, {64, 1024}})
    ->ArgNames({"_", "bytes"})
    ->UseRealTime();

// ---- the world: nats-server -js, two `postal proc`s with stores, two in-process offices --------

absl::Status start_host(World& w) {
  routing::TopologySpec spec;
  spec.name = absl::StrCat("mail-publish-bench-", ::getpid());
  spec.on_proc_exit = routing::OnProcExit::kIgnore;
  const char* spin = std::getenv("POSTAL_BENCH_SERVER_SPIN_US");
  for (const char* tier : {"os", "disk"}) {
    auto listen = runtime::ChannelAddr::parse(absl::StrCat("ipc://", w.dir, "/", tier, ".sock"));
    if (!listen.ok()) return listen.status();
    spec.procs.push_back({tier, *listen, std::nullopt, 1, std::nullopt, {}, std::nullopt});
    spec.actors.push_back(
        {tier,
         std::string(kMailboxHostName),
         std::string(kMailboxHostType),
         {{"store", absl::StrCat(w.dir, "/", tier, ".db")}, {"durability", std::string(tier)}}});
    if (spin != nullptr) spec.actors.back().params.emplace("server_spin_us", std::string(spin));
  }
  routing::HostOptions o;
  o.postal_binary = POSTAL_BINARY;
  o.proc_workers = 1;
  absl::StatusOr<std::unique_ptr<routing::Host>> host = routing::Host::up(spec, o);
  if (!host.ok()) return host.status();
  w.host = *std::move(host);
  for (bool disk : {false, true}) {
    IpcPublisher creator(disk, 99);
    if (!creator.error.empty()) return absl::UnavailableError(creator.error);
    if (auto c = creator.office.create_mailbox(box(disk, true)); !c.ok()) return c.status();
  }
  return absl::OkStatus();
}

// An office in this process whose `mem` provider serves retained mailboxes from `store`, with
// mailbox `address` created.
absl::StatusOr<std::unique_ptr<PostOffice>> office_on(
    absl::StatusOr<std::unique_ptr<MailStore>> store, const std::string& address) {
  if (!store.ok()) return store.status();
  auto retained = RetainedMailboxes::create({.store = *std::move(store)});
  if (!retained.ok()) return retained.status();
  auto office = std::make_unique<PostOffice>();
  auto provider =
      MemProvider::create({.bus = MemBus::isolated(), .retained = *std::move(retained)});
  if (!provider.ok()) return provider.status();
  if (absl::Status s = office->register_provider(*std::move(provider)); !s.ok()) return s;
  if (absl::Status s = office->start(); !s.ok()) return s;
  if (auto c = office->create_mailbox(address); !c.ok()) return c.status();
  return office;
}

absl::Status start_local(World& w, bool disk) {
  auto office = office_on(
      SqliteMailStore::open(absl::StrCat(w.dir, "/local-", disk ? "disk" : "os", ".db"),
                            {.durability = disk ? Durability::kDisk : Durability::kOs}),
      box(disk, false));
  if (!office.ok()) return office.status();
  w.local[disk ? 1 : 0] = *std::move(office);
  return absl::OkStatus();
}

absl::Status start_on_nats(World& w) {
  auto office =
      office_on(NatsMailStore::open({.url = w.nats->url(), .prefix = "POSTAL_BENCH"}), kNatsBox);
  if (!office.ok()) return office.status();
  w.on_nats = *std::move(office);
  return absl::OkStatus();
}

absl::Status start_world(World& w) {
  w.dir = absl::StrCat("/tmp/postal-mail-publish-bench-", ::getpid());
  fs::remove_all(w.dir);
  fs::create_directories(w.dir);
  absl::StatusOr<std::unique_ptr<bench::NatsServer>> nats =
      bench::NatsServer::start({.jetstream = true});
  if (!nats.ok()) return nats.status();
  w.nats = *std::move(nats);
  if (absl::Status s = add_js_stream(); !s.ok()) return s;
  if (absl::Status s = start_host(w); !s.ok()) return s;
  for (bool disk : {false, true}) {
    if (absl::Status s = start_local(w, disk); !s.ok()) return s;
  }
  return start_on_nats(w);
}

}  // namespace
}  // namespace postal::mail

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  postal::mail::World world;
  postal::mail::g_world = &world;
  if (absl::Status s = postal::mail::start_world(world); !s.ok()) {
    world.error = std::string(s.message());
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (auto& office : world.local) {
    if (office) office->stop();
  }
  if (world.on_nats) world.on_nats->stop();
  world.local[0].reset();
  world.local[1].reset();
  world.on_nats.reset();
  world.host.reset();
  world.nats.reset();
  std::filesystem::remove_all(world.dir);
  return world.error.empty() ? 0 : 1;
}
