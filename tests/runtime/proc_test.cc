// Tests for Proc: the muxer, the default forwarder, the return path, statistics and the trace
// hook (proc.h, proc_stats.h; R-ADDR-3, R-ENV-1, R-FAIL-1, R-FAIL-4, R-ACT-4).
#include "postal/runtime/proc.h"

#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "postal/runtime/client.h"
#include "postal/runtime/port.h"
#include "support/must.h"
#include "support/proc_client.h"
#include "support/recording_senders.h"

namespace {

struct ProcPing {
  int32_t n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};

struct ProcOther {
  int32_t n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};

}  // namespace

POSTAL_MESSAGE(ProcPing, "test.runtime.proc.Ping");
POSTAL_MESSAGE(ProcOther, "test.runtime.proc.Other");

namespace postal::runtime {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(10);

using test_support::must;

Uid uid(std::string_view name) { return Uid::singleton(must(Label::parse(name))); }

using test_support::RecordingSender;

struct Event {
  TraceEventKind kind;
  uint64_t type_hash;
  bool operator==(const Event&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Event& e) {
  return os << "{kind " << static_cast<int>(e.kind) << ", type " << e.type_hash << "}";
}

// A deterministic proc with the client "alice" (support/proc_client.h), plus trace recording.
class ProcTest : public test_support::ProcClientTest {
 protected:
  void send_ping(PortAddr to, int n = 1) {
    proc_.send(MessageEnvelope::make(client_->self_addr(), std::move(to),
                                     wire::Any::make(ProcPing{n}), proc_.default_ttl()));
  }
  PortAddr remote_port() const {
    return ActorAddr{ActorId{ProcId{uid("far-away")}, uid("bob")}, proc_.location()}.port(
        Port::handler(wire::type_hash<ProcPing>()));
  }
  TraceHook recorder(std::optional<uint64_t> filter = std::nullopt) {
    return TraceHook{[this](const TraceEvent& e) {
                       events_.push_back(Event{e.kind, e.envelope.data().type_hash()});
                     },
                     filter};
  }

  std::vector<Event> events_;
};

// --- Muxer ---------------------------------------------------------------------------------------

TEST_F(ProcTest, R_FAIL_1_UnknownLocalActorIsActorNotExist) {
  PortAddr ghost = proc_.actor_addr(uid("ghost")).port(Port::handler(wire::type_hash<ProcPing>()));
  send_ping(ghost);
  DeliveryFailure root = next_failure();
  EXPECT_EQ(root.kind, FailureKind::kInvalidReference);
  EXPECT_EQ(root.invalid, InvalidReason::kActorNotExist);
  EXPECT_EQ(root.target, ghost.to_string());
  EXPECT_NE(root.to_string().find("actor does not exist"), std::string::npos) << root.to_string();
}

TEST_F(ProcTest, R_FAIL_1_OtherProcIsTransportNoRouteByDefault) {
  PortAddr far = remote_port();
  send_ping(far);
  DeliveryFailure root = next_failure();
  EXPECT_EQ(root.kind, FailureKind::kTransport);
  EXPECT_EQ(root.transport, TransportReason::kNoRoute);
  EXPECT_EQ(root.target, far.to_string());
  EXPECT_TRUE(root.is_undeliverable());
  EXPECT_EQ(proc_.stats().transport, 1u);
}

TEST_F(ProcTest, R_ROUTE_1_ForwarderTakesOtherProcsEnvelopes) {
  RecordingSender forwarder;
  proc_.set_forwarder(&forwarder);
  auto [handle, receiver] = open_port<ProcPing>(*client_);
  send_ping(remote_port(), 1);
  send_ping(handle.bind().addr(), 2);  // local: never forwarded
  ASSERT_EQ(forwarder.got.size(), 1u);
  EXPECT_EQ(forwarder.got[0]->dest(), remote_port());
  EXPECT_EQ(must(receiver.recv(kDeadline)).n, 2);

  proc_.set_forwarder(nullptr);  // back to NoRoute
  send_ping(remote_port(), 3);
  EXPECT_EQ(forwarder.got.size(), 1u);
  EXPECT_EQ(next_failure().transport, TransportReason::kNoRoute);
}

TEST_F(ProcTest, R_ENV_1_ProcRoutesOnNextHopAndKeepsDest) {
  RecordingSender forwarder;
  proc_.set_forwarder(&forwarder);
  auto [handle, receiver] = open_port<ProcPing>(*client_);
  PortAddr local = handle.bind().addr();
  auto env = MessageEnvelope::make(client_->self_addr(), local, wire::Any::make(ProcPing{1}));
  env->set_next_hop(remote_port());
  proc_.send(std::move(env));
  ASSERT_EQ(forwarder.got.size(), 1u) << "the next hop, not the destination, picks the path";
  EXPECT_EQ(forwarder.got[0]->dest(), local);
  EXPECT_EQ(forwarder.got[0]->next_hop(), remote_port());
  EXPECT_FALSE(receiver.recv(absl::ZeroDuration()).ok());
  proc_.set_forwarder(nullptr);
}

TEST_F(ProcTest, R_ADDR_3_OwnsByIdWhateverTheLocation) {
  auto [handle, receiver] = open_port<ProcPing>(*client_);
  PortAddr local = handle.bind().addr();
  PortAddr elsewhere{local.id, Location::addr(must(ChannelAddr::parse("tcp://10.0.0.1:4000")))};
  ASSERT_FALSE(elsewhere == local);
  send_ping(elsewhere, 4);
  EXPECT_EQ(must(receiver.recv(kDeadline)).n, 4);
}

TEST(ProcPair, R_ADDR_3_ResolvedMailboxOfAnotherProcIsNoShortcut) {
  Proc a(ProcOptions::deterministic());
  Proc b(ProcOptions::deterministic());
  auto on_a = must(Client::attach(a, "alice"));
  auto on_b = must(Client::attach(b, "bob"));
  auto [handle, receiver] = open_port<ProcPing>(*on_b);
  // A PortRef carrying b's mailbox, used from a: a has no route to b, so it must not deliver.
  handle.bind().send(*on_a, ProcPing{1});
  EXPECT_FALSE(receiver.recv(absl::ZeroDuration()).ok());
  EnvelopePtr back = must(on_a->next_undeliverable(kDeadline));
  EXPECT_EQ(back->root_failure()->transport, TransportReason::kNoRoute);
}

TEST_F(ProcTest, AttachRejectsTakenNamesAndForeignMailboxes) {
  absl::StatusOr<std::unique_ptr<Client>> dup = Client::attach(proc_, "alice");
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(Client::attach(proc_, "Not A Label").ok());

  Proc other(ProcOptions::deterministic());
  auto foreign = std::make_shared<Mailbox>(other, other.actor_addr(uid("x")), nullptr, nullptr);
  EXPECT_EQ(proc_.attach(foreign).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(proc_.lookup(client_->self_addr().id), client_->mailbox());
  EXPECT_EQ(proc_.lookup(foreign->owner().id), nullptr);
}

TEST_F(ProcTest, R_ACT_4_AClosedClientStaysATombstone) {
  ActorAddr bob_addr;
  PortAddr bob_returns;
  {
    auto bob = must(Client::attach(proc_, "bob"));
    bob_addr = bob->self_addr();
    bob_returns = bob->mailbox()->port_addr(Port::handler(wire::type_hash<ProcPing>()));
  }
  EXPECT_EQ(proc_.mailbox_count(), 2u);
  EXPECT_EQ(Client::attach(proc_, "bob").status().code(), absl::StatusCode::kAlreadyExists);
  send_ping(bob_returns);
  DeliveryFailure root = next_failure();
  EXPECT_EQ(root.invalid, InvalidReason::kActorStopped)
      << "not ActorNotExist: " << root.to_string();
}

TEST_F(ProcTest, R_ACT_6_AClosedClientsTombstoneSaysWhy) {
  PortAddr bob_returns;
  {
    auto bob = must(Client::attach(proc_, "bob"));
    bob_returns = bob->mailbox()->port_addr(Port::handler(wire::type_hash<ProcPing>()));
  }
  send_ping(bob_returns);
  DeliveryFailure root = next_failure();
  EXPECT_EQ(root.invalid, InvalidReason::kActorStopped);
  EXPECT_EQ(root.detail, "the actor stopped: the client was closed");
}

// --- R-FAIL-6: try_post, the synchronous local result ----------------------------------------

class TryPostTest : public ProcTest {
 protected:
  absl::Status try_ping(PortAddr to, uint8_t ttl = kDefaultTtl) {
    return proc_.try_post(MessageEnvelope::make(client_->self_addr(), std::move(to),
                                                wire::Any::make(ProcPing{1}), ttl));
  }
  // A refusal is the result: nothing comes back, nothing is counted returned.
  void expect_refused_not_returned() {
    EXPECT_TRUE(no_returns());
    EXPECT_EQ(proc_.stats().returned, 0u);
  }
};

TEST_F(TryPostTest, R_FAIL_6_DeliveredIsOk) {
  auto [handle, receiver] = open_port<ProcPing>(*client_);
  EXPECT_TRUE(try_ping(handle.bind().addr()).ok());
  EXPECT_EQ(must(receiver.recv(kDeadline)).n, 1);
  EXPECT_TRUE(handle.try_send(ProcPing{2}).ok());
  EXPECT_EQ(must(receiver.recv(kDeadline)).n, 2);
}

TEST_F(TryPostTest, R_FAIL_6_ActorNotExistIsNotFound) {
  PortAddr ghost = proc_.actor_addr(uid("ghost")).port(Port::handler(wire::type_hash<ProcPing>()));
  absl::Status s = try_ping(ghost);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("actor does not exist"), std::string::npos) << s;
  expect_refused_not_returned();
  EXPECT_EQ(proc_.stats().invalid_reference, 1u) << "counted as a failure of its kind";
}

TEST_F(TryPostTest, R_FAIL_6_HandlerNotBoundIsUnimplemented) {
  // A client binds only the UndeliverableEnvelope handler port.
  absl::Status s =
      try_ping(client_->mailbox()->port_addr(Port::handler(wire::type_hash<ProcPing>())));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("handler not bound"), std::string::npos) << s;
  expect_refused_not_returned();
}

TEST_F(TryPostTest, R_FAIL_6_StoppedActorIsFailedPreconditionWithTheReason) {
  PortAddr bob_port;
  {
    auto bob = must(Client::attach(proc_, "bob"));
    bob_port = bob->mailbox()->port_addr(Port::ephemeral(0));
  }
  absl::Status s = try_ping(bob_port);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("actor stopped"), std::string::npos) << s;
  EXPECT_NE(s.message().find("the client was closed"), std::string::npos) << s;
  expect_refused_not_returned();
}

TEST_F(TryPostTest, R_FAIL_6_PortNeverAllocatedIsNotFoundAndPortGoneIsFailedPrecondition) {
  absl::Status never = try_ping(client_->mailbox()->port_addr(Port::ephemeral(999)));
  EXPECT_EQ(never.code(), absl::StatusCode::kNotFound) << never;
  EXPECT_NE(never.message().find("port never allocated"), std::string::npos) << never;

  std::optional<PortHandle<ProcPing>> gone;
  {
    auto [handle, receiver] = open_port<ProcPing>(*client_);
    gone.emplace(handle);
  }  // the receiver is dropped: the port is gone
  absl::Status s = gone->try_send(ProcPing{1});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("port gone"), std::string::npos) << s;
  expect_refused_not_returned();
}

TEST_F(TryPostTest, R_FAIL_6_ExpiredTtlIsDeadlineExceeded) {
  auto [handle, receiver] = open_port<ProcPing>(*client_);
  absl::Status s = try_ping(handle.bind().addr(), /*ttl=*/0);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("expired"), std::string::npos) << s;
  expect_refused_not_returned();
  EXPECT_EQ(proc_.stats().expired, 1u);
}

TEST_F(TryPostTest, R_FAIL_6_NoForwarderIsUnavailableAForwarderTakesItWithOk) {
  absl::Status s = try_ping(remote_port());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("no route"), std::string::npos) << s;
  expect_refused_not_returned();

  RecordingSender forwarder;
  proc_.set_forwarder(&forwarder);
  EXPECT_TRUE(try_ping(remote_port()).ok()) << "remote: OK once the forwarder has it";
  ASSERT_EQ(forwarder.got.size(), 1u);
  EXPECT_EQ(forwarder.got[0]->dest(), remote_port());
  EXPECT_EQ(forwarder.got[0]->ttl(), kDefaultTtl - 1) << "the TTL rule applies (R-ENV-3)";
  proc_.set_forwarder(nullptr);
}

// --- Statistics ----------------------------------------------------------------------------------

TEST_F(ProcTest, R_FAIL_4_StatsCountPostedAndDelivered) {
  auto [handle, receiver] = open_port<ProcPing>(*client_);
  for (int i = 0; i < 10; ++i) handle.bind().send(*client_, ProcPing{i});
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(receiver.recv(kDeadline).ok());
  ProcStatsSnapshot s = proc_.stats();
  EXPECT_EQ(s.posted, 10u);
  EXPECT_EQ(s.delivered, 10u);
  EXPECT_EQ(s.returned, 0u);
  EXPECT_EQ(s.dropped, 0u);

  send_ping(proc_.actor_addr(uid("ghost")).port(Port::handler(wire::type_hash<ProcPing>())));
  ASSERT_TRUE(client_->next_undeliverable(kDeadline).ok());
  s = proc_.stats();
  EXPECT_EQ(s.posted, 11u);
  EXPECT_EQ(s.returned, 1u);
  EXPECT_EQ(s.invalid_reference, 1u);
  // The return itself was delivered to the client's Undeliverable handler port.
  EXPECT_EQ(s.delivered, 11u);
}

// Counting threads own their shard while they live (proc_stats.h) and give it back when they
// exit: more threads than shards at once, and wave after wave of new threads, count every add.
TEST(ProcStatsShards, R_FAIL_4_ManyThreadsAndThreadsThatComeAndGoCountEveryAdd) {
  ProcStats stats;
  constexpr int kThreads = 24;  // more than the shards: some share the last one
  constexpr int kAdds = 20000;
  for (int wave = 0; wave < 3; ++wave) {  // the later waves reuse the shards the earlier gave back
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kAdds; ++i) stats.add(Counter::kPosted);
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(stats.snapshot().posted, static_cast<uint64_t>((wave + 1) * kThreads * kAdds));
  }
}

// --- Trace hook ----------------------------------------------------------------------------------

TEST_F(ProcTest, TraceSeesPostedDeliveredAndReturned) {
  const uint64_t ping = wire::type_hash<ProcPing>();
  const uint64_t undeliverable = wire::type_hash<UndeliverableEnvelope>();
  auto [handle, receiver] = open_port<ProcPing>(*client_);
  proc_.set_trace(recorder());

  handle.bind().send(*client_, ProcPing{1});
  EXPECT_EQ(events_, (std::vector<Event>{{TraceEventKind::kPosted, ping},
                                         {TraceEventKind::kDelivered, ping}}));
  events_.clear();

  send_ping(proc_.actor_addr(uid("ghost")).port(Port::handler(ping)));
  EXPECT_EQ(events_, (std::vector<Event>{{TraceEventKind::kPosted, ping},
                                         {TraceEventKind::kReturned, ping},
                                         {TraceEventKind::kDelivered, undeliverable}}));
  events_.clear();

  auto quiet =
      MessageEnvelope::make(client_->self_addr(), remote_port(), wire::Any::make(ProcPing{2}));
  quiet->set_return_undeliverable(false);
  proc_.send(std::move(quiet));
  EXPECT_EQ(events_, (std::vector<Event>{{TraceEventKind::kPosted, ping},
                                         {TraceEventKind::kDropped, ping}}));
  events_.clear();

  proc_.set_trace(TraceHook{});  // removed: no more events
  handle.bind().send(*client_, ProcPing{3});
  EXPECT_TRUE(events_.empty());
}

TEST_F(ProcTest, TraceHonoursItsTypeFilter) {
  const uint64_t ping = wire::type_hash<ProcPing>();
  auto pings = open_port<ProcPing>(*client_);
  auto others = open_port<ProcOther>(*client_);
  proc_.set_trace(recorder(ping));

  others.handle.bind().send(*client_, ProcOther{1});
  EXPECT_TRUE(events_.empty()) << "another type is filtered out";

  pings.handle.bind().send(*client_, ProcPing{1});
  send_ping(proc_.actor_addr(uid("ghost")).port(Port::handler(ping)));
  EXPECT_EQ(events_, (std::vector<Event>{{TraceEventKind::kPosted, ping},
                                         {TraceEventKind::kDelivered, ping},
                                         {TraceEventKind::kPosted, ping},
                                         {TraceEventKind::kReturned, ping}}))
      << "the Undeliverable delivery is not a Ping and is filtered out";
  proc_.set_trace(TraceHook{});
}

// --- Defaults ------------------------------------------------------------------------------------

TEST(ProcDefaults, R_ADDR_4_DefaultIdAndInprocLocation) {
  Proc a(ProcOptions::deterministic());
  Proc b(ProcOptions::deterministic());
  EXPECT_FALSE(a.id() == b.id()) << "default ids are random instances";
  EXPECT_NE(a.addr().to_string().find("inproc://"), std::string::npos) << a.addr().to_string();
  EXPECT_EQ(a.system_addr().id.proc, a.id());
  EXPECT_EQ(must(ProcAddr::parse(a.addr().to_string())), a.addr());

  ProcOptions named = ProcOptions::deterministic();
  named.id = ProcId{uid("named")};
  Proc c(named);
  EXPECT_EQ(c.id(), *named.id);
  EXPECT_EQ(c.actor_addr(uid("x")).id.proc, c.id());
}

TEST(ProcDefaults, R_ADDR_4_NamedProcsGetDistinctDefaultLocationsNeverInproc0) {
  ProcOptions first = ProcOptions::deterministic();
  first.id = ProcId{uid("named")};
  ProcOptions second = ProcOptions::deterministic();
  second.id = ProcId{uid("other")};
  Proc a(first);
  Proc b(second);
  Proc c(first);  // the same name again (two procs of one process may share a name)
  for (const Proc* p : {&a, &b, &c}) {
    EXPECT_NE(p->location().to_string(), "inproc://0") << p->addr().to_string();
    EXPECT_EQ(p->location().to_string().rfind("inproc://", 0), 0u) << p->addr().to_string();
  }
  EXPECT_FALSE(a.location() == b.location()) << a.location().to_string();
  EXPECT_FALSE(a.location() == c.location()) << a.location().to_string();
  // An instance proc keeps its number as its location.
  ProcOptions instance = ProcOptions::deterministic();
  instance.id = ProcId{Uid::instance(4242)};
  EXPECT_EQ(Proc(instance).location().to_string(), "inproc://4242");
}

}  // namespace
}  // namespace postal::runtime
