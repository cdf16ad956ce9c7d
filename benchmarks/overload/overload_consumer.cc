// The consumer proc of the overload demonstration: a Node on ipc with three actors — the
// bounded "consumer" (1 ms per Work, sleeping its fiber), "echo" (the second actor behind the
// same connection, answering Pings at once) and "stats" (the proc's own accounting) — started
// as a child of overload_bench (`--role consumer`). It prints one ready line with the three
// addresses and runs until its stdin closes.
#include "overload_consumer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "boost/fiber/operations.hpp"
#include "postal/postal.h"
#include "postal/routing/node.h"

namespace postal::overload {

uint64_t rss_kib(long pid) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status")
                            : "/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  }
  return 0;
}

namespace {

struct Shared {
  std::atomic<uint64_t> handled{0};
  std::atomic<uint64_t> max_queued_bytes{0};
};

class Consumer : public actors::Actor, public actors::Handles<Work> {
 public:
  explicit Consumer(Shared* shared) : shared_(shared) {}
  absl::Status handle(actors::Context& cx, Work) override {
    // The internal accounting, seen from inside at every message (R-FLOW-1).
    const uint64_t bytes = cx.mailbox()->sink_info().queued_bytes;
    uint64_t seen = shared_->max_queued_bytes.load(std::memory_order_relaxed);
    while (bytes > seen && !shared_->max_queued_bytes.compare_exchange_weak(seen, bytes)) {
    }
    {  // the slow part; its worker runs other actors meanwhile
      runtime::Scheduler::BlockingScope blocking(cx.proc().scheduler());
      boost::this_fiber::sleep_for(std::chrono::milliseconds(1));
    }
    shared_->handled.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }

 private:
  Shared* shared_;
};

class Echo : public actors::Actor, public actors::Handles<Ping> {
 public:
  absl::Status handle(actors::Context& cx, Ping p) override {
    p.reply_to.send(cx, p.n);
    return absl::OkStatus();
  }
};

class Stats : public actors::Actor, public actors::Handles<StatsQuery> {
 public:
  Stats(Shared* shared, runtime::ActorId consumer) : shared_(shared), consumer_(consumer) {}
  absl::Status handle(actors::Context& cx, StatsQuery q) override {
    ConsumerStats s;
    s.handled = shared_->handled.load();
    s.max_queued_bytes = shared_->max_queued_bytes.load();
    if (std::shared_ptr<runtime::Mailbox> m = cx.proc().lookup(consumer_)) {
      const runtime::SinkInfo info = m->sink_info();
      s.queued = info.queued;
      s.queued_bytes = info.queued_bytes;
      s.bound_bytes = info.max_bytes;
      s.bound_messages = info.max_messages;
    }
    s.rss_kib = rss_kib();
    s.dropped = cx.proc().stats().dropped;
    q.reply_to.send(cx, s);
    return absl::OkStatus();
  }

 private:
  Shared* shared_;
  runtime::ActorId consumer_;
};

}  // namespace

int run_consumer(const ConsumerArgs& args) {
  absl::StatusOr<runtime::ChannelAddr> listen = runtime::ChannelAddr::parse(args.listen);
  if (!listen.ok()) {
    std::fprintf(stderr, "overload consumer: %s\n", listen.status().ToString().c_str());
    return 2;
  }
  routing::NodeOptions o;
  o.id = runtime::ProcId{runtime::Uid::singleton(*runtime::Label::parse("overload-consumer"))};
  o.listen = *listen;
  o.scheduler.workers = 2;
  o.system_actors = false;
  // R-FLOW-2: the returns going back hold at most this many per destination (the producer, the
  // pinger), so a pong waits behind at most that many returns.
  o.channel.max_queue_per_destination = args.per_destination;
  absl::StatusOr<std::unique_ptr<routing::Node>> node = routing::Node::start(std::move(o));
  if (!node.ok()) {
    std::fprintf(stderr, "overload consumer: %s\n", node.status().ToString().c_str());
    return 2;
  }
  runtime::Proc& proc = (*node)->proc();
  Shared shared;
  runtime::MailboxBound bound;  // kBlock: what arrives over the channel fails instead (R-FLOW-2)
  bound.max_messages = args.bound_messages;
  bound.max_bytes = args.bound_bytes;
  auto consumer =
      actors::spawn<Consumer>(proc, actors::SpawnOptions::bounded(bound), "consumer", &shared);
  auto echo = actors::spawn<Echo>(proc, "echo");
  if (!consumer.ok() || !echo.ok()) return 2;
  auto stats = actors::spawn<Stats>(proc, "stats", &shared, consumer->addr().id);
  if (!stats.ok()) return 2;
  std::printf("ready %s %s %s\n", consumer->addr().to_string().c_str(),
              echo->addr().to_string().c_str(), stats->addr().to_string().c_str());
  std::fflush(stdout);
  char buf[64];
  while (::read(STDIN_FILENO, buf, sizeof buf) > 0) {
  }
  return 0;
}

}  // namespace postal::overload
