// Large messages over real sockets (docs/wire.md §9): payloads past the frame limit travel as
// transfers of CHUNK frames — intact, within the window the server announced, interleaved with
// other pairs' envelopes and never overtaken by a later envelope of their own pair (R-CHAN-4),
// resumed where the server holds them after a reconnect (R-CHAN-2), bounded by
// max_message_bytes (R-CHAN-3); and the server's side of the protocol's edges.
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include <boost/asio/local/stream_protocol.hpp>

#include "transfer_fixture.h"
#include "le_bytes.h"

namespace postal::routing::channel_test {
namespace {

class ChannelTransferTest : public ChannelTest {
 protected:
  EnvelopePtr big(int64_t n, const std::string& pad) {
    return runtime::MessageEnvelope::make(alice_->self_addr(), port_.handle.bind().addr(),
                                          wire::Any::make(ChanMsg{n, pad}));
  }
  // Receives one message and checks it is `n` carrying `pad`.
  void expect_big(int64_t n, const std::string& pad) {
    absl::StatusOr<ChanMsg> msg = port_.receiver.recv(kDeadline);
    ASSERT_TRUE(msg.ok()) << msg.status();
    EXPECT_EQ(msg->n, n);
    EXPECT_EQ(msg->pad.size(), pad.size());
    EXPECT_TRUE(msg->pad == pad) << "the payload arrived changed";
  }
  // Sends a payload of `bytes` across `addr` with small frames, then a small one.
  void cross(ChannelAddr addr, size_t bytes) {
    ChannelOptions options;
    options.max_frame_bytes = 64 << 10;  // so the payload is many chunks
    auto server = serve(std::move(addr), options);
    auto client = dial(server->local_addr(), options);
    const std::string pad = pattern(bytes);
    client->post(big(0, pad), sending_);
    post(*client, 1);
    expect_big(0, pad);
    expect_in_order(1, 2);
    wait_unacked(*client, 0);
    expect_nothing_returned();
  }
};

TEST_F(ChannelTransferTest, R_CHAN_3_APayloadPastTheFrameLimitCrossesIpcInChunksIntact) {
  cross(ipc_abstract(), 5 << 20);
}

TEST_F(ChannelTransferTest, R_CHAN_3_APayloadPastTheFrameLimitCrossesTcpInChunksIntact) {
  cross(tcp_any(), 5 << 20);
}

TEST_F(ChannelTransferTest, R_CHAN_3_APayloadOverTheServersMaxMessageBytesFailsAlone) {
  ChannelOptions server_options;
  server_options.max_message_bytes = 1 << 20;  // announced in WELCOME; the client's is 1 GiB
  auto server = serve(ipc_abstract(), server_options);
  auto client = dial(server->local_addr());
  post(*client, 0);
  expect_in_order(0, 1);
  client->post(big(1, pattern(2 << 20)), sending_);
  post(*client, 2);
  const runtime::DeliveryFailure f = next_returned();
  EXPECT_EQ(f.transport, TransportReason::kOversizedFrame) << f.to_string();
  EXPECT_GT(f.len, 2u << 20);
  EXPECT_EQ(f.max, 1u << 20);
  expect_in_order(2, 3);
  EXPECT_FALSE(client->closed());
}

TEST_F(ChannelTransferTest, R_CHAN_4_OtherPairsFlowWhileATransferWaitsAndItsOwnPairWaitsBehindIt) {
  const ChannelAddr addr = ipc_path();
  const std::string path(addr.path());
  boost::asio::io_context ctx;
  LocalAcceptor acceptor(ctx, boost::asio::local::stream_protocol::endpoint(path));
  ChannelOptions options;
  options.chunk_bytes = 16 << 10;
  auto client = dial(addr, options);
  std::optional<RawPeer> fake = accept_within(acceptor);
  ASSERT_TRUE(fake.has_value());
  expect_kind(*fake, v2::Kind::kHello);
  v2::Welcome w = welcome(0);
  w.max_frame_bytes = 32 << 10;  // the window may not be smaller than a frame
  w.transfer_window = 32 << 10;  // two chunks beyond what is acked
  fake->send(w);

  std::unique_ptr<runtime::Client> carol = must(runtime::Client::attach(sending_, "carol"));
  const std::string pad = pattern(1 << 20);
  client->post(big(0, pad), sending_);  // alice → bob: a transfer
  post(*client, 1);                     // alice → bob again: must wait behind it
  client->post(runtime::MessageEnvelope::make(carol->self_addr(), port_.handle.bind().addr(),
                                              wire::Any::make(ChanMsg{2, "x"})),
               sending_);  // carol → bob: another pair, flows at once

  FakeServer server;
  // Without an ACK of its bytes the transfer stops at the window; carol's envelope still comes.
  while (server.data.size() < 2) ASSERT_TRUE(server.read(*fake)) << "carol's envelope never came";
  EXPECT_EQ(server.data[0].seq, 0u);
  const uint64_t total = server.data[0].chunked;  // the serialized message: pad and its framing
  EXPECT_GT(total, pad.size()) << "the first frame registers the transfer";
  EXPECT_EQ(server.data[1].n, 2);
  EXPECT_NE(server.data[1].sender.find("carol"), std::string::npos);
  // Nothing more comes until the server acks: the window is full, alice's small one is held.
  std::optional<RawPeer::Received> early = fake->next(absl::Milliseconds(200));
  while (early && early->kind == v2::Kind::kChunk) {
    server.transfers[0].append(must(v2::decode_chunk(early->body)).bytes);
    early = fake->next(absl::Milliseconds(200));
  }
  EXPECT_FALSE(early.has_value()) << "a frame of kind " << static_cast<int>(early->kind)
                                  << " beyond the window";
  EXPECT_LE(server.transfers[0].size(), 32u << 10);

  // The server takes the bytes as they come: the rest follows, then alice's held envelope.
  size_t acked = 0;
  while (server.data.size() < 3) {
    const size_t held = server.transfers[0].size();
    if (held > acked) {
      fake->send(v2::Ack{2, {{0, held}}});
      acked = held;
    }
    ASSERT_TRUE(server.read(*fake)) << "stalled at " << server.transfers[0].size() << " bytes";
  }
  EXPECT_EQ(server.transfers[0].size(), total);
  EXPECT_EQ(server.data[2].n, 1) << "alice's second envelope comes after her transfer's last chunk";
  EXPECT_EQ(server.data[2].seq, 2u);
  ::unlink(path.c_str());
}

TEST_F(ChannelTransferTest, R_CHAN_2_ATransferResumesWhereTheServerHoldsItAfterAReconnect) {
  const ChannelAddr addr = ipc_path();
  const std::string path(addr.path());
  boost::asio::io_context ctx;
  LocalAcceptor acceptor(ctx, boost::asio::local::stream_protocol::endpoint(path));
  ChannelOptions options;
  options.chunk_bytes = 16 << 10;
  auto client = dial(addr, options);
  std::optional<RawPeer> fake = accept_within(acceptor);
  ASSERT_TRUE(fake.has_value());
  const v2::Hello first = as_hello(expect_kind(*fake, v2::Kind::kHello));
  v2::Welcome w = welcome(0);
  w.max_frame_bytes = 32 << 10;
  w.transfer_window = 32 << 10;
  fake->send(w);
  const std::string pad = pattern(256 << 10);
  client->post(big(0, pad), sending_);
  FakeServer server;
  while (server.transfers[0].size() < (32u << 10)) ASSERT_TRUE(server.read(*fake));
  // The server holds 20 KiB of it (say the rest was lost with the connection) and goes away.
  const uint64_t held = 20 << 10;
  fake->send(v2::Ack{1, {{0, held}}});
  // The client took the ACK when it sends past the old window (held + 32 KiB).
  while (server.transfers[0].size() <= (32u << 10)) ASSERT_TRUE(server.read(*fake));
  EXPECT_EQ(client->unacked(), 1u) << "its DATA is acked; the envelope stays the client's";
  fake->close();
  fake.reset();

  fake = accept_within(acceptor);
  ASSERT_TRUE(fake.has_value());
  const v2::Hello again = as_hello(expect_kind(*fake, v2::Kind::kHello));
  EXPECT_TRUE(again.resuming) << "a registered transfer resumes its session";
  EXPECT_EQ(again.client_session, first.client_session);
  EXPECT_EQ(again.first_unacked_seq, 1u);
  v2::Welcome resumed = welcome(1);
  resumed.max_frame_bytes = 32 << 10;
  resumed.transfer_window = 32 << 10;
  resumed.transfers = {{0, held}};
  fake->send(resumed);
  server.transfers[0].resize(held);
  while (server.transfers[0].size() < server.data[0].chunked) {
    ASSERT_TRUE(server.read(*fake)) << "stalled at " << server.transfers[0].size();
    fake->send(v2::Ack{1, {{0, server.transfers[0].size()}}});
  }
  EXPECT_EQ(server.data.size(), 1u) << "the DATA frame was not sent again";
  wait_unacked(*client, 0);
  expect_nothing_returned();
  ::unlink(path.c_str());
}

TEST_F(ChannelTransferTest, R_CHAN_2_AServerThatDropsConnectionsMidTransferStillGetsItOnce) {
  ChannelOptions options;
  options.max_frame_bytes = 64 << 10;
  auto server = serve(ipc_path(), options);
  auto client = dial(server->local_addr(), options);
  const std::string pad = pattern(8 << 20);
  client->post(big(0, pad), sending_);
  for (int i = 0; i < 3; ++i) {
    test_support::wait_for([&] { return client->unacked() == 1; }, kDeadline);
    server->drop_connections();
  }
  post(*client, 1);
  expect_big(0, pad);
  expect_in_order(1, 2);
  expect_nothing_more();
  expect_nothing_returned();
}

// A DATA frame with flag `chunked` for a raw client.
std::string chunked_data(v2::EnvelopeEncoder& encoder, uint64_t seq, runtime::MessageEnvelope& env) {
  std::string frame;
  v2::put<uint32_t>(frame, 0);
  v2::put<uint8_t>(frame, static_cast<uint8_t>(v2::Kind::kData));
  EXPECT_TRUE(encoder.encode(seq, env, frame, UINT64_MAX, true, /*chunked=*/true).ok());
  const uint32_t length = static_cast<uint32_t>(frame.size() - 4);
  std::memcpy(frame.data(), &length, sizeof(length));
  return frame;
}

TEST_F(ChannelTransferTest, R_CHAN_1_TheServerReassemblesChunksAndAcksTheirProgress) {
  auto server = serve(ipc_path());
  boost::asio::io_context ctx;
  RawPeer peer = connect_raw(ctx, server->local_addr());
  peer.send(hello(93));
  const v2::Welcome w = as_welcome(expect_kind(peer, v2::Kind::kWelcome));
  EXPECT_EQ(w.max_message_bytes, 1ull << 30);
  EXPECT_GE(w.max_transfers, 1u);
  TestSession session;
  EnvelopePtr env = big(5, pattern(100'000));
  const std::string payload(*env->data().bytes());
  peer.send(chunked_data(session.encoder, 0, *env));
  EXPECT_EQ(as_ack(expect_kind(peer, v2::Kind::kAck)).next_expected, 1u);
  for (size_t at = 0; at < payload.size(); at += 30'000) {
    const std::string_view part = std::string_view(payload).substr(at, 30'000);
    peer.send(v2::Chunk{0, at, part});
    const v2::Ack ack = as_ack(expect_kind(peer, v2::Kind::kAck));
    ASSERT_EQ(ack.transfers.size(), 1u);
    EXPECT_EQ(ack.transfers[0].seq, 0u);
    EXPECT_EQ(ack.transfers[0].received, at + part.size());
  }
  expect_big(5, pattern(100'000));
}

TEST_F(ChannelTransferTest, R_CHAN_1_AChunkOutOfPlaceIsAStreamError) {
  auto server = serve(ipc_path());
  boost::asio::io_context ctx;
  {  // a CHUNK of a transfer nobody registered
    RawPeer peer = connect_raw(ctx, server->local_addr());
    peer.send(hello(94));
    expect_kind(peer, v2::Kind::kWelcome);
    peer.send(v2::Chunk{0, 0, "abc"});
    EXPECT_TRUE(peer.closed_within());
  }
  {  // a CHUNK that skips bytes
    RawPeer peer = connect_raw(ctx, server->local_addr());
    peer.send(hello(95));
    expect_kind(peer, v2::Kind::kWelcome);
    TestSession session;
    EnvelopePtr env = big(6, pattern(10'000));
    peer.send(chunked_data(session.encoder, 0, *env));
    peer.send(v2::Chunk{0, 100, "abc"});
    EXPECT_TRUE(peer.closed_within());
  }
  {  // a transfer past the server's max_message_bytes
    ChannelOptions small;
    small.max_message_bytes = 4096;
    auto strict = serve(ipc_path(), small);
    RawPeer peer = connect_raw(ctx, strict->local_addr());
    peer.send(hello(96));
    expect_kind(peer, v2::Kind::kWelcome);
    TestSession session;
    EnvelopePtr env = big(7, pattern(10'000));
    peer.send(chunked_data(session.encoder, 0, *env));
    EXPECT_TRUE(peer.closed_within());
  }
  expect_nothing_more();
}

}  // namespace
}  // namespace postal::routing::channel_test
