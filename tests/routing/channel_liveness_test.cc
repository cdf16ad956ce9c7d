// Liveness of a channel, in one test process over real sockets (channel_fixture.h): a stopping
// server says GOODBYE `server_stopping` and its client returns everything pending at once
// (R-CHAN-2, docs/wire.md §11), and heartbeats — PING/PONG, a silent peer closed by the server or
// declared dead by the client (R-FLOW-4, §10.2). topology_liveness_test.cc does the same with
// real `postal proc` children stopped by SIGTERM and SIGSTOP.
#include <set>

#include "channel_fixture.h"
#include "postal/routing/dial_router.h"

namespace postal::routing::channel_test {
namespace {

// The receiving proc behind a consumer that takes `per_envelope` for each envelope, on the
// server's I/O thread: a slow proc, so that the client holds unacked envelopes for a while.
class SlowDelivery final : public runtime::MailboxSender {
 public:
  SlowDelivery(runtime::MailboxSender& to, absl::Duration per_envelope)
      : to_(to), per_envelope_(per_envelope) {}
  void post_unchecked(EnvelopePtr env, runtime::ReturnHandle& ret) override {
    absl::SleepFor(per_envelope_);  // the consumer's work, not a wait for an event
    to_.post_unchecked(std::move(env), ret);
  }

 private:
  runtime::MailboxSender& to_;
  const absl::Duration per_envelope_;
};

v2::Hello hello_with_heartbeat(uint64_t session) {
  v2::Hello h = hello(session);
  h.features = v2::kFeatureHeartbeat;
  return h;
}

std::string ping_frame(uint64_t token) {
  std::string f;
  v2::append_ping(f, v2::Ping{token});
  return f;
}

// R-CHAN-2: the server's stop returns what its client had pending at once — exactly the
// envelopes the GOODBYE's final ACK does not cover, as ChannelClosed "the server stopped", long
// before the 60 s delivery timeout — and the stop does not linger once the client hung up. The
// dial router evicts the closed client; the next post redials a server restarted on the address.
TEST_F(ChannelTest, R_CHAN_2_AStoppingServerSaysGoodbyeAndEveryPendingEnvelopeReturnsAtOnce) {
  const ChannelAddr addr = ipc_path();
  ChannelOptions options;
  options.delivery_timeout = absl::Seconds(60);
  SlowDelivery slow(receiving_, absl::Microseconds(200));
  auto server = must(ChannelServer::serve(io_, addr, slow, receiving_, options));
  DialRouter router(io_, sending_, options);
  auto routed = [&](int64_t n, size_t pad) {  // to bob's port, routed to `addr` by its location
    EnvelopePtr env = envelope(n, pad);
    runtime::PortAddr dest = env->dest();
    dest.location = runtime::Location::addr(addr);
    return runtime::MessageEnvelope::make(alice_->self_addr(), std::move(dest),
                                          wire::Any::make(ChanMsg{n, std::string(pad, 'x')}));
  };
  constexpr int64_t kPosted = 3000;
  for (int64_t n = 0; n < kPosted; ++n) router.post(routed(n, 3000), sending_);
  expect_in_order(0, 100);

  const absl::Time stop = absl::Now();
  server.reset();
  const absl::Duration stop_took = absl::Now() - stop;
  EXPECT_LT(stop_took, absl::Seconds(2)) << "the stop waited for a client that had hung up";
  // What was delivered before the GOODBYE, in order; everything after it comes back, once.
  int64_t delivered = 100;
  for (;;) {
    absl::StatusOr<ChanMsg> msg = port_.receiver.recv(absl::Milliseconds(100));
    if (!msg.ok()) break;
    ASSERT_EQ(msg->n, delivered);
    ++delivered;
  }
  ASSERT_LT(delivered, kPosted) << "nothing was pending when the server stopped";
  std::set<int64_t> returned;
  while (static_cast<int64_t>(returned.size()) < kPosted - delivered) {
    const auto [n, f] = next_returned_n();
    ASSERT_GE(n, delivered) << "a delivered envelope came back";
    EXPECT_TRUE(returned.insert(n).second) << n << " came back twice";
    EXPECT_EQ(f.transport, TransportReason::kChannelClosed) << f.to_string();
    EXPECT_NE(f.detail.find("the server stopped"), std::string::npos) << f.to_string();
    EXPECT_EQ(f.detail.find("may or may not"), std::string::npos) << f.to_string();
    EXPECT_FALSE(f.maybe_delivered) << "past the final ACK: not delivered, " << f.to_string();
  }
  EXPECT_LT(absl::Now() - stop, absl::Seconds(5)) << "returned by a timer, not the GOODBYE";
  expect_nothing_returned();

  auto restarted = serve(addr);
  router.post(routed(kPosted, 0), sending_);
  expect_in_order(kPosted, kPosted + 1);
  EXPECT_EQ(router.dials(), 2u);  // the closed client was evicted and the address redialed
}

// §10.2: a PING is answered with a PONG carrying its token.
TEST_F(ChannelTest, R_FLOW_4_TheServerAnswersAPingWithAPongOfTheSameToken) {
  ChannelOptions options;
  options.heartbeat_interval = absl::Seconds(10);  // no PING of its own in the way
  options.heartbeat_timeout = absl::Seconds(30);
  auto server = serve(ipc_path(), options);
  boost::asio::io_context ctx;
  RawPeer peer = connect_raw(ctx, server->local_addr());
  peer.send(hello_with_heartbeat(301));
  EXPECT_EQ(as_welcome(expect_kind(peer, v2::Kind::kWelcome)).features, v2::kFeatureHeartbeat);
  peer.send(ping_frame(0xfeedbeef));
  EXPECT_EQ(must(v2::decode_ping(expect_kind(peer, v2::Kind::kPong).body)).token, 0xfeedbeefu);
}

// R-FLOW-4: a peer with heartbeats that completes the handshake and then sends nothing — not
// even a PONG to the server's PINGs — is closed after heartbeat_timeout, with GOODBYE `idle`;
// its session stays (§11), so a reconnect resumes it.
TEST_F(ChannelTest, R_FLOW_4_APeerThatGoesSilentIsClosedAfterTheHeartbeatTimeoutItsSessionStays) {
  ChannelOptions options;
  options.heartbeat_interval = absl::Milliseconds(50);
  options.heartbeat_timeout = absl::Milliseconds(300);
  auto server = serve(ipc_path(), options);
  boost::asio::io_context ctx;
  RawPeer peer = connect_raw(ctx, server->local_addr());
  // The HELLO is the last thing the peer sends: the server's silence clock starts on its receipt,
  // so from before the send the close is at least heartbeat_timeout away (from after the
  // WELCOME it measured 298 ms on a loaded machine).
  const absl::Time silent = absl::Now();
  peer.send(hello_with_heartbeat(302));
  expect_kind(peer, v2::Kind::kWelcome);
  int pings = 0;
  std::optional<v2::Goodbye> goodbye;
  while (std::optional<RawPeer::Received> f = peer.next(absl::Seconds(5))) {
    if (f->kind == v2::Kind::kPing) ++pings;
    if (f->kind == v2::Kind::kGoodbye) goodbye = must(v2::decode_goodbye(f->body));
  }
  const absl::Duration closed_after = absl::Now() - silent;
  EXPECT_TRUE(peer.closed_within(absl::Seconds(1)));
  EXPECT_GE(pings, 2) << "the server pings a connection it wrote nothing to";
  ASSERT_TRUE(goodbye.has_value());
  EXPECT_EQ(goodbye->code, static_cast<uint16_t>(v2::GoodbyeCode::kIdle));
  EXPECT_GE(closed_after, absl::Milliseconds(300));
  EXPECT_LT(closed_after, absl::Seconds(2));
  test_support::wait_for([&] { return server->stats().connections == 0; }, kDeadline);
  EXPECT_EQ(server->stats().closed_heartbeat_timeout, 1u);
  EXPECT_EQ(server->stats().sessions, 1u);
  RawPeer again = connect_raw(ctx, server->local_addr());
  v2::Hello resume = hello_with_heartbeat(302);
  resume.resuming = true;
  again.send(resume);
  EXPECT_EQ(as_welcome(expect_kind(again, v2::Kind::kWelcome)).features, v2::kFeatureHeartbeat);
}

// R-FLOW-4: a peer that does not offer the feature (an older or raw peer) keeps working as
// before: no PING is sent to it and it is not closed for being quiet; a PING from it is a stream
// error (§10: feature frames without the feature).
TEST_F(ChannelTest, R_FLOW_4_APeerWithoutTheFeatureGetsNoPingAndIsNotTimedOut) {
  ChannelOptions options;
  options.heartbeat_interval = absl::Milliseconds(20);
  options.heartbeat_timeout = absl::Milliseconds(100);
  auto server = serve(ipc_path(), options);
  boost::asio::io_context ctx;
  RawPeer peer = connect_raw(ctx, server->local_addr());
  peer.send(hello(303));
  EXPECT_EQ(as_welcome(expect_kind(peer, v2::Kind::kWelcome)).features, 0u);
  EXPECT_FALSE(peer.next(absl::Milliseconds(500)).has_value()) << "a frame it did not ask for";
  EXPECT_EQ(server->stats().connections, 1u);
  EXPECT_EQ(server->stats().closed_heartbeat_timeout, 0u);
  peer.send(ping_frame(1));
  EXPECT_TRUE(peer.closed_within(kDeadline));
}

// R-FLOW-4 on the client: it offers the feature, pings a server it wrote nothing to, answers the
// server's PING with its token, and declares a server that goes silent dead within
// heartbeat_timeout (not the 60 s delivery timeout) — then reconnects and resumes the session,
// the unacked envelope still pending, not returned (R-CHAN-2).
TEST_F(ChannelTest, R_FLOW_4_TheClientPingsAnswersAndDeclaresASilentServerDeadThenResumes) {
  const ChannelAddr addr = ipc_path();
  const std::string path(addr.path());
  boost::asio::io_context ctx;
  LocalAcceptor acceptor(ctx, boost::asio::local::stream_protocol::endpoint(path));
  ChannelOptions options;
  options.heartbeat_interval = absl::Milliseconds(50);
  options.heartbeat_timeout = absl::Milliseconds(300);
  options.delivery_timeout = absl::Seconds(60);
  auto client = dial(addr, options);
  std::optional<RawPeer> fake = accept_within(acceptor);
  ASSERT_TRUE(fake.has_value());
  const v2::Hello first = as_hello(expect_kind(*fake, v2::Kind::kHello));
  EXPECT_EQ(first.features & v2::kFeatureHeartbeat, v2::kFeatureHeartbeat);
  v2::Welcome w = welcome(0);
  w.features = v2::kFeatureHeartbeat;
  fake->send(w);
  expect_kind(*fake, v2::Kind::kPing);  // idle: it has written nothing since the HELLO
  fake->send(ping_frame(7));
  std::optional<RawPeer::Received> f;
  do {
    f = fake->next();
  } while (f && f->kind == v2::Kind::kPing);
  ASSERT_TRUE(f && f->kind == v2::Kind::kPong);
  EXPECT_EQ(must(v2::decode_ping(f->body)).token, 7u);
  EXPECT_TRUE(client->liveness().heartbeat);

  // From now on the fake reads but never answers: the envelope stays unacked.
  post(*client, 0);
  do {
    f = fake->next();
  } while (f && f->kind == v2::Kind::kPing);
  ASSERT_TRUE(f && f->kind == v2::Kind::kData);
  const absl::Time silent = absl::Now();
  ASSERT_TRUE(test_support::wait_for([&] { return client->liveness().peer_dead; },
                                     absl::Seconds(5)));
  const absl::Duration detected = absl::Now() - silent;
  EXPECT_LT(detected, absl::Seconds(1)) << "not within heartbeat_timeout + an interval";
  EXPECT_EQ(client->liveness().deaths, 1u);
  EXPECT_FALSE(client->closed());
  EXPECT_EQ(client->unacked(), 1u);

  std::optional<RawPeer> again = accept_within(acceptor);
  ASSERT_TRUE(again.has_value());
  const v2::Hello resume = as_hello(expect_kind(*again, v2::Kind::kHello));
  EXPECT_TRUE(resume.resuming);
  EXPECT_EQ(resume.client_session, first.client_session);
  v2::Welcome w1 = welcome(1);  // the envelope was enqueued; only its ACK was lost
  w1.features = v2::kFeatureHeartbeat;
  again->send(w1);
  wait_unacked(*client, 0);
  EXPECT_TRUE(test_support::wait_for([&] { return !client->liveness().peer_dead; }, kDeadline));
  expect_nothing_returned();
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace postal::routing::channel_test
