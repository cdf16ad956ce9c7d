// mail_consume_bench: consuming stored mail with batch fetch and batched acks (issue 13), beside
// nats-server JetStream's pull consumer measured in the same run.
//
// One iteration is a round of 1 024 messages. The `Consume` benchmarks fill the mailbox (or the
// stream) untimed, then time taking the round out: batches of 256, every message acked.
//
//   BM_JetStreamPullAck/bytes          a durable pull consumer on a file-store stream:
//                                      natsSubscription_Fetch(256), natsMsg_Ack each, a flush a
//                                      round (across processes, tcp loopback)
//   BM_PostalConsumeInProcess/bytes    the `mem` provider's queue: fetch_batch(256, manual) and
//                                      ack_all, in this process
//   BM_PostalConsumeIpc/bytes          the same through the `post` provider: this process → a
//                                      `postal proc` serving postal.MailboxHost, over ipc
//   BM_JetStreamPublishPullAck/bytes   post→fetch, all timed: js_PublishAsync (256 pending) the
//   BM_PostalPostFetchIpc/bytes        round, then pull it; postal: post_async (256 in flight),
//                                      then fetch_batch(256) auto — across processes both
//   BM_PostalPostSubscribeIpc/bytes    post→subscribe across processes: post_async (256 in
//                                      flight) to a queue mailbox with one subscriber in this
//                                      process, timed until its callback has seen the round
//   BM_NatsProviderConsume/bytes       the `nats` provider (nats_provider.h) on the same server:
//                                      fetch_batch(256, manual) and ack_all — beside
//                                      BM_JetStreamPullAck, whose acks are not confirmed (ours are)
//   BM_NatsProviderPostFetch/bytes     post_async (256 in flight), then fetch_batch(256) auto —
//                                      beside BM_JetStreamPublishPullAck
//
// Needs nats-server (Debian `nats-server`) and the `postal` binary (POSTAL_BINARY, built with it).
// docs/benchmarks.md, "Consuming mail", has the command and the results.
#include <unistd.h>

#include <atomic>
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
#include "postal/mail/nats_provider.h"
#include "postal/mail/post_office.h"
#include "postal/mail/post_provider.h"
#include "postal/routing/host.h"
#include "postal/runtime/client.h"

namespace postal::mail {
namespace {

namespace fs = std::filesystem;

constexpr int kRound = 1024;
constexpr int kBatch = 256;
constexpr int kWindow = 256;
constexpr char kJsSubject[] = "consume.q";

struct World {
  std::string dir;
  std::unique_ptr<bench::NatsServer> nats;
  std::unique_ptr<routing::Host> host;  // proc "mail": a MailboxHost (queue mailboxes in memory)
  std::unique_ptr<runtime::Client> client;
  std::unique_ptr<PostOffice> remote;  // the post provider to that host
  std::unique_ptr<PostOffice> local;   // the mem provider, in this process
  std::unique_ptr<PostOffice> on_nats;  // the nats provider, on the same nats-server
  std::string error;
};
World* g_world = nullptr;

std::string body_of(int64_t bytes) { return std::string(static_cast<size_t>(bytes), 'x'); }

// ---- JetStream ---------------------------------------------------------------------------------

struct JsConsumer {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  natsSubscription* sub = nullptr;
  std::string error;
  explicit JsConsumer(const char* durable) {
    jsOptions o;
    jsOptions_Init(&o);
    o.PublishAsync.MaxPending = kWindow;
    natsStatus s = natsConnection_ConnectTo(&nc, g_world->nats->url().c_str());
    if (s == NATS_OK) s = natsConnection_JetStream(&js, nc, &o);
    jsErrCode jerr = static_cast<jsErrCode>(0);
    if (s == NATS_OK) s = js_PullSubscribe(&sub, js, kJsSubject, durable, nullptr, nullptr, &jerr);
    if (s != NATS_OK) error = absl::StrCat("jetstream: ", natsStatus_GetText(s));
  }
  ~JsConsumer() {
    if (sub != nullptr) natsSubscription_Destroy(sub);
    if (js != nullptr) jsCtx_Destroy(js);
    if (nc != nullptr) natsConnection_Destroy(nc);
  }
  bool publish_round(const std::string& body) {
    for (int i = 0; i < kRound; ++i) {
      if (js_PublishAsync(js, kJsSubject, body.data(), static_cast<int>(body.size()), nullptr) !=
          NATS_OK) {
        return false;
      }
    }
    return js_PublishAsyncComplete(js, nullptr) == NATS_OK;
  }
  bool pull_round() {
    int taken = 0;
    while (taken < kRound) {
      natsMsgList list{};
      jsErrCode jerr = static_cast<jsErrCode>(0);
      if (natsSubscription_Fetch(&list, sub, kBatch, 5000, &jerr) != NATS_OK) return false;
      for (int i = 0; i < list.Count; ++i) {
        if (natsMsg_Ack(list.Msgs[i], nullptr) != NATS_OK) return false;
      }
      taken += list.Count;
      natsMsgList_Destroy(&list);
    }
    return natsConnection_Flush(nc) == NATS_OK;  // every ack is on its way
  }
};

absl::Status add_js_stream() {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  natsStatus s = natsConnection_ConnectTo(&nc, g_world->nats->url().c_str());
  if (s == NATS_OK) s = natsConnection_JetStream(&js, nc, nullptr);
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = "CONSUME";
  const char* subjects[] = {"consume.>"};
  cfg.Subjects = subjects;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  if (s == NATS_OK) s = js_AddStream(&si, js, &cfg, nullptr, &jerr);
  if (si != nullptr) jsStreamInfo_Destroy(si);
  if (js != nullptr) jsCtx_Destroy(js);
  if (nc != nullptr) natsConnection_Destroy(nc);
  if (s != NATS_OK) {
    return absl::UnavailableError(absl::StrCat("js_AddStream: ", natsStatus_GetText(s)));
  }
  return absl::OkStatus();
}

void BM_JetStreamPullAck(benchmark::State& state) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  JsConsumer c("PULLACK");
  if (!c.error.empty()) return state.SkipWithError(c.error.c_str());
  const std::string body = body_of(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    const bool filled = c.publish_round(body);
    state.ResumeTiming();
    if (!filled || !c.pull_round()) return state.SkipWithError("publish or pull failed");
  }
  state.SetItemsProcessed(state.iterations() * kRound);
}
BENCHMARK(BM_JetStreamPullAck)->ArgsProduct({{64, 1024}})->ArgNames({"bytes"})->UseRealTime();

void BM_JetStreamPublishPullAck(benchmark::State& state) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  JsConsumer c("PUBPULL");
  if (!c.error.empty()) return state.SkipWithError(c.error.c_str());
  const std::string body = body_of(state.range(0));
  for (auto _ : state) {
    if (!c.publish_round(body) || !c.pull_round()) {
      return state.SkipWithError("publish or pull failed");
    }
  }
  state.SetItemsProcessed(state.iterations() * kRound);
}
BENCHMARK(BM_JetStreamPublishPullAck)
    ->ArgsProduct({{64, 1024}})
    ->ArgNames({"bytes"})
    ->UseRealTime();

// ---- postal ------------------------------------------------------------------------------------

// Posts a round with at most kWindow in flight; false when one failed.
bool post_round(PostOffice& office, const std::string& to, const std::string& body) {
  absl::Mutex mu;
  int in_flight = 0;
  int done = 0;
  bool ok = true;
  for (int i = 0; i < kRound; ++i) {
    {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(
          +[](int* n) { return *n < kWindow; }, &in_flight));
      ++in_flight;
    }
    office.post_async(to, Letter::text(body), [&](absl::StatusOr<PostReceipt> r) {
      absl::MutexLock lock(&mu);
      --in_flight;
      ++done;
      if (!r.ok()) ok = false;
    });
  }
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(+[](int* n) { return *n == kRound; }, &done));
  return ok;
}

// Takes a round out in batches; manual batches are settled with ack_all.
bool fetch_round(PostOffice& office, const std::string& from, AckMode ack) {
  int taken = 0;
  while (taken < kRound) {
    absl::StatusOr<std::vector<Delivery>> batch = office.fetch_batch(
        from, {.ack = ack, .max_messages = kBatch, .max_wait = absl::Seconds(5)});
    if (!batch.ok() || batch->empty()) return false;
    if (ack == AckMode::kManual) {
      for (bool took : ack_all(*batch)) {
        if (!took) return false;
      }
    }
    taken += static_cast<int>(batch->size());
  }
  return true;
}

void consume(benchmark::State& state, PostOffice* office, const std::string& box) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  const std::string body = body_of(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    const bool filled = post_round(*office, box, body);
    state.ResumeTiming();
    if (!filled || !fetch_round(*office, box, AckMode::kManual)) {
      return state.SkipWithError("post or fetch failed");
    }
  }
  state.SetItemsProcessed(state.iterations() * kRound);
}

void BM_PostalConsumeInProcess(benchmark::State& state) {
  consume(state, g_world->local.get(), "mem:bench@consume.bench/q");
}
BENCHMARK(BM_PostalConsumeInProcess)->ArgsProduct({{64, 1024}})->ArgNames({"bytes"})->UseRealTime();

void BM_PostalConsumeIpc(benchmark::State& state) {
  consume(state, g_world->remote.get(), "post:bench@consume.bench/q");
}
BENCHMARK(BM_PostalConsumeIpc)->ArgsProduct({{64, 1024}})->ArgNames({"bytes"})->UseRealTime();

void BM_PostalPostFetchIpc(benchmark::State& state) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  const std::string body = body_of(state.range(0));
  const std::string box = "post:bench@consume.bench/pf";
  for (auto _ : state) {
    if (!post_round(*g_world->remote, box, body) ||
        !fetch_round(*g_world->remote, box, AckMode::kAuto)) {
      return state.SkipWithError("post or fetch failed");
    }
  }
  state.SetItemsProcessed(state.iterations() * kRound);
}
BENCHMARK(BM_PostalPostFetchIpc)->ArgsProduct({{64, 1024}})->ArgNames({"bytes"})->UseRealTime();

void BM_PostalPostSubscribeIpc(benchmark::State& state) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  const std::string body = body_of(state.range(0));
  const std::string box = absl::StrCat("post:bench@consume.bench/sub-", state.range(0));
  absl::Mutex mu;
  int64_t seen = 0;
  absl::StatusOr<Subscription> sub = g_world->remote->subscribe(box, [&](const Letter&) {
    absl::MutexLock lock(&mu);
    ++seen;
    return absl::OkStatus();
  });
  if (!sub.ok()) return state.SkipWithError("subscribe failed");
  int64_t posted = 0;
  for (auto _ : state) {
    if (!post_round(*g_world->remote, box, body)) return state.SkipWithError("post failed");
    posted += kRound;
    absl::MutexLock lock(&mu);
    auto all_seen = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return seen >= posted; };
    if (!mu.AwaitWithTimeout(absl::Condition(&all_seen), absl::Seconds(30))) {
      return state.SkipWithError("the subscriber did not see every message");
    }
  }
  state.SetItemsProcessed(posted);
}
BENCHMARK(BM_PostalPostSubscribeIpc)->ArgsProduct({{64, 1024}})->ArgNames({"bytes"})->UseRealTime();

void BM_NatsProviderConsume(benchmark::State& state) {
  consume(state, g_world->on_nats.get(), "nats:bench@consume.bench/q");
}
BENCHMARK(BM_NatsProviderConsume)->ArgsProduct({{64, 1024}})->ArgNames({"bytes"})->UseRealTime();

void BM_NatsProviderPostFetch(benchmark::State& state) {
  if (!g_world->error.empty()) return state.SkipWithError(g_world->error.c_str());
  const std::string body = body_of(state.range(0));
  const std::string box = "nats:bench@consume.bench/pf";
  for (auto _ : state) {
    if (!post_round(*g_world->on_nats, box, body) ||
        !fetch_round(*g_world->on_nats, box, AckMode::kAuto)) {
      return state.SkipWithError("post or fetch failed");
    }
  }
  state.SetItemsProcessed(state.iterations() * kRound);
}
BENCHMARK(BM_NatsProviderPostFetch)->ArgsProduct({{64, 1024}})->ArgNames({"bytes"})->UseRealTime();

// ---- the world: nats-server -js, a `postal proc` with a MailboxHost, an in-process office -----

absl::Status start_world(World& w) {
  w.dir = absl::StrCat("/tmp/postal-mail-consume-bench-", ::getpid());
  fs::remove_all(w.dir);
  fs::create_directories(w.dir);
  absl::StatusOr<std::unique_ptr<bench::NatsServer>> nats =
      bench::NatsServer::start({.jetstream = true});
  if (!nats.ok()) return nats.status();
  w.nats = *std::move(nats);
  if (absl::Status s = add_js_stream(); !s.ok()) return s;

  routing::TopologySpec spec;
  spec.name = absl::StrCat("mail-consume-bench-", ::getpid());
  spec.on_proc_exit = routing::OnProcExit::kIgnore;
  auto listen = runtime::ChannelAddr::parse(absl::StrCat("ipc://", w.dir, "/mail.sock"));
  if (!listen.ok()) return listen.status();
  spec.procs.push_back({"mail", *listen, std::nullopt, 1, std::nullopt, {}, std::nullopt});
  spec.actors.push_back({"mail", std::string(kMailboxHostName), std::string(kMailboxHostType), {}});
  routing::HostOptions o;
  o.postal_binary = POSTAL_BINARY;
  o.proc_workers = 1;
  absl::StatusOr<std::unique_ptr<routing::Host>> host = routing::Host::up(spec, o);
  if (!host.ok()) return host.status();
  w.host = *std::move(host);
  auto c = runtime::Client::attach(w.host->proc(), "consumer");
  auto host_addr = w.host->actor_addr("mail", kMailboxHostName);
  if (!c.ok()) return c.status();
  if (!host_addr.has_value()) return absl::UnavailableError("the proc runs no mailbox host");
  w.client = *std::move(c);
  auto p = PostProvider::create(PostOptions{
      .context = std::shared_ptr<runtime::SendContext>(std::shared_ptr<void>(), w.client.get()),
      .host = *host_addr});
  if (!p.ok()) return p.status();
  w.remote = std::make_unique<PostOffice>();
  if (absl::Status s = w.remote->register_provider(*std::move(p)); !s.ok()) return s;
  if (absl::Status s = w.remote->start(); !s.ok()) return s;

  auto on_nats = NatsProvider::create({.url = w.nats->url(), .prefix = "PROVIDER"});
  if (!on_nats.ok()) return on_nats.status();
  w.on_nats = std::make_unique<PostOffice>();
  if (absl::Status s = w.on_nats->register_provider(*std::move(on_nats)); !s.ok()) return s;
  if (absl::Status s = w.on_nats->start(); !s.ok()) return s;

  auto mem = MemProvider::create({.bus = MemBus::isolated()});
  if (!mem.ok()) return mem.status();
  w.local = std::make_unique<PostOffice>();
  if (absl::Status s = w.local->register_provider(*std::move(mem)); !s.ok()) return s;
  return w.local->start();
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
  if (world.remote) world.remote->stop();
  if (world.local) world.local->stop();
  if (world.on_nats) world.on_nats->stop();
  world.on_nats.reset();
  world.remote.reset();
  world.local.reset();
  world.client.reset();
  world.host.reset();
  world.nats.reset();
  std::filesystem::remove_all(world.dir);
  return world.error.empty() ? 0 : 1;
}
