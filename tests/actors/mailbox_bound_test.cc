// Bounded mailboxes (R-FLOW-1, runtime/mailbox_bound.h): message and byte bounds, the three
// overload policies, the per-proc default, the stash counted, try_send's status, and that a
// deterministic proc fails instead of blocking.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "boost/fiber/operations.hpp"
#include "gtest/gtest.h"
#include "postal/postal.h"
#include "support/proc_client.h"
#include "support/wait_for.h"

namespace {

struct Item {
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};
struct Bulk {  // a payload whose bytes are known: it arrives as bytes
  std::string bytes;
  template <class A>
  void serialize(A& a) {
    a(bytes);
  }
};
struct Query {  // answered with n * 2
  using Reply = Item;
  int n = 0;
  postal::OncePortRef<Item> reply_to;
  template <class A>
  void serialize(A& a) {
    a(n, reply_to);
  }
};
struct Burst {  // an actor sends `count` Items to `to` from its handler
  int count = 0;
  postal::PortRef<Item> to;
  template <class A>
  void serialize(A& a) {
    a(count, to);
  }
};

}  // namespace

POSTAL_MESSAGE(Item, "test.bounds.Item");
POSTAL_MESSAGE(Bulk, "test.bounds.Bulk");
POSTAL_MESSAGE(Burst, "test.bounds.Burst");
POSTAL_MESSAGE(Query, "test.bounds.Query");

namespace postal::actors {
namespace {

using runtime::DeliveryFailure;
using runtime::MailboxBound;
using runtime::OverloadBound;
using runtime::OverloadPolicy;
using runtime::TransportReason;
using test_support::wait_for;

// Records Items; while `gate` is closed its handler waits (sleeping its fiber), so what is sent
// meanwhile stays in the mailbox.
struct Sink : Actor, Handles<Item, Bulk> {
  std::vector<int>* seen;
  std::atomic<bool>* gate;
  std::atomic<int>* started;
  Sink(std::vector<int>* s, std::atomic<bool>* g = nullptr, std::atomic<int>* st = nullptr)
      : seen(s), gate(g), started(st) {}
  absl::Status handle(Context& cx, Item m) override {
    if (started) started->fetch_add(1);
    runtime::Scheduler::BlockingScope blocking(cx.proc().scheduler());  // its worker runs others
    while (gate != nullptr && !gate->load())
      boost::this_fiber::sleep_for(std::chrono::milliseconds(1));
    seen->push_back(m.n);
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Bulk) override {
    seen->push_back(-1);
    return absl::OkStatus();
  }
};

// Stashes every Item.
struct Hoarder : Actor, Handles<Item> {
  absl::Status handle(Context& cx, Item m) override { return cx.stash(std::move(m)); }
};

struct Producer : Actor, Handles<Burst> {
  absl::Status handle(Context& cx, Burst b) override {
    for (int i = 0; i < b.count; ++i) b.to.send(cx, Item{i});
    return absl::OkStatus();
  }
};

struct Answerer : Actor, Handles<Query> {
  absl::Status handle(Context& cx, Query q) override {
    q.reply_to.send(cx, Item{q.n * 2});
    return absl::OkStatus();
  }
};

// Asks `server` on a Burst (count = the question) and records the answer; records Items.
struct Asker : Actor, Handles<Burst, Item> {
  PortRef<Query> server;
  std::vector<int>* log;
  Asker(PortRef<Query> s, std::vector<int>* l) : server(std::move(s)), log(l) {}
  absl::Status handle(Context& cx, Burst b) override {
    cx.request(server, Query{b.count, {}}, absl::Seconds(60))
        .then([this](Context&, absl::StatusOr<Item> a) -> absl::Status {
          log->push_back(a.ok() ? 1000 + a->n : -1000);
          return absl::OkStatus();
        });
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Item m) override {
    log->push_back(m.n);
    return absl::OkStatus();
  }
};

MailboxBound bound(uint64_t messages, OverloadPolicy policy) {
  return MailboxBound::of(messages, policy);
}

struct Fixture : test_support::ProcWithClient {
  explicit Fixture(ProcOptions o = ProcOptions::deterministic())
      : ProcWithClient(std::move(o), "sender") {}
  DeliveryFailure next_failure(absl::Duration d = absl::Seconds(10)) {
    absl::StatusOr<runtime::EnvelopePtr> back = client->next_undeliverable(d);
    EXPECT_TRUE(back.ok()) << back.status();
    if (!back.ok() || (*back)->root_failure() == nullptr) return {};
    return *(*back)->root_failure();
  }
  bool no_returns() {
    return client->next_undeliverable(absl::ZeroDuration()).status().code() ==
           absl::StatusCode::kDeadlineExceeded;
  }
};

TEST(MailboxBound, R_FLOW_1_FailPolicyReturnsOverloadedPastTheMessageBound) {
  Fixture f;
  std::vector<int> seen;
  auto a =
      *spawn<Sink>(f.proc, SpawnOptions::bounded(bound(2, OverloadPolicy::kFail)), "sink", &seen);
  for (int i = 1; i <= 3; ++i) a.ref().send(*f.client, Item{i});
  DeliveryFailure back = f.next_failure();
  EXPECT_EQ(back.transport, TransportReason::kOverloaded) << back.to_string();
  EXPECT_EQ(back.bound, OverloadBound::kMailboxMessages);
  EXPECT_EQ(back.len, 2u);
  EXPECT_EQ(back.max, 2u);
  EXPECT_NE(back.to_string().find("overloaded (mailbox messages: 2 of max 2)"), std::string::npos)
      << back.to_string();
  EXPECT_EQ(f.proc.stats().overloaded, 1u);
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
  a.ref().send(*f.client, Item{4});  // handled ones freed their room
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 4}));
  EXPECT_TRUE(f.no_returns());
}

// Senders judge the room by a lower bound of what the runner released, refreshed only when it says
// the mailbox may be full (cell_bounds.cc, try_reserve): filled and drained round after round, the
// mailbox takes exactly its bound each time, and counts nothing once drained.
TEST(MailboxBound, R_FLOW_1_AMailboxFilledAndDrainedRoundAfterRoundTakesExactlyItsBoundEachTime) {
  Fixture f;
  std::vector<int> seen;
  MailboxBound b = bound(3, OverloadPolicy::kFail);
  auto a = *spawn<Sink>(f.proc, SpawnOptions::bounded(b), "sink", &seen);
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 4; ++i) a.ref().send(*f.client, Item{round * 4 + i});
    DeliveryFailure back = f.next_failure();
    EXPECT_EQ(back.bound, OverloadBound::kMailboxMessages) << "round " << round;
    EXPECT_TRUE(f.no_returns()) << "round " << round;
    f.proc.scheduler().run_until_idle();
    ASSERT_EQ(seen.size(), static_cast<size_t>(3 * (round + 1))) << "round " << round;
    EXPECT_EQ(seen.back(), round * 4 + 2);
    runtime::SinkInfo info = f.proc.lookup(a.ref().addr().id)->sink_info();
    EXPECT_EQ(info.queued, 0u) << "round " << round;
    EXPECT_EQ(info.queued_bytes, 0u) << "round " << round;
  }
  EXPECT_EQ(f.proc.stats().overloaded, 20u);
}

// Two producers on two workers fill a small mailbox whose consumer drains it meanwhile: every
// Item arrives, none is refused (kBlock), and once drained the mailbox counts nothing — the
// senders' counts in and the runner's counts out agree to the message and the byte.
TEST(MailboxBound, R_FLOW_1_ConcurrentSendersAndTheRunnerKeepTheCountsExact) {
  Fixture f(ProcOptions::threads(2));
  std::vector<int> seen;
  MailboxBound b = bound(8, OverloadPolicy::kBlock);
  b.block_timeout = absl::Seconds(60);
  auto sink = *spawn<Sink>(f.proc, SpawnOptions::bounded(b), "sink", &seen);
  auto p1 = *spawn<Producer>(f.proc, "p1");
  auto p2 = *spawn<Producer>(f.proc, "p2");
  constexpr int kCount = 5000;
  PortRef<Item> to(sink.ref().addr().port(runtime::Port::handler(wire::type_hash<Item>())));
  p1.ref().send(*f.client, Burst{kCount, to});
  p2.ref().send(*f.client, Burst{kCount, to});
  ASSERT_TRUE(wait_for(
      [&] {
        runtime::SinkInfo info = f.proc.lookup(sink.ref().addr().id)->sink_info();
        return f.proc.stats().delivered >= 2 * kCount + 2 && info.queued == 0 &&
               info.queued_bytes == 0;
      },
      absl::Seconds(60)));
  sink.stop("done");
  ASSERT_TRUE(sink.wait(absl::Seconds(10)).ok());
  ASSERT_EQ(seen.size(), static_cast<size_t>(2 * kCount));
  std::vector<int> count(kCount, 0);
  for (int n : seen) ++count[n];
  for (int i = 0; i < kCount; ++i) ASSERT_EQ(count[i], 2) << "Item " << i;
  EXPECT_EQ(f.proc.stats().overloaded, 0u);
}

TEST(MailboxBound, R_FLOW_1_TheByteBoundCountsThePayloadAsKnownWithoutSerializing) {
  Fixture f;
  std::vector<int> seen;
  MailboxBound b = bound(100, OverloadPolicy::kFail);
  b.max_bytes = 1000;
  auto a = *spawn<Sink>(f.proc, SpawnOptions::bounded(b), "sink", &seen);
  // Bytes from the network count their size: 600 fits, a second 600 does not.
  auto from_bytes = [&](size_t n) {
    wire::Any typed = wire::Any::make(Bulk{std::string(n, 'x')});
    std::string bytes(*typed.bytes());
    return runtime::MessageEnvelope::make(
        f.client->self_addr(), a.ref().addr().port(runtime::Port::handler(wire::type_hash<Bulk>())),
        wire::Any::from_bytes(wire::type_hash<Bulk>(), std::move(bytes)));
  };
  runtime::EnvelopePtr first = from_bytes(600);
  const uint64_t size = first->data().known_size();
  ASSERT_GT(size, 600u);
  f.proc.send(std::move(first));
  f.proc.send(from_bytes(600));
  DeliveryFailure back = f.next_failure();
  EXPECT_EQ(back.transport, TransportReason::kOverloaded) << back.to_string();
  EXPECT_EQ(back.bound, OverloadBound::kMailboxBytes);
  EXPECT_EQ(back.len, size);
  EXPECT_EQ(back.max, 1000u);
  EXPECT_EQ(f.proc.lookup(a.ref().addr().id)->sink_info().queued_bytes, size);
  // An envelope larger than the bound on its own is refused whatever the mailbox holds.
  f.proc.scheduler().run_until_idle();
  f.proc.send(from_bytes(2000));
  back = f.next_failure();
  EXPECT_EQ(back.bound, OverloadBound::kMailboxBytes);
  EXPECT_GT(back.len, 2000u);
  EXPECT_NE(back.detail.find("larger than"), std::string::npos) << back.to_string();
  EXPECT_EQ(seen, (std::vector<int>{-1}));
  EXPECT_EQ(f.proc.lookup(a.ref().addr().id)->sink_info().queued_bytes, 0u);
}

TEST(MailboxBound, R_FLOW_1_TrySendReportsOverloadedAsAStatusAtOnce) {
  Fixture f;
  std::vector<int> seen;
  auto a =
      *spawn<Sink>(f.proc, SpawnOptions::bounded(bound(1, OverloadPolicy::kBlock)), "sink", &seen);
  EXPECT_TRUE(a.ref().try_send(*f.client, Item{1}).ok());
  absl::Status s = a.ref().try_send(*f.client, Item{2});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("overloaded"), std::string::npos) << s;
  EXPECT_TRUE(f.no_returns());  // a status, not a returned envelope
}

TEST(MailboxBound, R_FLOW_1_DropOldestDropsReturnsAndCountsTheOldest) {
  Fixture f;
  std::vector<int> seen;
  auto a = *spawn<Sink>(f.proc, SpawnOptions::bounded(bound(2, OverloadPolicy::kDropOldest)),
                        "sink", &seen);
  for (int i = 1; i <= 4; ++i) a.ref().send(*f.client, Item{i});
  for (int i = 0; i < 2; ++i) {
    DeliveryFailure back = f.next_failure();
    EXPECT_EQ(back.transport, TransportReason::kOverloaded) << back.to_string();
    EXPECT_EQ(back.bound, OverloadBound::kMailboxMessages);
    EXPECT_EQ(back.detail, "dropped as the oldest");
  }
  EXPECT_EQ(f.proc.stats().dropped_oldest, 2u);
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(seen, (std::vector<int>{3, 4}));  // the newest survive
  EXPECT_TRUE(f.no_returns());
}

TEST(MailboxBound, R_FLOW_1_DropOldestNeverDropsAReplyToTheActorsOwnRequest) {
  Fixture f;
  std::vector<int> log;
  auto server = *spawn<Answerer>(f.proc, "server");
  auto asker = *spawn<Asker>(f.proc, SpawnOptions::bounded(bound(1, OverloadPolicy::kDropOldest)),
                             "asker", server.ref().port<Query>(), &log);
  f.proc.scheduler().run_until_idle();  // both inits
  asker.ref().send(*f.client, Burst{5, {}});
  f.proc.scheduler().step();  // the asker asks
  f.proc.scheduler().step();  // the server answers: the reply waits in the asker's queue
  ASSERT_TRUE(log.empty());
  asker.ref().send(*f.client, Item{2});
  asker.ref().send(*f.client, Item{3});  // full: drops Item{2}, not the reply ahead of it
  DeliveryFailure back = f.next_failure();
  EXPECT_EQ(back.detail, "dropped as the oldest") << back.to_string();
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(log, (std::vector<int>{1010, 3}));
  EXPECT_TRUE(f.no_returns());
}

TEST(MailboxBound, R_FLOW_1_TheProcDefaultBoundsActorsSpawnedWithoutTheirOwn) {
  ProcOptions o = ProcOptions::deterministic();
  o.mailbox = bound(1, OverloadPolicy::kFail);
  Fixture f(std::move(o));
  std::vector<int> seen, other;
  auto a = *spawn<Sink>(f.proc, "default", &seen);
  auto b =
      *spawn<Sink>(f.proc, SpawnOptions::bounded(bound(5, OverloadPolicy::kFail)), "own", &other);
  EXPECT_EQ(f.proc.lookup(a.ref().addr().id)->sink_info().max_messages, 1u);
  EXPECT_EQ(f.proc.lookup(b.ref().addr().id)->sink_info().max_messages, 5u);
  a.ref().send(*f.client, Item{1});
  a.ref().send(*f.client, Item{2});
  for (int i = 0; i < 5; ++i) b.ref().send(*f.client, Item{i});
  DeliveryFailure back = f.next_failure();
  EXPECT_EQ(back.max, 1u) << back.to_string();
  EXPECT_TRUE(f.no_returns());
  f.proc.scheduler().run_until_idle();
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_EQ(other.size(), 5u);
}

TEST(MailboxBound, R_FLOW_1_TheStashCountsAgainstTheBound) {
  Fixture f;
  auto a = *spawn<Hoarder>(f.proc, SpawnOptions::bounded(bound(2, OverloadPolicy::kFail)), "h");
  a.ref().send(*f.client, Item{1});
  a.ref().send(*f.client, Item{2});
  f.proc.scheduler().run_until_idle();  // both stashed: the queue is empty, the mailbox full
  a.ref().send(*f.client, Item{3});
  DeliveryFailure back = f.next_failure();
  EXPECT_EQ(back.transport, TransportReason::kOverloaded) << back.to_string();
  EXPECT_EQ(f.proc.lookup(a.ref().addr().id)->sink_info().queued, 2u);
}

TEST(MailboxBound, R_FLOW_1_ADeterministicProcFailsInsteadOfBlocking) {
  Fixture f;  // nothing would ever make room while the test's thread waited
  std::vector<int> seen;
  MailboxBound b = bound(1, OverloadPolicy::kBlock);
  b.block_timeout = absl::Hours(1);
  auto a = *spawn<Sink>(f.proc, SpawnOptions::bounded(b), "sink", &seen);
  a.ref().send(*f.client, Item{1});
  a.ref().send(*f.client, Item{2});  // returns at once
  DeliveryFailure back = f.next_failure(absl::ZeroDuration());
  EXPECT_EQ(back.transport, TransportReason::kOverloaded) << back.to_string();
}

// A sink bounded to 1 message, blocking senders for up to `block_timeout`, whose handler holds
// Item 1 until `gate` opens: once holding(), the mailbox is full and the next send waits.
struct FullSink {
  explicit FullSink(absl::Duration block_timeout) : f(ProcOptions::threads(1)) {
    MailboxBound b = bound(1, OverloadPolicy::kBlock);
    b.block_timeout = block_timeout;
    a = *spawn<Sink>(f.proc, SpawnOptions::bounded(b), "sink", &seen, &gate, &started);
    a.ref().send(*f.client, Item{1});
  }
  bool holding() const {
    return wait_for([&] { return started.load() == 1; });
  }

  Fixture f;
  std::vector<int> seen;
  std::atomic<bool> gate{false};
  std::atomic<int> started{0};
  ActorHandle<Sink> a;
};

TEST(MailboxBound, R_FLOW_1_BlockWaitsUpToItsTimeoutThenReturnsOverloaded) {
  FullSink full(absl::Milliseconds(150));  // a 1-message sink busy with Item 1: the next send waits
  ASSERT_TRUE(full.holding());
  const absl::Time t0 = absl::Now();
  full.a.ref().send(*full.f.client, Item{2});  // the Client's own thread waits, then gives up
  const absl::Duration waited = absl::Now() - t0;
  EXPECT_GE(waited, absl::Milliseconds(140));
  EXPECT_LT(waited, absl::Seconds(5));
  DeliveryFailure back = full.f.next_failure();
  EXPECT_EQ(back.transport, TransportReason::kOverloaded) << back.to_string();
  full.gate.store(true);
  ASSERT_TRUE(wait_for([&] { return full.a.status().state == ActorState::kIdle; }));
  EXPECT_EQ(full.seen, (std::vector<int>{1}));
}

TEST(MailboxBound, R_FLOW_1_ABlockedSenderGoesOnWhenTheConsumerDrains) {
  FullSink full(absl::Seconds(20));  // a 1-message sink busy with Item 1: the next send waits
  ASSERT_TRUE(full.holding());
  std::atomic<bool> sending{false}, sent{false};
  std::thread sender([&] {
    sending.store(true);
    full.a.ref().send(*full.f.client, Item{2});
    sent.store(true);
  });
  ASSERT_TRUE(wait_for([&] { return sending.load(); }));
  EXPECT_FALSE(wait_for([&] { return sent.load(); }, absl::Milliseconds(100)));  // it waits
  full.gate.store(true);  // the consumer drains: the sender goes on long before its timeout
  ASSERT_TRUE(wait_for([&] { return sent.load(); }, absl::Seconds(10)));
  sender.join();
  ASSERT_TRUE(wait_for(
      [&] { return full.started.load() == 2 && full.a.status().state == ActorState::kIdle; }));
  EXPECT_EQ(full.seen, (std::vector<int>{1, 2}));
  EXPECT_TRUE(full.f.no_returns());
}

// Room wakes a blocked sender once per wait (cell_bounds.cc): a sender that waited before and
// was woken must be woken again the next time it waits.
TEST(MailboxBound, R_FLOW_1_ASenderThatWaitsAgainIsWokenAgain) {
  FullSink full(absl::Seconds(20));  // a 1-message sink busy with Item 1: the next send waits
  ASSERT_TRUE(full.holding());
  std::atomic<int> sent{0};
  std::atomic<bool> again{false};
  std::thread sender([&] {
    full.a.ref().send(*full.f.client, Item{2});  // waits: the sink holds Item 1
    sent.store(1);
    while (!again.load()) std::this_thread::yield();
    full.a.ref().send(*full.f.client,
                      Item{3});  // the sink takes it and holds it (the gate is shut)
    sent.store(2);
    full.a.ref().send(*full.f.client, Item{4});  // waits again
    sent.store(3);
  });
  EXPECT_FALSE(wait_for([&] { return sent.load() == 1; }, absl::Milliseconds(100)));
  full.gate.store(true);
  ASSERT_TRUE(wait_for([&] { return sent.load() == 1; }, absl::Seconds(10)));
  ASSERT_TRUE(wait_for(
      [&] { return full.started.load() == 2 && full.a.status().state == ActorState::kIdle; }));
  full.gate.store(false);
  again.store(true);
  ASSERT_TRUE(wait_for([&] { return sent.load() == 2 && full.started.load() == 3; }));
  EXPECT_FALSE(wait_for([&] { return sent.load() == 3; }, absl::Milliseconds(100)));  // waits
  full.gate.store(true);  // the sender goes on long before its 20-s timeout
  ASSERT_TRUE(wait_for([&] { return sent.load() == 3; }, absl::Seconds(10)));
  sender.join();
  ASSERT_TRUE(wait_for(
      [&] { return full.started.load() == 4 && full.a.status().state == ActorState::kIdle; }));
  EXPECT_EQ(full.seen, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_TRUE(full.f.no_returns());
}

TEST(MailboxBound, R_FLOW_1_ABlockedFiberLeavesItsWorkerToTheConsumer) {
  // One worker: the producer's fiber waits for room, and the same thread runs the consumer.
  Fixture f(ProcOptions::threads(1));
  std::vector<int> seen;
  MailboxBound b = bound(4, OverloadPolicy::kBlock);
  b.block_timeout = absl::Seconds(20);
  auto sink = *spawn<Sink>(f.proc, SpawnOptions::bounded(b), "sink", &seen);
  auto producer = *spawn<Producer>(f.proc, "producer");
  constexpr int kCount = 500;
  PortRef<Item> to(sink.ref().addr().port(runtime::Port::handler(wire::type_hash<Item>())));
  producer.ref().send(*f.client, Burst{kCount, to});
  ASSERT_TRUE(wait_for([&] {
    return f.proc.stats().delivered >= kCount + 1 &&
           f.proc.lookup(sink.ref().addr().id)->sink_info().queued == 0;
  }));
  sink.stop("done");
  ASSERT_TRUE(sink.wait(absl::Seconds(10)).ok());
  ASSERT_EQ(seen.size(), static_cast<size_t>(kCount));
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_EQ(f.proc.stats().overloaded, 0u);
}

}  // namespace
}  // namespace postal::actors
