// mail_bench: mail throughput, messages per second.
//   BM_MemPostFetch       mem provider, post then auto fetch, one message at a time
//   BM_MemPostSubscribe   mem provider, post to one subscriber (push), all settled at the end
//   BM_PostPostFetch      post provider: a MailboxHost on one Node, the caller on another, over
//                         ipc abstract sockets in this process (two requests per message)
//   BM_PostPostSubscribe  post provider, pushes across the two Nodes, all settled at the end
// No peer: these measure the provider's own overhead (the mem floor vs the post wire cost).
#include <unistd.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "benchmark/benchmark.h"
#include "postal/actors/actor_handle.h"
#include "postal/mail/mailbox_host.h"
#include "postal/mail/mem_provider.h"
#include "postal/mail/post_office.h"
#include "postal/mail/post_provider.h"
#include "postal/routing/node.h"
#include "postal/runtime/client.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

constexpr std::string_view kMemInbox = "mem:bench@mail.bench/inbox";
constexpr std::string_view kPostInbox = "post:bench@mail.bench/inbox";

std::unique_ptr<routing::Node> start_node(std::string_view role) {
  routing::NodeOptions o;
  o.id = runtime::ProcId{runtime::Uid::random(*runtime::Label::parse(role))};
  o.listen = *runtime::ChannelAddr::ipc_abstract(
      absl::StrCat("postal-mail-bench-", ::getpid(), "-", sv(role)));
  o.scheduler.workers = 1;
  o.system_actors = false;
  return *routing::Node::start(std::move(o));
}

struct PostRig {
  std::unique_ptr<routing::Node> host_node = start_node("mailhost");
  std::unique_ptr<routing::Node> client_node = start_node("mailclient");
  std::unique_ptr<runtime::Client> client;
  PostOffice office;
  PostRig() {
    auto host = *actors::spawn<MailboxHost>(host_node->proc(), kMailboxHostName, MemOptions{});
    client = *runtime::Client::attach(client_node->proc(), "bench");
    auto p = *PostProvider::create(PostOptions{
        .context = std::shared_ptr<runtime::SendContext>(std::shared_ptr<void>(), client.get()),
        .host = host.addr()});
    (void)office.register_provider(std::move(p));
    (void)office.start();
  }
  ~PostRig() { office.stop(); }
};

std::unique_ptr<PostOffice> mem_office() {
  auto office = std::make_unique<PostOffice>();
  (void)office->register_provider(*MemProvider::create({.bus = MemBus::isolated()}));
  (void)office->start();
  return office;
}

void post_fetch(benchmark::State& state, PostOffice& office, std::string_view inbox) {
  for (auto _ : state) {
    if (!office.post(inbox, Letter::text("payload")).ok()) state.SkipWithError("post failed");
    absl::StatusOr<std::optional<Delivery>> d = office.fetch(inbox);
    if (!d.ok() || !d->has_value()) state.SkipWithError("fetch failed");
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(state.iterations());
}

void post_subscribe(benchmark::State& state, PostOffice& office, std::string_view inbox) {
  std::atomic<int64_t> seen{0};
  absl::StatusOr<Subscription> sub = office.subscribe(inbox, [&](const Letter&) {
    seen.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  });
  if (!sub.ok()) {
    state.SkipWithError("subscribe failed");
    return;
  }
  int64_t posted = 0;
  for (auto _ : state) {
    if (!office.post(inbox, Letter::text("payload")).ok()) state.SkipWithError("post failed");
    ++posted;
  }
  (void)office.wait_idle(absl::Minutes(1));  // every push settled: the time counts them all
  if (seen.load() != posted) state.SkipWithError("not every message was delivered");
  state.SetItemsProcessed(posted);
}

void BM_MemPostFetch(benchmark::State& state) {
  auto office = mem_office();
  post_fetch(state, *office, kMemInbox);
}
BENCHMARK(BM_MemPostFetch)->UseRealTime();

void BM_MemPostSubscribe(benchmark::State& state) {
  auto office = mem_office();
  post_subscribe(state, *office, kMemInbox);
}
BENCHMARK(BM_MemPostSubscribe)->UseRealTime();

void BM_PostPostFetch(benchmark::State& state) {
  PostRig rig;
  post_fetch(state, rig.office, kPostInbox);
}
BENCHMARK(BM_PostPostFetch)->UseRealTime();

void BM_PostPostSubscribe(benchmark::State& state) {
  PostRig rig;
  post_subscribe(state, rig.office, kPostInbox);
}
BENCHMARK(BM_PostPostSubscribe)->UseRealTime();

}  // namespace
}  // namespace postal::mail

BENCHMARK_MAIN();
