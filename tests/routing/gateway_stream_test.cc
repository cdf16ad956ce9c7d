// Large messages through a gateway (docs/wire.md §9.7, rules 31–33), on real ipc sockets
// between three nodes in one test process: the gateway forwards a transfer's chunks as they
// arrive instead of reassembling it — intact at the far end, before what its sender sent after
// it (R-CHAN-4), with the gateway holding about two transfer windows, never the payload
// (R-FLOW-4); when the next hop fails, the transfer is cancelled upstream and the envelope comes
// back exactly once, whole, from the upstream client (R-FAIL-3); when the upstream gives up, the
// next hop gets an ABORT.
#include <string>
#include <utility>

#include <boost/asio/local/stream_protocol.hpp>

#include "payload_stream.h"
#include "postal/routing/node.h"
#include "transfer_fixture.h"

namespace postal::routing::channel_test {
namespace {

using internal::PayloadStream;

constexpr uint32_t kWindow = 256 << 10;

ChannelOptions small_frames() {
  ChannelOptions o;
  o.max_frame_bytes = 64 << 10;  // many chunks
  o.transfer_window = kWindow;
  return o;
}

runtime::ProcId proc_id(const std::string& name) {
  return runtime::ProcId{runtime::Uid::singleton(*runtime::Label::parse(name))};
}

std::unique_ptr<Node> start(const std::string& name, bool gateway) {
  NodeOptions o;
  o.id = proc_id(name);
  o.listen = ipc_abstract();
  o.scheduler.workers = 1;
  o.system_actors = false;
  o.channel = small_frames();
  if (gateway) {
    o.gateway = runtime::Uid::singleton(*runtime::Label::parse(name + "gw"));
    // An upstream that goes without a GOODBYE (it cannot say one cleanly while a chunk is cut in
    // half on its socket) is given up after this, not after a minute.
    o.channel.transfer_idle_timeout = absl::Milliseconds(300);
  }
  return must(Node::start(std::move(o)));
}

// Alice on node A sends through gateway node G.
class GatewayStreamTest : public testing::Test {
 protected:
  GatewayStreamTest()
      : a_(start("gsa", false)),
        g_(start("gsg", true)),
        alice_(must(runtime::Client::attach(a_->proc(), "alice"))) {
    PayloadStream::reset_peak_in_process();
  }

  // `port` as reached through the gateway, its proc attached there as listening at `listen`.
  runtime::PortRef<ChanMsg> behind_gateway(const runtime::PortAddr& port,
                                           const ChannelAddr& listen) {
    runtime::ProcAddr via = must(g_->attach(port.id.actor.proc, listen));
    return runtime::PortRef<ChanMsg>(runtime::PortAddr{port.id, via.location});
  }

  // A channel of the test's own from A's proc to the gateway, to watch (or close) it.
  std::unique_ptr<ChannelClient> dial_gateway() {
    return must(ChannelClient::dial(io_, g_->listen_addr(), a_->proc(), small_frames()));
  }
  EnvelopePtr message(const runtime::PortRef<ChanMsg>& to, int64_t n, std::string pad) {
    return runtime::MessageEnvelope::make(alice_->self_addr(), to.addr(),
                                          wire::Any::make(ChanMsg{n, std::move(pad)}));
  }
  static void wait_unacked(const ChannelClient& client, size_t n) {
    EXPECT_TRUE(test_support::wait_for([&] { return client.unacked() == n; }, kDeadline))
        << client.unacked() << " unacked";
  }

  IoThread io_;
  std::unique_ptr<Node> a_;
  std::unique_ptr<Node> g_;
  std::unique_ptr<runtime::Client> alice_;
};

TEST_F(GatewayStreamTest, R_CHAN_4_AGatewayForwardsChunksAsTheyArriveHoldingAboutTwoWindows) {
  std::unique_ptr<Node> b = start("gsb", false);
  auto bob = must(runtime::Client::attach(b->proc(), "bob"));
  runtime::OpenPort<ChanMsg> port = runtime::open_port<ChanMsg>(*bob);
  runtime::PortRef<ChanMsg> to = behind_gateway(port.handle.bind().addr(), b->listen_addr());

  const std::string pad = pattern(32 << 20);
  to.send(*alice_, ChanMsg{0, pad});
  to.send(*alice_, ChanMsg{1, "after"});  // same pair: must not overtake the transfer

  absl::StatusOr<ChanMsg> first = port.receiver.recv(kDeadline);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->n, 0);
  EXPECT_EQ(first->pad.size(), pad.size());
  EXPECT_TRUE(first->pad == pad) << "the payload arrived changed";
  absl::StatusOr<ChanMsg> second = port.receiver.recv(kDeadline);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->n, 1);

  // Rule 32: taken over at most a window beyond what the next hop released, sent at most a
  // window beyond that, plus the piece being released.
  const uint64_t peak = PayloadStream::peak_in_process();
  EXPECT_GT(peak, 0u) << "the gateway streamed nothing: it reassembled the payload";
  EXPECT_LE(peak, 2 * kWindow + (64 << 10)) << "the gateway held " << peak << " bytes";
  EXPECT_TRUE(
      test_support::wait_for([] { return PayloadStream::held_in_process() == 0; }, kDeadline));
  EXPECT_FALSE(alice_->next_undeliverable(absl::Milliseconds(100)).ok());
}

TEST_F(GatewayStreamTest,
       R_FAIL_3_WhenTheNextHopFailsTheTransferIsCancelledUpstreamAndReturnsOnce) {
  std::unique_ptr<Node> b = start("gsb", false);
  auto bob = must(runtime::Client::attach(b->proc(), "bob"));
  runtime::OpenPort<ChanMsg> port = runtime::open_port<ChanMsg>(*bob);
  // The gateway believes bob's proc listens where nothing does.
  runtime::PortRef<ChanMsg> to = behind_gateway(port.handle.bind().addr(), ipc_abstract());

  std::unique_ptr<ChannelClient> upstream = dial_gateway();
  upstream->post(message(to, 7, pattern(8 << 20)), a_->proc());
  absl::StatusOr<EnvelopePtr> back = alice_->next_undeliverable(kDeadline);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_NE((*back)->root_failure(), nullptr);
  EXPECT_EQ((*back)->root_failure()->transport, TransportReason::kDialFailed)
      << (*back)->root_failure()->to_string();
  // Rule 31: the gateway CANCELled with the failure, and the upstream client, which holds the
  // whole payload, returned it — so the sender sees which message came back.
  EXPECT_NE((*back)->root_failure()->detail.find("cancelled"), std::string::npos)
      << (*back)->root_failure()->to_string();
  absl::StatusOr<ChanMsg> returned = (*back)->data().take<ChanMsg>();
  ASSERT_TRUE(returned.ok()) << returned.status();
  EXPECT_EQ(returned->n, 7);
  EXPECT_EQ(returned->pad.size(), size_t{8} << 20);
  wait_unacked(*upstream, 0);
  EXPECT_FALSE(alice_->next_undeliverable(absl::Milliseconds(100)).ok()) << "returned twice";
  EXPECT_TRUE(
      test_support::wait_for([] { return PayloadStream::held_in_process() == 0; }, kDeadline));

  // The channel from A to the gateway carries on: a message to an actor of the gateway's proc.
  auto gina = must(runtime::Client::attach(g_->proc(), "gina"));
  runtime::OpenPort<ChanMsg> gina_port = runtime::open_port<ChanMsg>(*gina);
  upstream->post(message(runtime::PortRef<ChanMsg>(gina_port.handle.bind().addr()), 8, "x"),
                 a_->proc());
  absl::StatusOr<ChanMsg> got = gina_port.receiver.recv(kDeadline);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->n, 8);
}

TEST_F(GatewayStreamTest, R_CHAN_4_WhenTheUpstreamGivesUpTheGatewayAbortsTheTransferDownstream) {
  // The next hop is a fake server that takes the DATA frame and the first window, and never acks
  // a chunk: the gateway stops taking bytes over, so the upstream stalls mid-transfer.
  const ChannelAddr addr = ipc_path();
  const std::string path(addr.path());
  boost::asio::io_context ctx;
  LocalAcceptor acceptor(ctx, boost::asio::local::stream_protocol::endpoint(path));
  const runtime::PortAddr far{
      runtime::PortId{runtime::ActorId{proc_id("gsfake"),
                                       runtime::Uid::singleton(*runtime::Label::parse("far"))},
                      runtime::Port::handler(wire::type_hash<ChanMsg>())},
      runtime::Location::addr(addr)};
  runtime::PortRef<ChanMsg> to = behind_gateway(far, addr);

  // Upstream: a client of the test's own, so the test can close it mid-transfer.
  std::unique_ptr<ChannelClient> upstream = dial_gateway();
  upstream->post(message(to, 3, pattern(8 << 20)), a_->proc());

  std::optional<RawPeer> fake = accept_within(acceptor);
  ASSERT_TRUE(fake.has_value());
  expect_kind(*fake, v2::Kind::kHello);
  v2::Welcome w = welcome(0);
  w.max_frame_bytes = 64 << 10;
  w.transfer_window = 64 << 10;
  fake->send(w);
  RawPeer::Received data = expect_kind(*fake, v2::Kind::kData);
  uint64_t seq = ~uint64_t{0};
  ASSERT_GE(data.body.size(), sizeof(seq));
  std::memcpy(&seq, data.body.data(), sizeof(seq));
  fake->send(v2::Ack{seq + 1, {}});  // the DATA frame, no bytes
  uint64_t bytes = 0;
  while (bytes < (64 << 10)) {
    RawPeer::Received chunk = expect_kind(*fake, v2::Kind::kChunk);
    bytes += must(v2::decode_chunk(chunk.body)).bytes.size();
  }
  // The gateway holds about two of its own windows at most while its next hop acks nothing.
  EXPECT_LE(PayloadStream::held_in_process(), 2 * kWindow + (64 << 10));

  // The upstream goes: with GOODBYE client_closing when it can say it cleanly, and the gateway
  // forgets the session and its transfer at once; else (a chunk cut in half on its socket) the
  // orphaned session's transfer idles out (transfer_idle_timeout). Either way the stream aborts.
  upstream->close();
  absl::StatusOr<EnvelopePtr> back = alice_->next_undeliverable(kDeadline);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->root_failure()->transport, TransportReason::kChannelClosed);
  std::optional<RawPeer::Received> f = fake->next();
  while (f && f->kind == v2::Kind::kChunk) f = fake->next();
  ASSERT_TRUE(f.has_value()) << "the gateway never told its next hop";
  ASSERT_EQ(f->kind, v2::Kind::kAbort);
  EXPECT_EQ(must(v2::decode_transfer_end(f->body)).seq, seq);
  EXPECT_TRUE(
      test_support::wait_for([] { return PayloadStream::held_in_process() == 0; }, kDeadline));
  EXPECT_FALSE(alice_->next_undeliverable(absl::Milliseconds(100)).ok()) << "returned twice";
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace postal::routing::channel_test
