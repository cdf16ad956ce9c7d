// Channels over real sockets: order, oversized frames, retransmit, ack timeout, rejects, dial
// errors, inproc (channel_client.h, channel_server.h; R-CHAN-1…4, R-ENV-4).
//
// Two procs in one test process: alice (a Client on the sending proc) posts envelopes through a
// ChannelClient to bob's port on the receiving proc, whose ChannelServer delivers into it.
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <boost/asio/write.hpp>

#include "channel_fixture.h"
#include "le_bytes.h"

namespace postal::routing::channel_test {
namespace {

TEST_F(ChannelTest, R_CHAN_4_IpcPathDeliversInOrder) { deliver_many(ipc_path()); }
TEST_F(ChannelTest, R_CHAN_4_IpcAbstractDeliversInOrder) { deliver_many(ipc_abstract()); }
TEST_F(ChannelTest, R_CHAN_4_TcpDeliversInOrder) { deliver_many(tcp_any()); }
TEST_F(ChannelTest, R_CHAN_4_InprocDeliversInOrder) { deliver_many(ChannelAddr::inproc(0)); }

TEST_F(ChannelTest, R_ENV_4_PayloadIsSerializedOnceOverASocketAndNeverInproc) {
  auto counted = runtime::open_port<CountedMsg>(*bob_);
  auto send_one = [&](ChannelClient& client) {
    client.post(runtime::MessageEnvelope::make(alice_->self_addr(), counted.handle.bind().addr(),
                                               wire::Any::make(CountedMsg{1})),
                sending_);
    ASSERT_TRUE(counted.receiver.recv(kDeadline).ok());
  };
  auto inproc_server = serve(ChannelAddr::inproc(0));
  auto inproc = dial(inproc_server->local_addr());
  counted_serializations = 0;
  send_one(*inproc);
  EXPECT_EQ(counted_serializations.load(), 0);

  auto server = serve(ipc_abstract());
  auto client = dial(server->local_addr());
  counted_serializations = 0;
  send_one(*client);
  EXPECT_EQ(counted_serializations.load(), 2);  // one encode at the sender, one decode at bob
}

TEST_F(ChannelTest, R_CHAN_3_OversizedEnvelopeFailsAloneAndTheNextIsDelivered) {
  ChannelOptions options;
  options.max_frame_bytes = 4096;
  options.max_message_bytes = 4096;  // a larger payload would travel in chunks (§9)
  auto server = serve(ipc_abstract(), options);
  auto client = dial(server->local_addr(), options);
  post(*client, 0);
  post(*client, 1, 10'000);
  post(*client, 2);
  const runtime::DeliveryFailure f = next_returned();
  EXPECT_EQ(f.transport, TransportReason::kOversizedFrame) << f.to_string();
  EXPECT_GT(f.len, 10'000u);
  EXPECT_EQ(f.max, 4096u);
  EXPECT_NE(f.target.find("bob"), std::string::npos) << f.target;
  expect_in_order(0, 1);
  expect_in_order(2, 3);
  EXPECT_FALSE(client->closed());
  post(*client, 3);
  expect_in_order(3, 4);
}

TEST_F(ChannelTest, R_CHAN_2_LostConnectionsRetransmitWithoutLossOrDuplicates) {
  auto server = serve(ipc_path());
  auto client = dial(server->local_addr());
  std::thread poster([&] {
    for (int n = 0; n < kMany; ++n) {
      post(*client, n, 200);
      if (n % 1000 == 500) server->drop_connections();  // mid-stream, frames in flight
    }
  });
  expect_in_order(0, kMany);
  poster.join();
  expect_nothing_more();
  EXPECT_FALSE(client->closed());
}

TEST_F(ChannelTest, R_CHAN_2_ServerThatNeverComesBackReturnsPendingWithAckTimedOut) {
  ChannelOptions options;
  options.delivery_timeout = absl::Milliseconds(300);
  auto server = serve(ipc_path(), options);
  auto client = dial(server->local_addr(), options);
  post(*client, 0);
  expect_in_order(0, 1);
  wait_unacked(*client, 0);  // the ACK follows the delivery
  server->vanish();  // killed: no GOODBYE (that would return everything at once)
  server.reset();

  const absl::Time start = absl::Now();
  for (int n = 1; n <= 5; ++n) post(*client, n);
  for (int n = 1; n <= 5; ++n) {
    const runtime::DeliveryFailure f = next_returned();
    EXPECT_EQ(f.transport, TransportReason::kAckTimedOut) << f.to_string();
    EXPECT_FALSE(f.maybe_delivered) << "posted after the server vanished, never written";
  }
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(250));
  EXPECT_LT(took, absl::Seconds(5));
  EXPECT_TRUE(client->closed());
  EXPECT_FALSE(client->rejected());
  EXPECT_EQ(client->status().code(), absl::StatusCode::kDeadlineExceeded);

  post(*client, 6);  // a closed channel fails at once
  EXPECT_EQ(next_returned().transport, TransportReason::kChannelClosed);
}

TEST_F(ChannelTest, R_CHAN_2_AfterServerRestartUnwrittenEnvelopesGoOutOnAFreshSession) {
  const ChannelAddr addr = ipc_path();
  auto server = serve(addr);
  auto client = dial(addr);
  for (int n = 0; n < 3; ++n) post(*client, n);
  expect_in_order(0, 3);
  wait_unacked(*client, 0);  // the acks follow the deliveries

  server->vanish();  // killed (no GOODBYE), then restarted:
  server.reset();
  server = serve(addr);                          // same address, no memory of the session
  for (int n = 3; n < 6; ++n) post(*client, n);  // never written to the dead server
  expect_in_order(3, 6);
  wait_unacked(*client, 0);
  expect_nothing_returned();
  expect_nothing_more();
  EXPECT_FALSE(client->closed());
  EXPECT_FALSE(client->rejected());
  EXPECT_TRUE(client->status().ok()) << client->status();

  server->vanish();  // and again, with the new session
  server.reset();
  server = serve(addr);
  post(*client, 6);
  expect_in_order(6, 7);
  expect_nothing_returned();
  EXPECT_FALSE(client->closed());
}

TEST_F(ChannelTest, R_CHAN_1_DuplicateSeqIsDroppedAndGapIsRejected) {
  auto server = serve(ipc_path());
  boost::asio::io_context ctx;
  RawPeer peer = connect_raw(ctx, server->local_addr());
  peer.send(hello(77));
  EXPECT_EQ(as_welcome(expect_kind(peer, v2::Kind::kWelcome)).next_expected, 0u);

  TestSession session;  // frames encoded in order: the first defines the dictionary entries
  std::string frames = session.data(0, *envelope(0));
  frames += session.data(0, *envelope(100));
  frames += session.data(1, *envelope(1));
  peer.send(frames);
  expect_in_order(0, 2);  // seq 0 once; its retransmit (n = 100) dropped
  uint64_t acked = 0;
  while (acked < 2) acked = as_ack(expect_kind(peer, v2::Kind::kAck)).next_expected;
  EXPECT_EQ(acked, 2u);

  peer.send(session.data(5, *envelope(5)));  // a gap: the server closes the connection
  while (std::optional<RawPeer::Received> f = peer.next()) EXPECT_EQ(f->kind, v2::Kind::kAck);
  expect_nothing_more();

  // The session survives its connection: a resuming reconnect continues at 2.
  RawPeer again = connect_raw(ctx, server->local_addr());
  again.send(hello(77, /*resuming=*/true, 2));
  EXPECT_EQ(as_welcome(expect_kind(again, v2::Kind::kWelcome)).next_expected, 2u);

  // An unknown session that resumes belongs to a server that restarted (§4.2).
  RawPeer stranger = connect_raw(ctx, server->local_addr());
  stranger.send(hello(78, /*resuming=*/true, 5));
  const v2::Reject reject = as_reject(expect_kind(stranger, v2::Kind::kReject));
  EXPECT_EQ(reject.code, static_cast<uint16_t>(v2::RejectCode::kSessionUnknown));
  EXPECT_NE(reject.text.find("restarted"), std::string::npos) << reject.text;

  // A known session presented as new is a malformed HELLO: a new session needs a new id.
  RawPeer reuse = connect_raw(ctx, server->local_addr());
  reuse.send(hello(77));
  EXPECT_EQ(as_reject(expect_kind(reuse, v2::Kind::kReject)).code,
            static_cast<uint16_t>(v2::RejectCode::kBadHello));
}

TEST_F(ChannelTest, R_CHAN_1_AProtocolErrorAcksTheFramesDeliveredBeforeIt) {
  auto server = serve(ipc_path());
  boost::asio::io_context ctx;
  RawPeer peer = connect_raw(ctx, server->local_addr());
  peer.send(hello(79));
  expect_kind(peer, v2::Kind::kWelcome);
  // One write: two good frames, then a gap. The two are enqueued; the gap ends the connection.
  TestSession session;
  std::string frames = session.data(0, *envelope(0));
  frames += session.data(1, *envelope(1));
  frames += session.data(5, *envelope(5));
  peer.send(frames);
  expect_in_order(0, 2);
  uint64_t acked = 0;
  while (std::optional<RawPeer::Received> f = peer.next()) {  // until the server closes
    ASSERT_EQ(f->kind, v2::Kind::kAck);
    acked = as_ack(*f).next_expected;
  }
  EXPECT_EQ(acked, 2u) << "the frames before the error were delivered, so they are acked";
  expect_nothing_more();
}

TEST_F(ChannelTest, R_CHAN_1_ServerRejectsAnotherWireVersionNamingBoth) {
  auto server = serve(ipc_path());
  boost::asio::io_context ctx;
  // A version 1 HELLO: u16 version, u64 session, u64 first unacked seq (docs/wire-v1.md).
  RawPeer peer = connect_raw(ctx, server->local_addr());
  std::string v1_hello;
  v2::put<uint32_t>(v1_hello, 19);
  v2::put<uint8_t>(v1_hello, 1);
  v2::put<uint16_t>(v1_hello, 1);
  v2::put<uint64_t>(v1_hello, 1);
  v2::put<uint64_t>(v1_hello, 0);
  peer.send(v1_hello);
  const RawPeer::Received f = expect_kind(peer, v2::Kind::kReject);
  // The frozen layout, which a version 1 peer reads: u16 version, then the text.
  uint16_t version = 0;
  ASSERT_GE(f.body.size(), 2u);
  std::memcpy(&version, f.body.data(), 2);
  EXPECT_EQ(version, v2::kVersion);
  const std::string reason = f.body.substr(2);
  EXPECT_NE(reason.find("version 1"), std::string::npos) << reason;
  EXPECT_NE(reason.find("version 2"), std::string::npos) << reason;
  EXPECT_TRUE(peer.closed_within());
}

TEST_F(ChannelTest, R_CHAN_1_ClientRejectedForItsVersionReturnsEnvelopesWithTheReason) {
  // A server of another wire version (played by a raw acceptor) turns the client away.
  const ChannelAddr addr = ipc_path();
  boost::asio::io_context ctx;
  boost::asio::local::stream_protocol::acceptor acceptor(
      ctx, boost::asio::local::stream_protocol::endpoint(std::string(addr.path())));
  std::thread fake_server([&] {
    RawPeer peer(acceptor.accept());
    ASSERT_TRUE(peer.next().has_value());  // the HELLO
    v2::Reject reject;                      // the frozen layout: no code
    reject.version = 3;
    reject.text = "wire version mismatch: client speaks 2, server 3";
    peer.send(reject);
    peer.next();  // until the client hangs up
  });
  auto client = dial(addr);
  post(*client, 0);
  const runtime::DeliveryFailure f = next_returned();
  fake_server.join();
  ::unlink(std::string(addr.path()).c_str());
  EXPECT_EQ(f.transport, TransportReason::kChannelClosed);
  EXPECT_NE(f.detail.find("version mismatch"), std::string::npos) << f.to_string();
  EXPECT_TRUE(client->rejected());
  EXPECT_EQ(client->status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ChannelTest, R_CHAN_2_WrittenButUnackedEnvelopesReturnChannelClosedAfterRestart) {
  // A fake server acks seq 0, then holds the acks of 1 and 2 and dies.
  const ChannelAddr addr = ipc_path();
  const std::string path(addr.path());
  boost::asio::io_context ctx;
  auto acceptor =
      std::make_unique<LocalAcceptor>(ctx, boost::asio::local::stream_protocol::endpoint(path));
  auto client = dial(addr);
  std::optional<RawPeer> fake = accept_within(*acceptor);
  ASSERT_TRUE(fake.has_value());
  const v2::Hello first = as_hello(expect_kind(*fake, v2::Kind::kHello));
  EXPECT_EQ(first.first_unacked_seq, 0u);
  EXPECT_FALSE(first.resuming);
  fake->send(welcome(0));
  TestDecoder decoder;
  post(*client, 0);
  EXPECT_EQ(decoder.next(*fake).seq, 0u);
  fake->send(v2::Ack{1, {}});
  wait_unacked(*client, 0);
  post(*client, 1);
  post(*client, 2);
  EXPECT_EQ(decoder.next(*fake).seq, 1u);  // written, never acked
  EXPECT_EQ(decoder.next(*fake).seq, 2u);
  acceptor.reset();  // the server dies: first its listener, then the connection
  fake->close();
  ::unlink(path.c_str());

  post(*client, 3);  // never written: there is no server
  post(*client, 4);
  auto server = serve(addr);  // a real server with no memory of the session rejects it
  for (int64_t n = 1; n <= 2; ++n) {
    const auto [returned, f] = next_returned_n();
    EXPECT_EQ(returned, n);
    EXPECT_EQ(f.transport, TransportReason::kChannelClosed) << f.to_string();
    EXPECT_NE(f.detail.find("restarted"), std::string::npos) << f.to_string();  // the server's
    EXPECT_NE(f.target.find("bob"), std::string::npos) << f.target;
  }
  expect_in_order(3, 5);  // on a fresh session, in order
  post(*client, 5);
  expect_in_order(5, 6);
  wait_unacked(*client, 0);
  expect_nothing_returned();
  expect_nothing_more();
  EXPECT_FALSE(client->closed());
  EXPECT_FALSE(client->rejected());
  EXPECT_TRUE(client->status().ok()) << client->status();
}

TEST_F(ChannelTest, R_CHAN_2_WrittenNeverAckedThenRestartIsNotDeliveredTwice) {
  // Version 1's duplicate edge (docs/wire.md §4.2): frames written, no ACK ever, the server
  // restarts. The client resumes (it has something outstanding), the restarted server does not
  // know the session, and the frames come back once — they are not retransmitted into a
  // WELCOME{0} of a server that may already have delivered them.
  const ChannelAddr addr = ipc_path();
  const std::string path(addr.path());
  boost::asio::io_context ctx;
  auto acceptor =
      std::make_unique<LocalAcceptor>(ctx, boost::asio::local::stream_protocol::endpoint(path));
  auto client = dial(addr);
  std::optional<RawPeer> fake = accept_within(*acceptor);
  ASSERT_TRUE(fake.has_value());
  expect_kind(*fake, v2::Kind::kHello);
  fake->send(welcome(0));
  TestDecoder decoder;
  post(*client, 0);
  post(*client, 1);
  EXPECT_EQ(decoder.next(*fake).seq, 0u);
  EXPECT_EQ(decoder.next(*fake).seq, 1u);
  acceptor.reset();
  fake->close();
  ::unlink(path.c_str());

  auto server = serve(addr);
  for (int64_t n = 0; n <= 1; ++n) {
    const auto [returned, f] = next_returned_n();
    EXPECT_EQ(returned, n);
    EXPECT_EQ(f.transport, TransportReason::kChannelClosed) << f.to_string();
  }
  post(*client, 2);
  expect_in_order(2, 3);  // 0 and 1 never arrive a second time
  expect_nothing_more();
  EXPECT_FALSE(client->closed());
}

TEST_F(ChannelTest, R_CHAN_2_ReconnectWithNothingUnackedPresentsANewSession) {
  const ChannelAddr addr = ipc_path();
  const std::string path(addr.path());
  boost::asio::io_context ctx;
  LocalAcceptor acceptor(ctx, boost::asio::local::stream_protocol::endpoint(path));
  auto client = dial(addr);
  std::optional<RawPeer> first = accept_within(acceptor);
  ASSERT_TRUE(first.has_value());
  const v2::Hello hello1 = as_hello(expect_kind(*first, v2::Kind::kHello));
  first->send(welcome(0));
  TestDecoder decoder;
  for (int n = 0; n < 2; ++n) post(*client, n);
  for (uint64_t seq = 0; seq < 2; ++seq) EXPECT_EQ(decoder.next(*first).seq, seq);
  first->send(v2::Ack{2, {}});
  wait_unacked(*client, 0);
  first->close();  // the connection (or the whole server) goes away with nothing unacked

  post(*client, 2);
  std::optional<RawPeer> second = accept_within(acceptor);
  ASSERT_TRUE(second.has_value());
  const v2::Hello again = as_hello(expect_kind(*second, v2::Kind::kHello));
  EXPECT_NE(again.client_session, hello1.client_session);  // a new session, not a REJECT bait
  EXPECT_NE(again.client_session, 0u);
  EXPECT_FALSE(again.resuming);
  EXPECT_EQ(again.first_unacked_seq, 0u);
  second->send(welcome(0));
  TestDecoder fresh;  // a new session has a new dictionary
  const SeenData data = fresh.next(*second);
  EXPECT_EQ(data.seq, 0u);  // renumbered from 0
  EXPECT_EQ(data.n, 2);
  second->send(v2::Ack{1, {}});
  wait_unacked(*client, 0);
  expect_nothing_returned();
  EXPECT_FALSE(client->closed());
  ::unlink(path.c_str());
}

TEST_F(ChannelTest, R_CHAN_2_RejectOfABrandNewSessionClosesTheChannel) {
  // Nothing of the session can be lost, so a REJECT means something a new session cannot fix.
  const ChannelAddr addr = ipc_path();
  const std::string path(addr.path());
  boost::asio::io_context ctx;
  LocalAcceptor acceptor(ctx, boost::asio::local::stream_protocol::endpoint(path));
  auto client = dial(addr);
  std::optional<RawPeer> fake = accept_within(acceptor);
  ASSERT_TRUE(fake.has_value());
  EXPECT_EQ(as_hello(expect_kind(*fake, v2::Kind::kHello)).first_unacked_seq, 0u);
  post(*client, 0);
  v2::Reject reject;
  reject.code = static_cast<uint16_t>(v2::RejectCode::kBadHello);
  reject.text = "no sessions today";
  fake->send(reject);
  const runtime::DeliveryFailure f = next_returned();
  EXPECT_EQ(f.transport, TransportReason::kChannelClosed);
  EXPECT_NE(f.detail.find("no sessions today"), std::string::npos) << f.to_string();
  EXPECT_TRUE(client->closed());
  EXPECT_TRUE(client->rejected());
  EXPECT_EQ(client->status().code(), absl::StatusCode::kFailedPrecondition);
  ::unlink(path.c_str());
}

TEST_F(ChannelTest, R_CHAN_2_GoodbyeServerStoppingReturnsEverythingAtOnce) {
  const ChannelAddr addr = ipc_path();
  const std::string path(addr.path());
  boost::asio::io_context ctx;
  LocalAcceptor acceptor(ctx, boost::asio::local::stream_protocol::endpoint(path));
  ChannelOptions options;
  options.delivery_timeout = absl::Seconds(60);  // far: the GOODBYE, not a timer, returns them
  auto client = dial(addr, options);
  std::optional<RawPeer> fake = accept_within(acceptor);
  ASSERT_TRUE(fake.has_value());
  expect_kind(*fake, v2::Kind::kHello);
  fake->send(welcome(0));
  TestDecoder decoder;
  for (int n = 0; n < 3; ++n) post(*client, n);
  for (uint64_t seq = 0; seq < 3; ++seq) EXPECT_EQ(decoder.next(*fake).seq, seq);
  // The server processed seq 0 and stops: GOODBYE carries the final ACK.
  fake->send(v2::Goodbye{static_cast<uint16_t>(v2::GoodbyeCode::kServerStopping), 1, {},
                         "shutting down for maintenance"});
  for (int64_t n = 1; n <= 2; ++n) {
    const auto [returned, f] = next_returned_n();
    EXPECT_EQ(returned, n);
    EXPECT_EQ(f.transport, TransportReason::kChannelClosed) << f.to_string();
    EXPECT_NE(f.detail.find("maintenance"), std::string::npos) << f.to_string();
  }
  EXPECT_TRUE(client->closed());
  expect_nothing_returned();
  ::unlink(path.c_str());
}

TEST_F(ChannelTest, R_CHAN_2_AClosingClientSaysGoodbyeAndTheServerForgetsTheSession) {
  auto server = serve(ipc_path());
  auto client = dial(server->local_addr());
  post(*client, 0);
  expect_in_order(0, 1);
  wait_unacked(*client, 0);
  client->close();
  test_support::wait_for([&] { return server->stats().connections == 0; }, kDeadline);
  EXPECT_EQ(server->stats().connections, 0u);
}
TEST_F(ChannelTest, R_CHAN_2_ASessionWithoutAConnectionIsForgottenAfterTheLinger) {
  ChannelOptions options;
  options.session_linger = absl::Milliseconds(100);
  auto server = serve(ipc_path(), options);
  boost::asio::io_context ctx;
  {
    RawPeer peer = connect_raw(ctx, server->local_addr());
    peer.send(hello(91));
    expect_kind(peer, v2::Kind::kWelcome);
    TestSession session;
    peer.send(session.data(0, *envelope(0)));
    expect_in_order(0, 1);
    EXPECT_EQ(server->stats().sessions, 1u);
  }  // the connection goes; the session lingers, then is forgotten
  test_support::wait_for([&] { return server->stats().sessions == 0; }, kDeadline);
  EXPECT_EQ(server->stats().sessions, 0u);
  EXPECT_EQ(server->stats().sessions_forgotten, 1u);
  // Forgetting is safe: resuming it is refused as unknown, so the client returns what it wrote.
  RawPeer again = connect_raw(ctx, server->local_addr());
  again.send(hello(91, /*resuming=*/true, 0));
  EXPECT_EQ(as_reject(expect_kind(again, v2::Kind::kReject)).code,
            static_cast<uint16_t>(v2::RejectCode::kSessionUnknown));
}

TEST_F(ChannelTest, R_CHAN_2_PastMaxSessionsTheLongestUnconnectedAreForgotten) {
  ChannelOptions options;
  options.max_sessions = 2;
  auto server = serve(ipc_path(), options);
  boost::asio::io_context ctx;
  for (uint64_t id = 1; id <= 4; ++id) {  // each connects, is welcomed, and goes away
    {
      RawPeer peer = connect_raw(ctx, server->local_addr());
      peer.send(hello(id));
      expect_kind(peer, v2::Kind::kWelcome);
    }
    // The server saw it go.
    test_support::wait_for([&] { return server->stats().connections == 0; }, kDeadline);
  }
  RawPeer live = connect_raw(ctx, server->local_addr());
  live.send(hello(5));
  expect_kind(live, v2::Kind::kWelcome);
  EXPECT_LE(server->stats().sessions, 2u);
  EXPECT_GE(server->stats().sessions_forgotten, 3u);
  // The connected session is never the one forgotten.
  TestSession session;
  live.send(session.data(0, *envelope(7)));
  expect_in_order(7, 8);
}

TEST_F(ChannelTest, DialToNothingIsUnavailableNamingTheAddressAndTheOsError) {
  const ChannelAddr missing = ipc_path();
  absl::StatusOr<std::unique_ptr<ChannelClient>> c = ChannelClient::dial(io_, missing, sending_);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("dial " + missing.to_string()), std::string::npos);
  EXPECT_NE(c.status().message().find("(ENOENT)"), std::string::npos) << c.status();

  const ChannelAddr closed_port = [&] {  // a port that was free a moment ago
    auto s = serve(tcp_any());
    return s->local_addr();
  }();
  c = ChannelClient::dial(io_, closed_port, sending_);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("connection refused (ECONNREFUSED)"), std::string::npos)
      << c.status();

  c = ChannelClient::dial(io_, ChannelAddr::inproc(987654321), sending_);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("inproc://987654321"), std::string::npos) << c.status();
}

TEST_F(ChannelTest, IpcServeRemovesAStaleSocketFileButNotARegularFile) {
  const ChannelAddr addr = ipc_path();
  const std::string path(addr.path());
  {
    boost::asio::io_context ctx;
    boost::asio::local::stream_protocol::acceptor stale(
        ctx, boost::asio::local::stream_protocol::endpoint(path));
  }  // closed without unlinking: what a crashed server leaves
  auto server = serve(addr);
  auto client = dial(addr);
  post(*client, 0);
  expect_in_order(0, 1);

  absl::StatusOr<std::unique_ptr<ChannelServer>> twice =
      ChannelServer::serve(io_, addr, receiving_, receiving_);
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kFailedPrecondition) << twice.status();

  const ChannelAddr file = ipc_path();
  std::ofstream(std::string(file.path())) << "not a socket";
  absl::StatusOr<std::unique_ptr<ChannelServer>> s =
      ChannelServer::serve(io_, file, receiving_, receiving_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
  ::unlink(std::string(file.path()).c_str());
}

TEST_F(ChannelTest, InprocNumbersAreUniqueAndAGoneServerClosesItsClients) {
  auto server = serve(ChannelAddr::inproc(0));
  EXPECT_NE(server->local_addr().number(), 0u);
  absl::StatusOr<std::unique_ptr<ChannelServer>> taken =
      ChannelServer::serve(io_, server->local_addr(), receiving_, receiving_);
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kAlreadyExists);

  auto client = dial(server->local_addr());
  post(*client, 0);
  expect_in_order(0, 1);
  server.reset();
  EXPECT_TRUE(client->closed());
  post(*client, 1);
  EXPECT_EQ(next_returned().transport, TransportReason::kChannelClosed);
}

TEST_F(ChannelTest, ClosingAClientReturnsPendingAndFailsLaterPosts) {
  auto server = serve(ipc_abstract());
  auto client = dial(server->local_addr());
  client->close();
  EXPECT_TRUE(client->closed());
  EXPECT_EQ(client->status().code(), absl::StatusCode::kCancelled);
  post(*client, 0);
  EXPECT_EQ(next_returned().transport, TransportReason::kChannelClosed);
}

}  // namespace
}  // namespace postal::routing::channel_test
