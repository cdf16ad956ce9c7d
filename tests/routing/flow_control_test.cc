// Flow control between procs (R-FLOW-2): a channel client bounds what it holds, in total and per
// destination actor, and fails what does not fit at once with Overloaded; a full actor behind a
// channel never blocks the receiving I/O thread — its envelopes come back Overloaded, with their
// structured fields, while another actor behind the same connection keeps getting its messages.
#include <atomic>
#include <string>
#include <vector>

#include "boost/fiber/operations.hpp"
#include "channel_fixture.h"
#include "postal/postal.h"
#include "postal/routing/node.h"

namespace {

struct FlowItem {
  int64_t n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};

}  // namespace

POSTAL_MESSAGE(FlowItem, "test.routing.flow.Item");

namespace postal::routing::channel_test {
namespace {

using runtime::OverloadBound;

// Handles FlowItems; while `gate` is closed its handler waits (sleeping its fiber).
struct Gated : actors::Actor, actors::Handles<FlowItem> {
  std::atomic<bool>* gate;
  std::atomic<int>* handled;
  Gated(std::atomic<bool>* g, std::atomic<int>* h) : gate(g), handled(h) {}
  absl::Status handle(actors::Context& cx, FlowItem) override {
    // A handler that waits does so in a BlockingScope: its worker runs other actors meanwhile.
    runtime::Scheduler::BlockingScope blocking(cx.proc().scheduler());
    while (gate != nullptr && !gate->load()) {
      boost::this_fiber::sleep_for(std::chrono::milliseconds(1));
    }
    handled->fetch_add(1);
    return absl::OkStatus();
  }
};

// A server that accepts and never answers HELLO: everything posted stays in the client.
struct SilentServer {
  explicit SilentServer(const ChannelAddr& addr)
      : acceptor(ctx, boost::asio::local::stream_protocol::endpoint(std::string(addr.path()))) {}
  boost::asio::io_context ctx;
  LocalAcceptor acceptor;
};

TEST_F(ChannelTest, R_FLOW_2_ThePerDestinationCapFailsAtTheSenderAndLeavesRoomForOthers) {
  const ChannelAddr addr = ipc_path();
  SilentServer silent(addr);
  ChannelOptions options;
  options.max_queue = 4;
  options.max_queue_per_destination = 3;
  auto client = dial(addr, options);
  auto carol = must(runtime::Client::attach(receiving_, "carol"));
  auto other = runtime::open_port<ChanMsg>(*carol);
  auto to_other = [&](int64_t n) {
    return runtime::MessageEnvelope::make(alice_->self_addr(), other.handle.bind().addr(),
                                          wire::Any::make(ChanMsg{n, {}}));
  };
  for (int n = 0; n < 4; ++n) post(*client, n);  // the 4th is past bob's cap
  auto [n, f] = next_returned_n();
  EXPECT_EQ(n, 3);
  EXPECT_EQ(f.transport, TransportReason::kOverloaded) << f.to_string();
  EXPECT_EQ(f.bound, OverloadBound::kDestinationMessages);
  EXPECT_EQ(f.len, 3u);
  EXPECT_EQ(f.max, 3u);
  // Another destination still has room: bob's backlog does not stand in front of it.
  client->post(to_other(10), sending_);
  expect_nothing_returned();
  // The total bound holds across destinations.
  client->post(to_other(11), sending_);
  f = next_returned();
  EXPECT_EQ(f.bound, OverloadBound::kChannelMessages) << f.to_string();
  EXPECT_EQ(f.max, 4u);
  EXPECT_EQ(client->unacked(), 4u);
}

TEST_F(ChannelTest, R_FLOW_2_TheQueueBoundsCountPayloadBytes) {
  const ChannelAddr addr = ipc_path();
  SilentServer silent(addr);
  ChannelOptions options;
  options.max_queue_per_destination_bytes = 3000;
  auto client = dial(addr, options);
  post(*client, 0, 2000);
  post(*client, 1, 2000);  // 2000 + 2000 > 3000
  runtime::DeliveryFailure f = next_returned();
  EXPECT_EQ(f.transport, TransportReason::kOverloaded) << f.to_string();
  EXPECT_EQ(f.bound, OverloadBound::kDestinationBytes);
  EXPECT_GT(f.len, 2000u);
  EXPECT_EQ(f.max, 3000u);
  post(*client, 2, 10);  // a small one still fits
  expect_nothing_returned();
}

// R-FAIL-6 with R-FLOW-2: try_send through a node whose channel queue for the destination is
// full reports Overloaded as its status at once, and the envelope does not come back.
TEST(FlowControl, R_FLOW_2_TrySendReportsAFullChannelQueueAsAStatus) {
  const ChannelAddr addr = ipc_path();
  SilentServer silent(addr);
  NodeOptions o;
  o.id = runtime::ProcId{runtime::Uid::singleton(*runtime::Label::parse("flowtry"))};
  o.listen = ipc_path();
  o.scheduler.workers = 1;
  o.system_actors = false;
  o.channel.max_queue_per_destination = 1;
  std::unique_ptr<Node> node = must(Node::start(std::move(o)));
  auto alice = must(runtime::Client::attach(node->proc(), "alice"));
  const runtime::ActorAddr far{
      runtime::ActorId{runtime::ProcId{runtime::Uid::singleton(*runtime::Label::parse("far"))},
                       runtime::Uid::singleton(*runtime::Label::parse("bob"))},
      runtime::Location::addr(addr)};
  runtime::PortRef<FlowItem> to(far.port(runtime::Port::handler(wire::type_hash<FlowItem>())));
  EXPECT_TRUE(to.try_send(*alice, FlowItem{1}).ok());  // held: the server never answers
  absl::Status s = to.try_send(*alice, FlowItem{2});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("channel queue messages for the destination: 1 of max 1"),
            std::string::npos)
      << s;
  EXPECT_EQ(alice->next_undeliverable(absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// Two nodes on real ipc sockets: alice's node posts to two actors of the receiving node over one
// connection. The "slow" one is full (a bound of 4, its handler held); the receiving I/O thread
// does not wait for it: the overflow comes back Overloaded, and the "fast" one is served at once.
TEST(FlowControl, R_FLOW_2_AFullActorBehindAChannelDoesNotStallAnotherOnTheSameConnection) {
  auto start = [](const char* name) {
    NodeOptions o;
    o.id = runtime::ProcId{runtime::Uid::singleton(*runtime::Label::parse(name))};
    o.listen = ipc_path();
    o.scheduler.workers = 1;
    o.system_actors = false;
    o.channel.credit = false;  // the fail-back itself; credit_test.cc pauses instead
    return must(Node::start(std::move(o)));
  };
  std::unique_ptr<Node> receiver = start("flowrecv");
  std::unique_ptr<Node> sender = start("flowsend");
  std::atomic<bool> gate{false}, open{true};
  std::atomic<int> slow_handled{0}, fast_handled{0};
  runtime::MailboxBound bound = runtime::MailboxBound::of(4);  // kBlock: the I/O thread fails it
  bound.block_timeout = absl::Seconds(30);
  auto slow = must(actors::spawn<Gated>(receiver->proc(), actors::SpawnOptions::bounded(bound),
                                        "slow", &gate, &slow_handled));
  auto fast = must(actors::spawn<Gated>(receiver->proc(), "fast", &open, &fast_handled));
  auto alice = must(runtime::Client::attach(sender->proc(), "alice"));
  runtime::PortRef<FlowItem> to_slow(
      slow.addr().port(runtime::Port::handler(wire::type_hash<FlowItem>())));
  runtime::PortRef<FlowItem> to_fast(
      fast.addr().port(runtime::Port::handler(wire::type_hash<FlowItem>())));

  constexpr int kFlood = 200;
  for (int i = 0; i < kFlood; ++i) to_slow.send(*alice, FlowItem{i});
  to_fast.send(*alice, FlowItem{-1});
  // The fast actor is served although the slow one is full and held.
  EXPECT_TRUE(test_support::wait_for([&] { return fast_handled.load() == 1; }, absl::Seconds(10)));
  EXPECT_FALSE(gate.load());
  // What did not fit came back across the wire as Overloaded, with the bound's fields.
  int returned = 0;
  while (returned < kFlood - 4) {
    absl::StatusOr<EnvelopePtr> back = alice->next_undeliverable(absl::Seconds(10));
    ASSERT_TRUE(back.ok()) << back.status() << " after " << returned << " returns";
    const runtime::DeliveryFailure* root = (*back)->root_failure();
    ASSERT_NE(root, nullptr);
    ASSERT_EQ(root->transport, TransportReason::kOverloaded) << root->to_string();
    EXPECT_EQ(root->bound, OverloadBound::kMailboxMessages);
    EXPECT_EQ(root->len, 4u);
    EXPECT_EQ(root->max, 4u);
    ++returned;
  }
  gate.store(true);
  // Every envelope is handled or returned, none twice.
  EXPECT_TRUE(test_support::wait_for([&] { return slow_handled.load() == 4; }, absl::Seconds(10)));
  EXPECT_EQ(alice->next_undeliverable(absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(slow_handled.load() + returned, kFlood);
}

}  // namespace
}  // namespace postal::routing::channel_test
