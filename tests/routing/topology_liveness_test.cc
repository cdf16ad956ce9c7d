// A stopped or stuck proc, seen from a sender in this test process, with a real `postal proc`
// child: SIGTERM makes its server say GOODBYE `server_stopping`, so what was pending comes back
// at once and a restart on the same address is redialed (R-CHAN-2); SIGSTOP is seen by the
// heartbeats within heartbeat_timeout, and after SIGCONT the stream resumes with nothing lost or
// duplicated; a proc that stays stuck gets its pending envelopes back at the delivery timeout
// (R-FLOW-4). channel_liveness_test.cc has the same rules with a server in this process.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "postal/routing/host.h"
#include "postal/routing/workload.h"
#include "support/must.h"
#include "support/raw_peer.h"
#include "support/wait_for.h"

namespace postal::routing {
namespace {

// kill(SIGSTOP) returns before the target stops: whether the kernel says `pid` is stopped now
// (state T in /proc/PID/stat), so nothing posted after the wait can still be read and acked.
bool is_stopped(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');  // the command name may hold spaces and parentheses
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'T';
}

// SIGSTOPs `pid` and waits until it is stopped.
bool stop(pid_t pid) {
  return ::kill(pid, SIGSTOP) == 0 &&
         test_support::wait_for([&] { return is_stopped(pid); }, absl::Seconds(10));
}

using runtime::ChannelAddr;
using test_support::must;
using test_support::wait_for;

constexpr absl::Duration kDeadline = absl::Seconds(30);

// One launched proc, gamma, running an echo; a sending node in this process (its server takes
// the echo's stream acks) with a client attached.
class LivenessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int count = 0;  // test names are too long for socket paths (107 bytes)
    dir_ = absl::StrCat("/tmp/postal-live-", ::getpid(), "-", ++count);
    std::filesystem::create_directories(dir_);
  }
  // Launches gamma; `channel` is the host's (its procs get its timeouts as flags).
  void up(ChannelOptions channel = {}) {
    TopologySpec spec;
    spec.name = "live";
    spec.procs.push_back({"gamma", ipc("gamma"), std::nullopt, 1, std::nullopt, {}, std::nullopt});
    spec.actors.push_back(ActorSpec{"gamma", "echo", std::string(kEchoType), {}});
    HostOptions o;
    o.postal_binary = POSTAL_BINARY;
    o.proc_workers = 1;
    o.channel = channel;
    // These tests are about liveness: the sender node and the raw peer speak to the launched
    // proc without the topology's secret (R-SEC-1 has its own tests).
    o.authenticate = false;
    auto host = Host::up(spec, o);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = *std::move(host);
  }
  void TearDown() override {
    client_.reset();
    node_.reset();
    host_.reset();
    std::filesystem::remove_all(dir_);
  }

  ChannelAddr ipc(const std::string& name) {
    return must(ChannelAddr::parse(absl::StrCat("ipc://", dir_, "/", name, ".sock")));
  }

  void start_sender(ChannelOptions channel) {
    NodeOptions o;
    o.id = runtime::ProcId{runtime::Uid::singleton(must(runtime::Label::parse("sender")))};
    o.listen = ipc("sender");
    o.scheduler.workers = 1;
    o.channel = channel;
    node_ = must(Node::start(std::move(o)));
    client_ = must(runtime::Client::attach(node_->proc(), "streamer"));
  }

  runtime::PortAddr echo() { return payload_port(*host_->actor_addr("gamma", "echo")); }
  const ChannelAddr& gamma_listen() { return host_->find_proc("gamma")->listen; }

  // Stream payload `seq` of `total`, acked to `acks`.
  runtime::EnvelopePtr stream_payload(uint64_t seq, uint64_t total,
                                      const runtime::PortRef<StreamAck>& acks) {
    Payload p;
    p.mode = Payload::kStream;
    p.seq = seq;
    p.total = total;
    p.ack_to = acks;
    return runtime::MessageEnvelope::make(client_->self_addr(), echo(),
                                          wire::Any::make(std::move(p)));
  }

  std::string dir_;
  std::unique_ptr<Host> host_;
  std::unique_ptr<Node> node_;
  std::unique_ptr<runtime::Client> client_;
};

// R-CHAN-2: SIGTERM stops gamma's node, whose server says GOODBYE on every connection: what the
// sender had pending comes back at once — ChannelClosed "the server stopped", or DialFailed for
// posts after gamma was gone — not after the 60 s delivery timeout, and nothing is dropped.
// gamma restarted on the same address is redialed by the next post, which is delivered.
TEST_F(LivenessTest, R_CHAN_2_AProcStoppedBySigtermSaysGoodbyeAndItsRestartIsRedialed) {
  up();
  ChannelOptions channel;
  channel.delivery_timeout = absl::Seconds(60);
  start_sender(channel);
  auto [acks, acks_rx] = runtime::open_port<StreamAck>(*client_);
  const runtime::PortRef<StreamAck> ack_to = acks.bind();
  constexpr uint64_t kSent = 40'000;
  absl::Time killed;
  for (uint64_t i = 0; i < kSent; ++i) {
    node_->proc().send(stream_payload(i, kSent, ack_to));
    if (i == kSent / 4) {
      ASSERT_TRUE(host_->kill("gamma", SIGTERM).ok());
      killed = absl::Now();
    }
  }
  uint64_t returned = 0, stopped = 0;
  absl::Time last_return = killed;
  while (true) {
    auto back = client_->next_undeliverable(absl::Milliseconds(500));
    if (!back.ok()) break;
    last_return = absl::Now();
    const runtime::DeliveryFailure* root = (*back)->root_failure();
    ASSERT_NE(root, nullptr);
    ASSERT_EQ(root->kind, runtime::FailureKind::kTransport) << root->to_string();
    EXPECT_TRUE(root->transport == runtime::TransportReason::kChannelClosed ||
                root->transport == runtime::TransportReason::kDialFailed)
        << root->to_string();
    if (root->detail.find("the server stopped") != std::string::npos) ++stopped;
    ++returned;
  }
  EXPECT_GT(stopped, 0u) << "nothing was pending at the GOODBYE (" << returned << " returned)";
  EXPECT_LT(last_return - killed, absl::Seconds(10)) << "returned by the delivery timeout";
  const auto stats = node_->proc().stats();
  EXPECT_EQ(stats.dropped, 0u) << stats.to_string();
  EXPECT_EQ(stats.returned, returned);

  auto exit = host_->next_exit(kDeadline);
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(WIFEXITED(exit->wait_status)) << exit->to_string();  // it stopped, not killed
  ASSERT_TRUE(host_->restart("gamma").ok());
  absl::StatusOr<runtime::ActorAddr> again = absl::UnavailableError("not spawned yet");
  for (int attempt = 0; attempt < 20 && !again.ok(); ++attempt) {
    again = host_->spawn("gamma", std::string(kEchoType), "echo", {});
  }
  ASSERT_TRUE(again.ok()) << again.status();
  auto [replies, replies_rx] = runtime::open_port<Payload>(*client_);
  Payload ping;
  ping.reply_to = replies.bind();
  runtime::PortRef<Payload>(payload_port(*again)).send(*client_, std::move(ping));
  EXPECT_TRUE(replies_rx.recv(kDeadline).ok()) << "the post after the restart was not delivered";
}

// R-FLOW-4: gamma is SIGSTOPped while the sender's channel has a stream pending. The channel's
// heartbeats (200 ms / 1 s) declare it dead within the timeout plus a margin, not the 60 s
// delivery timeout, and nothing is returned meanwhile; after SIGCONT the channel reconnects,
// resumes its session and the stream completes in order, nothing lost or duplicated.
TEST_F(LivenessTest, R_FLOW_4_ASigstoppedProcIsDeclaredDeadByHeartbeatsAndResumesAfterSigcont) {
  up();
  start_sender({});
  IoThread io;
  ChannelOptions c;
  c.heartbeat_interval = absl::Milliseconds(200);
  c.heartbeat_timeout = absl::Seconds(1);
  c.delivery_timeout = absl::Seconds(60);
  auto channel = must(ChannelClient::dial(io, gamma_listen(), node_->proc(), c));
  auto [acks, acks_rx] = runtime::open_port<StreamAck>(*client_);
  const runtime::PortRef<StreamAck> ack_to = acks.bind();
  constexpr uint64_t kTotal = 2000;
  for (uint64_t i = 0; i < kTotal / 2; ++i) {
    channel->post(stream_payload(i, kTotal, ack_to), node_->proc());
  }
  ASSERT_TRUE(wait_for([&] { return channel->unacked() == 0; }, kDeadline));
  EXPECT_TRUE(channel->liveness().heartbeat);

  const pid_t gamma = host_->find_proc("gamma")->pid;
  absl::Cleanup resume = [gamma] { ::kill(gamma, SIGCONT); };
  ASSERT_TRUE(stop(gamma));
  const absl::Time stopped = absl::Now();
  for (uint64_t i = kTotal / 2; i < kTotal; ++i) {
    channel->post(stream_payload(i, kTotal, ack_to), node_->proc());
  }
  ASSERT_TRUE(wait_for([&] { return channel->liveness().peer_dead; }, absl::Seconds(10)));
  const absl::Duration detected = absl::Now() - stopped;
  EXPECT_LT(detected, absl::Seconds(2)) << "not within heartbeat_timeout + margin";
  EXPECT_FALSE(channel->closed());
  EXPECT_GT(channel->unacked(), 0u);
  EXPECT_FALSE(client_->next_undeliverable(absl::ZeroDuration()).ok());

  ::kill(gamma, SIGCONT);
  uint64_t received = 0, out_of_order = 0;
  while (received < kTotal) {
    absl::StatusOr<StreamAck> ack = acks_rx.recv(kDeadline);
    ASSERT_TRUE(ack.ok()) << "the stream stalled at " << received << ": " << ack.status();
    received = ack->received;
    out_of_order += ack->out_of_order;
  }
  EXPECT_EQ(received, kTotal);
  EXPECT_EQ(out_of_order, 0u) << "lost or duplicated payloads";
  EXPECT_TRUE(wait_for([&] { return channel->unacked() == 0; }, kDeadline));
  EXPECT_FALSE(channel->liveness().peer_dead);
  EXPECT_EQ(channel->liveness().deaths, 1u);
  EXPECT_FALSE(client_->next_undeliverable(absl::Milliseconds(100)).ok());
}

// R-FLOW-4, R-CHAN-2: a proc that stays stuck. Declared dead, the client keeps reconnecting; each
// reconnect connects in the kernel and never gets WELCOME, so dial_timeout ends the handshake;
// the pending envelopes stay pending until the delivery timeout returns them as AckTimedOut
// (they were written and not acked: they may or may not have been delivered).
TEST_F(LivenessTest, R_FLOW_4_EnvelopesPendingForAProcThatStaysStuckReturnAtTheDeliveryTimeout) {
  up();
  start_sender({});
  IoThread io;
  ChannelOptions c;
  c.heartbeat_interval = absl::Milliseconds(100);
  c.heartbeat_timeout = absl::Milliseconds(400);
  c.dial_timeout = absl::Milliseconds(300);
  c.delivery_timeout = absl::Seconds(2);
  auto channel = must(ChannelClient::dial(io, gamma_listen(), node_->proc(), c));
  auto [acks, acks_rx] = runtime::open_port<StreamAck>(*client_);
  const runtime::PortRef<StreamAck> ack_to = acks.bind();
  constexpr uint64_t kPending = 10;
  channel->post(stream_payload(0, kPending + 1, ack_to), node_->proc());
  ASSERT_TRUE(wait_for([&] { return channel->unacked() == 0; }, kDeadline));

  const pid_t gamma = host_->find_proc("gamma")->pid;
  absl::Cleanup resume = [gamma] { ::kill(gamma, SIGCONT); };
  ASSERT_TRUE(stop(gamma));
  const absl::Time stopped = absl::Now();
  for (uint64_t i = 1; i <= kPending; ++i) {
    channel->post(stream_payload(i, kPending + 1, ack_to), node_->proc());
  }
  ASSERT_TRUE(wait_for([&] { return channel->liveness().peer_dead; }, absl::Seconds(10)));
  EXPECT_LT(absl::Now() - stopped, absl::Milliseconds(1500));
  EXPECT_FALSE(client_->next_undeliverable(absl::ZeroDuration()).ok())
      << "returned when declared dead: pending envelopes wait for the delivery timeout";
  for (uint64_t i = 0; i < kPending; ++i) {
    auto back = client_->next_undeliverable(absl::Seconds(10));
    ASSERT_TRUE(back.ok()) << back.status();
    const runtime::DeliveryFailure* root = (*back)->root_failure();
    ASSERT_NE(root, nullptr);
    EXPECT_EQ(root->transport, runtime::TransportReason::kAckTimedOut) << root->to_string();
    EXPECT_TRUE(root->maybe_delivered) << "written, never acked: " << root->to_string();
  }
  const absl::Duration returned_after = absl::Now() - stopped;
  EXPECT_GE(returned_after, absl::Milliseconds(1900));
  EXPECT_LT(returned_after, absl::Seconds(4));
  EXPECT_TRUE(channel->closed());
  EXPECT_NE(channel->status().message().find("dial_timeout"), std::string::npos)
      << channel->status();
}

// R-FLOW-4: `postal up` hands its channel options' heartbeats to the procs it launches
// (`postal proc --heartbeat-ms`): a peer of gamma that offers heartbeats and goes silent is closed
// after the host's 300 ms, not the 5 s default.
TEST_F(LivenessTest, R_FLOW_4_ALaunchedProcTakesItsHostsHeartbeatSettings) {
  ChannelOptions channel;
  channel.heartbeat_interval = absl::Milliseconds(50);
  channel.heartbeat_timeout = absl::Milliseconds(300);
  up(channel);
  namespace v2 = internal::v2;
  boost::asio::io_context ctx;
  test_support::RawPeer peer = test_support::connect_raw(ctx, gamma_listen());
  v2::Hello hello;
  hello.client_session = 77;
  hello.features = v2::kFeatureHeartbeat;
  ASSERT_TRUE(peer.send(hello));
  std::optional<test_support::RawPeer::Received> welcome = peer.next();
  ASSERT_TRUE(welcome && welcome->kind == v2::Kind::kWelcome);
  EXPECT_EQ(must(v2::decode_welcome(welcome->body)).features, v2::kFeatureHeartbeat);
  const absl::Time silent = absl::Now();
  while (peer.next(absl::Seconds(10)).has_value()) {  // its PINGs, then GOODBYE idle
  }
  EXPECT_TRUE(peer.closed_within(absl::Seconds(1)));
  EXPECT_LT(absl::Now() - silent, absl::Seconds(3)) << "closed by the default timeout";
}

}  // namespace
}  // namespace postal::routing
