// nats:// channels (routing/src/nats_tunnel.h) through a real nats-server started by each test:
// order, retransmit after lost connections, returns (AckTimedOut, ChannelClosed, OversizedFrame)
// exactly as over ipc and tcp, a payload larger than the server's max_payload, a dial to a
// subject nobody serves, and nats-server itself killed -9 mid-traffic and restarted.
#include <cerrno>
#include <memory>
#include <string>
#include <thread>

#include "channel_fixture.h"
#include "support/nats_server.h"
#include "support/scratch_dir.h"

namespace postal::routing::channel_test {
namespace {

using test_support::NatsServer;

class NatsChannelTest : public ChannelTest {
 protected:
  void SetUp() override {
    ASSERT_FALSE(NatsServer::binary().empty()) << NatsServer::kMissing;
    nats_ = std::make_unique<NatsServer>(scratch_.path() / "nats");
    ASSERT_TRUE(nats_->ready()) << nats_->log();
  }
  ChannelAddr nats_addr(std::string_view subject = "postal.test.bob") const {
    return must(ChannelAddr::nats("127.0.0.1", static_cast<uint16_t>(nats_->port()), subject));
  }

  test_support::ScratchDir scratch_;
  std::unique_ptr<NatsServer> nats_;
};

TEST_F(NatsChannelTest, AddressesParseAndPrintRoundTripAndBadSubjectsAreRefused) {
  const ChannelAddr a = must(ChannelAddr::parse("nats://127.0.0.1:4222/shop.orders-1"));
  EXPECT_EQ(a.transport(), ChannelAddr::Transport::kNats);
  EXPECT_EQ(a.host(), "127.0.0.1");
  EXPECT_EQ(a.port(), 4222);
  EXPECT_EQ(a.subject(), "shop.orders-1");
  EXPECT_EQ(a.to_string(), "nats://127.0.0.1:4222/shop.orders-1");
  for (const char* bad : {"nats://127.0.0.1:4222", "nats://127.0.0.1:4222/", "nats://h:1/a..b",
                          "nats://h:1/a.*", "nats://h:1/a.>", "nats://h:1/a b", "nats://h/x"}) {
    EXPECT_FALSE(ChannelAddr::parse(bad).ok()) << bad;
  }
}

TEST_F(NatsChannelTest, R_CHAN_4_NatsDeliversInOrder) { deliver_many(nats_addr()); }

TEST_F(NatsChannelTest, R_CHAN_2_LostConnectionsRetransmitWithoutLossOrDuplicates) {
  auto server = serve(nats_addr());
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

// The NATS server itself dies mid-traffic and comes back: the tunnels cut their connections,
// the channel reconnects and resumes its session, and nothing is lost or delivered twice.
TEST_F(NatsChannelTest, R_CHAN_2_ANatsServerKilledMidTrafficLosesNothingAndDuplicatesNothing) {
  auto server = serve(nats_addr());
  auto client = dial(server->local_addr());
  for (int n = 0; n < 100; ++n) post(*client, n, 100);
  expect_in_order(0, 100);
  nats_->kill9();
  for (int n = 100; n < 200; ++n) post(*client, n, 100);  // queued while NATS is gone
  ASSERT_TRUE(nats_->restart()) << nats_->log();
  for (int n = 200; n < 300; ++n) post(*client, n, 100);
  expect_in_order(100, 300);
  expect_nothing_more();
  expect_nothing_returned();
  EXPECT_FALSE(client->closed());
}

TEST_F(NatsChannelTest, R_CHAN_2_ServerThatNeverComesBackReturnsPendingWithAckTimedOut) {
  ChannelOptions options;
  options.delivery_timeout = absl::Milliseconds(500);
  auto server = serve(nats_addr(), options);
  auto client = dial(server->local_addr(), options);
  post(*client, 0);
  expect_in_order(0, 1);
  wait_unacked(*client, 0);
  server->vanish();  // killed: no GOODBYE, no FIN
  server.reset();
  for (int n = 1; n <= 5; ++n) post(*client, n);
  for (int n = 1; n <= 5; ++n) {
    const runtime::DeliveryFailure f = next_returned();
    EXPECT_EQ(f.transport, TransportReason::kAckTimedOut) << f.to_string();
  }
  EXPECT_TRUE(client->closed());
  post(*client, 6);
  EXPECT_EQ(next_returned().transport, TransportReason::kChannelClosed);
}

// A killed proc sends no FIN: the client's tunnel learns of it from its heartbeat (within
// about a second), not from a socket error. Envelopes posted in that window were written into
// the tunnel, so after the restart they come back ChannelClosed, maybe delivered — as written
// but unacked envelopes do over ipc (R_CHAN_2_WrittenButUnackedEnvelopesReturnChannelClosed…);
// nothing is lost silently, and later posts go out on a fresh session.
TEST_F(NatsChannelTest, R_CHAN_2_AfterAServerRestartNothingIsLostSilentlyAndAFreshSessionDelivers) {
  const ChannelAddr addr = nats_addr();
  auto server = serve(addr);
  auto client = dial(addr);
  for (int n = 0; n < 3; ++n) post(*client, n);
  expect_in_order(0, 3);
  wait_unacked(*client, 0);
  server->vanish();
  server.reset();
  server = serve(addr);  // same subject, no memory of the session
  for (int n = 3; n < 6; ++n) post(*client, n);
  int accounted = 0;
  while (accounted < 3) {
    if (absl::StatusOr<ChanMsg> got = port_.receiver.recv(absl::Milliseconds(50)); got.ok()) {
      ++accounted;
      continue;
    }
    if (absl::StatusOr<EnvelopePtr> back = alice_->next_undeliverable(absl::Milliseconds(50));
        back.ok()) {
      ASSERT_NE((*back)->root_failure(), nullptr);
      EXPECT_EQ((*back)->root_failure()->transport, TransportReason::kChannelClosed);
      EXPECT_TRUE((*back)->root_failure()->maybe_delivered);
      ++accounted;
    }
  }
  wait_unacked(*client, 0);
  EXPECT_FALSE(client->closed()) << client->status();
  for (int n = 6; n < 9; ++n) post(*client, n);
  expect_in_order(6, 9);
  expect_nothing_returned();
  expect_nothing_more();
}

TEST_F(NatsChannelTest, R_CHAN_2_AStoppingServerSaysGoodbyeAndPendingReturnAtOnce) {
  ChannelOptions options;
  options.delivery_timeout = absl::Seconds(60);  // far: the GOODBYE, not a timer, returns them
  auto server = serve(nats_addr(), options);
  auto client = dial(server->local_addr(), options);
  post(*client, 0);
  expect_in_order(0, 1);
  wait_unacked(*client, 0);
  server.reset();  // a clean stop: GOODBYE server_stopping through the tunnel
  test_support::wait_for([&] { return client->closed(); }, kDeadline);
  EXPECT_TRUE(client->closed()) << client->status();
  post(*client, 1);
  EXPECT_EQ(next_returned().transport, TransportReason::kChannelClosed);
}

TEST_F(NatsChannelTest, R_CHAN_3_OversizedEnvelopeFailsAloneAndTheNextIsDelivered) {
  ChannelOptions options;
  options.max_message_bytes = 64 << 10;
  auto server = serve(nats_addr(), options);
  auto client = dial(server->local_addr(), options);
  post(*client, 0);
  post(*client, 1, 100 << 10);
  post(*client, 2);
  const runtime::DeliveryFailure f = next_returned();
  EXPECT_EQ(f.transport, TransportReason::kOversizedFrame) << f.to_string();
  expect_in_order(0, 1);
  expect_in_order(2, 3);
}

// nats-server takes at most 1 MiB a message by default; a 3 MiB payload goes through whole.
TEST_F(NatsChannelTest, APayloadLargerThanTheServersMaxPayloadIsDeliveredWhole) {
  auto server = serve(nats_addr());
  auto client = dial(server->local_addr());
  post(*client, 0, 3 << 20);
  post(*client, 1);
  absl::StatusOr<ChanMsg> big = port_.receiver.recv(kDeadline);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->n, 0);
  EXPECT_EQ(big->pad.size(), size_t{3} << 20);
  expect_in_order(1, 2);
}

TEST_F(NatsChannelTest, DialToASubjectNobodyServesFailsNamingTheAddress) {
  ChannelOptions options;
  options.dial_timeout = absl::Seconds(2);
  const ChannelAddr nobody = nats_addr("postal.test.nobody");
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<ChannelClient>> c =
      ChannelClient::dial(io_, nobody, sending_, options);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
  EXPECT_NE(c.status().message().find(nobody.to_string()), std::string::npos) << c.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << "no responders answers at once";
}

// R-FLOW-3: a background dial does not probe first and never blocks; its OPEN goes out with a
// reply subject, which nats-server answers "no responders" at once, so what was posted returns
// DialFailed long before the dial timeout.
TEST_F(NatsChannelTest, R_FLOW_3_ABackgroundDialNobodyAnswersReturnsDialFailedAtOnce) {
  ChannelOptions options;
  options.dial_timeout = absl::Seconds(20);
  const absl::Time start = absl::Now();
  std::unique_ptr<ChannelClient> client =
      must(ChannelClient::dial_async(io_, nats_addr("postal.test.nobody"), sending_, options));
  post(*client, 7);
  const auto [n, failure] = next_returned_n();
  EXPECT_EQ(n, 7);
  EXPECT_EQ(failure.transport, runtime::TransportReason::kDialFailed) << failure.to_string();
  EXPECT_EQ(failure.os_errno, ECONNREFUSED) << failure.to_string();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "the OPEN's no responders ends the dial";
  EXPECT_TRUE(client->closed());
}

// The writer's sink takes at most the tunnel's window (4 MiB) unacked: 24 MiB in 1 KiB envelopes
// arrive whole and in order, the window refilled by the reader's acks many times over.
TEST_F(NatsChannelTest, R_CHAN_4_MoreThanTheTunnelWindowFlowsInOrder) {
  auto server = serve(nats_addr());
  auto client = dial(server->local_addr());
  constexpr int kCount = 24 * 1024;
  std::thread poster([&] {
    for (int n = 0; n < kCount; ++n) post(*client, n, 1024);
  });
  expect_in_order(0, kCount);
  poster.join();
  expect_nothing_more();
  wait_unacked(*client, 0);
  expect_nothing_returned();
}

// R-CHAN-1: on nats:// the server's ACK of a read waits up to 1 ms (kSinkAckDelay) for more to
// cover; with nothing else ever to send (no heartbeats, no further posts) it still comes.
TEST_F(NatsChannelTest, R_CHAN_1_ADelayedAckComesWithNothingElseToSend) {
  ChannelOptions options;
  options.heartbeat_interval = absl::ZeroDuration();  // no PING or PONG could carry it
  auto server = serve(nats_addr(), options);
  auto client = dial(server->local_addr(), options);
  for (int round = 0; round < 3; ++round) {
    post(*client, round);
    expect_in_order(round, round + 1);
    wait_unacked(*client, 0);
  }
  expect_nothing_returned();
}

TEST_F(NatsChannelTest, DialToANatsServerThatIsNotThereIsUnavailable) {
  const ChannelAddr addr = nats_addr();
  nats_->kill9();
  ChannelOptions options;
  options.dial_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<ChannelClient>> c =
      ChannelClient::dial(io_, addr, sending_, options);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
  EXPECT_NE(c.status().message().find("nats-server"), std::string::npos) << c.status();
}

}  // namespace
}  // namespace postal::routing::channel_test
