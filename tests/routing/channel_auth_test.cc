// Authenticated channels (R-SEC-1) and no open relay (R-SEC-2), over real sockets: docs/wire.md
// §4.5, docs/security.md. The tests play the stranger themselves (RawPeer: hand-built frames),
// or run real clients and Nodes with the wrong, the right or no key.
#include "channel_auth.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "channel_fixture.h"
#include "postal/actors/system_actors.h"
#include "postal/routing/channel_key.h"
#include "postal/routing/node.h"
#include "postal/routing/workload.h"

namespace postal::routing::channel_test {
namespace {

std::shared_ptr<const ChannelKey> key_of(char fill) {
  return must(ChannelKey::derive(std::string(ChannelKey::kSecretBytes, fill)));
}

ChannelOptions with_key(std::shared_ptr<const ChannelKey> key) {
  ChannelOptions o;
  o.key = std::move(key);
  return o;
}

// A HELLO with auth_mode 1 and a fresh client nonce, and its frame as sent.
struct SentHello {
  v2::Hello hello;
  std::string frame;
  std::string body() const { return frame.substr(v2::kPrefixBytes); }
};
SentHello auth_hello(uint64_t session) {
  SentHello h{hello(session), {}};
  h.hello.auth_mode = 1;
  h.hello.client_nonce = internal::auth::random_nonce();
  v2::append(h.frame, h.hello);
  return h;
}

// The AUTH that answers `challenge` for `hello` with `key`.
std::string auth_frame(const ChannelKey& key, const SentHello& hello, const v2::Challenge& c) {
  v2::Auth a;
  a.client_mac = internal::auth::client_mac(key, hello.body(), c.server_nonce, c.server_mac);
  std::string frame;
  v2::append(frame, a);
  return frame;
}

v2::Challenge as_challenge(const RawPeer::Received& f) {
  return must(v2::decode_challenge(f.body));
}

// A Node with its system actors on tcp://127.0.0.1:0.
std::unique_ptr<Node> start_node(std::string_view name, std::shared_ptr<const ChannelKey> key,
                                 std::optional<runtime::Uid> gateway = std::nullopt) {
  NodeOptions o;
  o.id = runtime::ProcId{runtime::Uid::singleton(must(runtime::Label::parse(name)))};
  o.listen = tcp_any();
  o.scheduler.workers = 1;
  o.channel.key = std::move(key);
  o.gateway = std::move(gateway);
  return must(Node::start(std::move(o)));
}

// The hand-built envelope a stranger sends: SpawnActor{postal.Echo "intruder"} to the spawner.
EnvelopePtr spawn_request(const runtime::ProcAddr& proc) {
  register_workload_actors();
  runtime::PortAddr spawner =
      proc.actor(runtime::Uid::singleton(must(runtime::Label::parse(actors::kSpawnerName))))
          .port(runtime::Port::handler(wire::type_hash<actors::SpawnActor>()));
  runtime::ActorAddr stranger{
      runtime::ActorId{runtime::ProcId{runtime::Uid::singleton(must(runtime::Label::parse("x")))},
                       runtime::Uid::singleton(must(runtime::Label::parse("stranger")))},
      runtime::Location::addr(must(ChannelAddr::tcp("127.0.0.1", 9)))};
  return runtime::MessageEnvelope::make(
      stranger, spawner,
      wire::Any::make(actors::SpawnActor{std::string(kEchoType), "intruder", {}, {}}));
}

// Sends HELLO (auth_mode 0) and the SpawnActor as DATA seq 0 on one write, as a stranger would.
v2::Reject stranger_spawns(boost::asio::io_context& ctx, Node& node, bool expect_reject) {
  RawPeer peer = connect_raw(ctx, node.listen_addr());
  TestSession session;
  EnvelopePtr env = spawn_request(node.proc().addr());
  std::string bytes;
  v2::append(bytes, hello(41));
  bytes += session.data(0, *env);
  EXPECT_TRUE(peer.send(bytes));
  if (!expect_reject) {
    expect_kind(peer, v2::Kind::kWelcome);
    return {};
  }
  return as_reject(expect_kind(peer, v2::Kind::kReject));
}

// R-SEC-2 (by R-SEC-1): a stranger without the secret, on the tcp port, gets REJECT auth_required
// and its hand-built SpawnActor is never decoded, so it never reaches the spawner. The same bytes
// spawn the actor on a node without a key (so they are a valid spawn request).
TEST(ChannelAuth, R_SEC_2_AStrangerWithoutTheSecretIsRefusedAndItsSpawnNeverReachesTheSpawner) {
  boost::asio::io_context ctx;
  std::unique_ptr<Node> open = start_node("open", nullptr);
  const size_t open_before = open->proc().mailbox_count();
  stranger_spawns(ctx, *open, /*expect_reject=*/false);
  ASSERT_TRUE(
      test_support::wait_for([&] { return open->proc().mailbox_count() > open_before; }, kDeadline))
      << "control: without a key the hand-built SpawnActor spawns";

  std::unique_ptr<Node> guarded = start_node("guarded", key_of('k'));
  const size_t before = guarded->proc().mailbox_count();
  const v2::Reject r = stranger_spawns(ctx, *guarded, /*expect_reject=*/true);
  EXPECT_EQ(r.code, static_cast<uint16_t>(v2::RejectCode::kAuthRequired)) << r.text;
  EXPECT_EQ(guarded->server().stats().refused_unauthenticated, 1u);
  EXPECT_EQ(guarded->proc().mailbox_count(), before);
  EXPECT_EQ(guarded->server().stats().sessions, 0u) << "no session before authentication";
}

// R-SEC-1: an AUTH made with another secret fails the MAC: REJECT auth_failed, counted, the
// connection ends, and the DATA behind it is never decoded.
TEST_F(ChannelTest, R_SEC_1_AWrongSecretFailsTheMacAndNothingIsDecoded) {
  auto server = serve(ipc_path(), with_key(key_of('k')));
  boost::asio::io_context ctx;
  RawPeer peer = connect_raw(ctx, server->local_addr());
  const SentHello h = auth_hello(7);
  ASSERT_TRUE(peer.send(h.frame));
  const v2::Challenge c = as_challenge(expect_kind(peer, v2::Kind::kChallenge));
  EXPECT_EQ(server->stats().sessions, 0u) << "no session is created before AUTH verifies";
  TestSession session;
  ASSERT_TRUE(peer.send(auth_frame(*key_of('w'), h, c) + session.data(0, *envelope(1))));
  const v2::Reject r = as_reject(expect_kind(peer, v2::Kind::kReject));
  EXPECT_EQ(r.code, static_cast<uint16_t>(v2::RejectCode::kAuthFailed)) << r.text;
  EXPECT_TRUE(peer.closed_within());
  EXPECT_EQ(server->stats().auth_failed, 1u);
  EXPECT_EQ(server->stats().sessions, 0u);
  expect_nothing_more();
}

// R-SEC-1, mutual: a client with another secret checks the server's proof first, sends no AUTH,
// and closes its channel for good; its envelope returns ChannelClosed and is never delivered.
TEST_F(ChannelTest, R_SEC_1_AClientWithAnotherSecretRefusesTheServerAndNeverFallsBack) {
  auto server = serve(ipc_path(), with_key(key_of('k')));
  auto client = dial(server->local_addr(), with_key(key_of('w')));
  post(*client, 1);
  const runtime::DeliveryFailure f = next_returned();
  EXPECT_EQ(f.transport, TransportReason::kChannelClosed);
  test_support::wait_for([&] { return client->closed(); }, kDeadline);
  EXPECT_TRUE(client->rejected());
  EXPECT_NE(client->status().message().find("did not prove the topology secret"),
            std::string_view::npos)
      << client->status();
  EXPECT_EQ(server->stats().auth_failed, 0u) << "the client sent no AUTH";
  expect_nothing_more();
}

// R-SEC-1: the same secret on both ends: the channel authenticates and delivers in order; a
// client without the secret is refused with auth_required and closes (no retry loop).
TEST_F(ChannelTest, R_SEC_1_TheSameSecretDeliversAndNoSecretIsRefused) {
  auto server = serve(tcp_any(), with_key(key_of('k')));
  auto client = dial(server->local_addr(), with_key(key_of('k')));
  for (int n = 0; n < 1000; ++n) post(*client, n);
  expect_in_order(0, 1000);
  EXPECT_EQ(server->stats().auth_failed, 0u);

  auto stranger = dial(server->local_addr());
  post(*stranger, 5000);
  EXPECT_EQ(next_returned().transport, TransportReason::kChannelClosed);
  test_support::wait_for([&] { return stranger->closed(); }, kDeadline);
  EXPECT_TRUE(stranger->rejected());
  EXPECT_NE(stranger->status().message().find("requires authentication"), std::string_view::npos)
      << stranger->status();
  EXPECT_EQ(server->stats().refused_unauthenticated, 1u);
  expect_nothing_more();
}

// R-SEC-1: a HELLO and AUTH recorded from an earlier (successful) connection fail on a new one:
// the server's nonce is fresh, so the old proof does not verify.
TEST_F(ChannelTest, R_SEC_1_AReplayedHelloAndAuthFromAnEarlierConnectionFail) {
  const auto key = key_of('k');
  auto server = serve(ipc_path(), with_key(key));
  const SentHello h = auth_hello(9);
  std::string recorded_auth;
  v2::Challenge first;
  boost::asio::io_context ctx;
  {
    RawPeer peer = connect_raw(ctx, server->local_addr());
    ASSERT_TRUE(peer.send(h.frame));
    first = as_challenge(expect_kind(peer, v2::Kind::kChallenge));
    EXPECT_TRUE(internal::auth::equal(
        first.server_mac, internal::auth::server_mac(*key, h.body(), first.server_nonce)))
        << "the server proves the key";
    recorded_auth = auth_frame(*key, h, first);
    ASSERT_TRUE(peer.send(recorded_auth));
    expect_kind(peer, v2::Kind::kWelcome);
  }
  RawPeer replay = connect_raw(ctx, server->local_addr());
  ASSERT_TRUE(replay.send(h.frame));
  const v2::Challenge second = as_challenge(expect_kind(replay, v2::Kind::kChallenge));
  EXPECT_NE(second.server_nonce, first.server_nonce);
  TestSession session;
  ASSERT_TRUE(replay.send(recorded_auth + session.data(0, *envelope(1))));
  const v2::Reject r = as_reject(expect_kind(replay, v2::Kind::kReject));
  EXPECT_EQ(r.code, static_cast<uint16_t>(v2::RejectCode::kAuthFailed)) << r.text;
  EXPECT_EQ(server->stats().auth_failed, 1u);
  expect_nothing_more();
}

// R-SEC-1: an abstract unix socket has no mode; the server checks the peer's uid (SO_PEERCRED)
// on accept. A child that setuid()s to nobody connects and is closed before anything is read;
// a client of the server's own uid is served.
TEST_F(ChannelTest, R_SEC_1_AnotherUidOnTheAbstractSocketIsRefusedByPeerCred) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become another uid";
  auto server = serve(ipc_abstract());
  const std::string name(server->local_addr().path());
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path + 1, name.data(), name.size());
  const socklen_t sa_len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  std::string frame;
  v2::append(frame, hello(3));
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the other uid: only async-signal-safe calls from here
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sa_len) != 0) ::_exit(11);
    (void)!::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);  // the server may be gone
    char buf[256];
    const ssize_t n = ::read(fd, buf, sizeof(buf));  // the server closes: 0 (or a reset)
    ::_exit(n <= 0 ? 0 : 12);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10/11: setup failed; 12: the server answered the stranger";
  EXPECT_EQ(server->stats().refused_peer_uid, 1u);
  EXPECT_EQ(server->stats().sessions, 0u);

  auto client = dial(server->local_addr());  // our own uid
  post(*client, 1);
  expect_in_order(1, 2);
}

// A loopback tcp listener that never accepts: whether anything connected to it.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd_); }
  uint16_t port() const { return port_; }
  bool connected() const {
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c >= 0) ::close(c);
    return c >= 0;
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// R-SEC-2, no open relay: an envelope that arrives over the network for a location that is not
// among the proc's routes comes back Transport(NoRoute) to its sender, and nothing is dialed
// (the named location is a listener of ours: nobody connects to it). Both for a plain node and
// for a gateway node.
TEST(ChannelAuth, R_SEC_2_AnEnvelopeFromTheNetworkForAnUnroutedLocationReturnsNoRouteUndialed) {
  const auto key = key_of('k');
  std::unique_ptr<Node> sender = start_node("sender", key);
  Listener elsewhere;
  const runtime::ActorAddr far{
      runtime::ActorId{runtime::ProcId{runtime::Uid::singleton(must(runtime::Label::parse("far")))},
                       runtime::Uid::singleton(must(runtime::Label::parse("victim")))},
      runtime::Location::addr(must(ChannelAddr::tcp("127.0.0.1", elsewhere.port())))};
  IoThread io;  // the test's own channel into the relay (destroyed after it)
  for (bool gateway : {false, true}) {
    SCOPED_TRACE(gateway ? "a gateway node" : "a plain node");
    // A sender per round: closing the round's channel may return its envelope once more as
    // "possibly delivered" (its ACK can trail the NoRoute return), which must not be read as
    // the next round's answer.
    auto alice = must(runtime::Client::attach(sender->proc(), gateway ? "alice-gw" : "alice"));
    std::unique_ptr<Node> relay = start_node(
        gateway ? "gw" : "plain", key,
        gateway ? std::optional(runtime::Uid::singleton(must(runtime::Label::parse("edge"))))
                : std::nullopt);
    // Straight into the relay's server, naming the far location (as a member peer could).
    std::unique_ptr<ChannelClient> channel =
        must(ChannelClient::dial(io, relay->listen_addr(), sender->proc(), with_key(key)));
    channel->post(
        runtime::MessageEnvelope::make(alice->self_addr(), far.port(runtime::Port::handler(1)),
                                       wire::Any::make(ChanMsg{1, ""})),
        sender->proc());
    absl::StatusOr<EnvelopePtr> back = alice->next_undeliverable(kDeadline);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_NE((*back)->root_failure(), nullptr);
    EXPECT_EQ((*back)->root_failure()->transport, TransportReason::kNoRoute)
        << (*back)->root_failure()->to_string();
    EXPECT_FALSE(elsewhere.connected()) << "the relay dialed the location the envelope named";
    EXPECT_EQ(relay->server().stats().auth_failed, 0u);
  }
}

}  // namespace
}  // namespace postal::routing::channel_test
