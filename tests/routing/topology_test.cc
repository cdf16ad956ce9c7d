// Multi-process topologies: real `postal proc` processes, real sockets, a host with gateways.
// Covers the return path across procs, Via routes through gateways, ordering across a gateway,
// a proc killed mid-stream, a proc restarted on its address, oversized frames and TTL expiry.
#include <signal.h>
#include <unistd.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "postal/routing/channel_client.h"
#include "postal/routing/channel_key.h"
#include "gtest/gtest.h"
#include "postal/routing/host.h"
#include "postal/routing/workload.h"
#include "support/wait_for.h"

namespace postal::routing {
namespace {

using runtime::ChannelAddr;

constexpr absl::Duration kDeadline = absl::Seconds(120);

// Sanitizer builds run several times slower; they check memory, not volume.
#if defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kVolume = 20'000;
#else
constexpr uint64_t kVolume = 100'000;
#endif

class TopologyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat("/tmp/postal-test-", ::getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    host_.reset();
    std::filesystem::remove_all(dir_);
  }

  ChannelAddr ipc(const std::string& name) {
    return *ChannelAddr::parse(absl::StrCat("ipc://", dir_, "/", name, ".sock"));
  }
  static ChannelAddr tcp() { return *ChannelAddr::parse("tcp://127.0.0.1:0"); }

  void up(const TopologySpec& spec, absl::Duration delivery_timeout = absl::Seconds(30)) {
    HostOptions o;
    o.postal_binary = POSTAL_BINARY;
    o.proc_workers = 1;
    o.channel.delivery_timeout = delivery_timeout;
    auto host = Host::up(spec, o);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = *std::move(host);
  }

  runtime::ActorAddr actor(const char* proc, const char* name) {
    auto a = host_->actor_addr(proc, name);
    EXPECT_TRUE(a.has_value()) << proc << "/" << name;
    return a.value_or(runtime::ActorAddr{});
  }

  absl::StatusOr<DriveResult> drive(const runtime::ActorAddr& driver, std::string pattern,
                                    std::vector<runtime::PortAddr> targets, uint64_t messages,
                                    uint64_t size = 64) {
    DriveRequest r;
    r.pattern = std::move(pattern);
    r.targets = std::move(targets);
    r.messages = messages;
    r.size = size;
    return runtime::request(host_->client(), drive_port(driver), std::move(r), kDeadline);
  }

  std::string dir_;
  std::unique_ptr<Host> host_;
};

ActorSpec actor_spec(const char* proc, const char* name, std::string_view type) {
  return ActorSpec{proc, name, std::string(type), {}};
}

// alpha (ipc), beta (ipc, behind gateway edge), gamma (tcp): drivers and echoes everywhere.
TopologySpec three_procs(TopologyTest& t, const std::function<ChannelAddr(const std::string&)>& ipc) {
  (void)t;
  TopologySpec spec;
  spec.name = "three";
  spec.gateways.push_back({"edge", ipc("edge"), {}});
  spec.procs.push_back({"alpha", ipc("alpha"), std::nullopt, 1, std::nullopt, {}, std::nullopt});
  spec.procs.push_back({"beta", ipc("beta"), "edge", 1, std::nullopt, {}, std::nullopt});
  spec.procs.push_back({"gamma", *ChannelAddr::parse("tcp://127.0.0.1:0"), std::nullopt, 1,
                        std::nullopt, {}, std::nullopt});
  for (const char* p : {"alpha", "beta", "gamma"}) {
    spec.actors.push_back(actor_spec(p, "driver", kDriverType));
    spec.actors.push_back(actor_spec(p, "echo", kEchoType));
  }
  return spec;
}

// The inodes of the sockets process `pid` holds open.
std::set<std::string> socket_inodes(const std::string& pid) {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + pid + "/fd", ec)) {
    std::error_code link_ec;
    const std::string target = std::filesystem::read_symlink(e.path(), link_ec).string();
    if (target.rfind("socket:", 0) == 0) inodes.insert(target);
  }
  return inodes;
}

// R-SEC-3: a launched proc inherits none of the host's sockets (its gateway's listener, its
// channels), and socket files and the folders made for them are private to the user.
TEST_F(TopologyTest, R_SEC_3_ProcsInheritNoSocketOfTheHostAndSocketFilesArePrivate) {
  const std::string sub = dir_ + "/n";  // made by the nodes (socket paths: at most 107 bytes)
  auto spec = three_procs(*this, [&](const std::string& n) {
    return *ChannelAddr::parse(absl::StrCat("ipc://", sub, "/", n, ".sock"));
  });
  up(spec);
  const std::set<std::string> host = socket_inodes("self");
  ASSERT_FALSE(host.empty());
  for (const LaunchedProc& p : host_->procs()) {
    for (const std::string& inode : socket_inodes(std::to_string(p.pid))) {
      EXPECT_EQ(host.count(inode), 0u) << p.name << " inherited the host's " << inode;
    }
  }
  struct stat st {};
  ASSERT_EQ(::stat((sub + "/edge.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the gateway's socket file";
  ASSERT_EQ(::stat((sub + "/alpha.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "a proc's socket file";
  ASSERT_EQ(::stat(sub.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "the socket folder a node created";
}

// The bytes of /proc/<pid>/<file> (cmdline, environ).
std::string proc_file(pid_t pid, const char* file) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/", file), std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// R-SEC-1: `postal up` runs its topology with a secret: every launched proc got it (the
// workload crosses procs and the gateway, authenticated), and a client without it is refused by
// a proc and by the gateway (REJECT auth_required: its envelope returns, the channel closes).
TEST_F(TopologyTest, R_SEC_1_APostalUpTopologyAuthenticatesEveryChannelWithItsSecret) {
  up(three_procs(*this, [&](const std::string& n) { return ipc(n); }));
  ASSERT_FALSE(host_->secret().empty());
  auto r = drive(actor("alpha", "driver"), "ping-pong", {payload_port(actor("beta", "echo"))}, 200);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->error.empty()) << r->error;
  EXPECT_EQ(r->messages, 200u);
  IoThread io;
  for (const ChannelAddr& addr :
       {host_->find_proc("gamma")->listen, host_->gateways()[0]->listen_addr()}) {
    SCOPED_TRACE(addr.to_string());
    auto stranger = ChannelClient::dial(io, addr, host_->proc());  // no key
    ASSERT_TRUE(stranger.ok()) << stranger.status();
    (*stranger)->post(runtime::MessageEnvelope::make(host_->client().self_addr(),
                                                     payload_port(actor("gamma", "echo")),
                                                     wire::Any::make(Payload{})),
                      host_->proc());
    ASSERT_TRUE(test_support::wait_for([&] { return (*stranger)->closed(); }, kDeadline));
    EXPECT_TRUE((*stranger)->rejected());
    EXPECT_NE((*stranger)->status().message().find("requires authentication"),
              std::string_view::npos)
        << (*stranger)->status();
  }
}

// R-SEC-1: `tls = "on"` in a topology reaches every launched proc (as --tls on): their tcp
// channels run TLS even on loopback, traffic flows, and a member's plaintext client (the right
// key, tls off) is refused by a child's server with "requires TLS". The file's field parses.
TEST_F(TopologyTest, R_SEC_1_ATopologyWithTlsOnRunsTlsOnEveryTcpChannelOfItsProcs) {
  absl::StatusOr<TopologySpec> parsed = parse_topology(
      "[topology]\nname = \"t\"\ntls = \"on\"\n[[proc]]\nname = \"a\"\nlisten = \"ipc://@t-a\"\n",
      "t.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->tls, TlsMode::kOn);
  absl::StatusOr<TopologySpec> bad = parse_topology(
      "[topology]\nname = \"t\"\ntls = \"maybe\"\n[[proc]]\nname = \"a\"\nlisten = "
      "\"ipc://@t-a\"\n",
      "t.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"auto\""), std::string_view::npos) << bad.status();

  TopologySpec spec;
  spec.name = "tls";
  spec.tls = TlsMode::kOn;
  for (const char* p : {"alpha", "gamma"}) {
    spec.procs.push_back({p, tcp(), std::nullopt, 1, std::nullopt, {}, std::nullopt});
    spec.actors.push_back(actor_spec(p, "driver", kDriverType));
    spec.actors.push_back(actor_spec(p, "echo", kEchoType));
  }
  up(spec);
  for (auto [from, to] : {std::pair{"alpha", "gamma"}, std::pair{"gamma", "alpha"}}) {
    auto r = drive(actor(from, "driver"), "ping-pong", {payload_port(actor(to, "echo"))}, 200);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->error.empty()) << r->error;
    EXPECT_EQ(r->messages, 200u);
  }
  IoThread io;
  ChannelOptions plain;
  plain.key = *ChannelKey::derive(host_->secret());
  plain.tls = TlsMode::kOff;
  auto member = ChannelClient::dial(io, host_->find_proc("gamma")->listen, host_->proc(), plain);
  ASSERT_TRUE(member.ok()) << member.status();
  (*member)->post(runtime::MessageEnvelope::make(host_->client().self_addr(),
                                                 payload_port(actor("gamma", "echo")),
                                                 wire::Any::make(Payload{})),
                  host_->proc());
  ASSERT_TRUE(test_support::wait_for([&] { return (*member)->closed(); }, kDeadline));
  EXPECT_NE((*member)->status().message().find("requires TLS"), std::string_view::npos)
      << (*member)->status();
}

// R-SEC-3 with R-SEC-1: the secret reaches a launched proc on an inherited pipe: its argv names
// the fd, and neither its argv nor its environment holds the secret; the fd is closed once read.
TEST_F(TopologyTest, R_SEC_3_TheSecretIsInNoChildsArgvOrEnvironment) {
  up(three_procs(*this, [&](const std::string& n) { return ipc(n); }));
  const std::string secret = host_->secret();
  ASSERT_EQ(secret.size(), 32u);
  const std::string hex = absl::BytesToHexString(secret);
  for (const LaunchedProc& p : host_->procs()) {
    SCOPED_TRACE(p.name);
    const std::string cmdline = proc_file(p.pid, "cmdline");
    const std::string environ_ = proc_file(p.pid, "environ");
    ASSERT_FALSE(cmdline.empty());
    EXPECT_NE(cmdline.find(std::string("--secret-fd\0004", 13)), std::string::npos);
    for (const std::string* file : {&cmdline, &environ_}) {
      EXPECT_EQ(file->find(secret), std::string::npos);
      EXPECT_EQ(file->find(hex), std::string::npos);
    }
    std::error_code ec;  // the ready pipe and the secret pipe are closed once used
    for (const auto& e : std::filesystem::directory_iterator(absl::StrCat("/proc/", p.pid, "/fd"), ec)) {
      if (std::stoi(e.path().filename().string()) <= 2) continue;  // stdin/out/err: the test's
      std::error_code link_ec;
      const std::string target = std::filesystem::read_symlink(e.path(), link_ec).string();
      EXPECT_NE(target.rfind("pipe:", 0), 0u) << "fd " << e.path().filename() << " is a " << target;
    }
  }
}

TEST_F(TopologyTest, ThreeProcsOverIpcAndTcpWithAGateway) {
  up(three_procs(*this, [&](const std::string& n) { return ipc(n); }));
  EXPECT_EQ(host_->find_proc("beta")->addr.location.vias().size(), 1u);  // advertised via edge
  struct Case {
    const char* from;
    const char* to;
  };
  for (Case c : {Case{"alpha", "beta"}, Case{"beta", "gamma"}, Case{"gamma", "alpha"},
                 Case{"alpha", "gamma"}}) {
    auto r = drive(actor(c.from, "driver"), "ping-pong", {payload_port(actor(c.to, "echo"))}, 200);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->error.empty()) << c.from << "->" << c.to << ": " << r->error;
    EXPECT_EQ(r->messages, 200u) << c.from << "->" << c.to;
  }
}

TEST_F(TopologyTest, R_GW_1_PingPongAcrossASharedGateway) {
  TopologySpec spec;
  spec.name = "shared";
  spec.gateways.push_back({"edge", ipc("edge"), {}});
  spec.procs.push_back({"left", ipc("left"), "edge", 1, std::nullopt, {}, std::nullopt});
  spec.procs.push_back({"right", tcp(), "edge", 1, std::nullopt, {}, std::nullopt});
  spec.actors = {actor_spec("left", "driver", kDriverType), actor_spec("right", "echo", kEchoType)};
  up(spec);
  auto r = drive(actor("left", "driver"), "ping-pong", {payload_port(actor("right", "echo"))}, 500);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->error.empty()) << r->error;
  EXPECT_EQ(r->messages, 500u);
}

TEST_F(TopologyTest, R_GW_1_RouteThroughTwoGatewaysByViaHops) {
  TopologySpec spec;
  spec.name = "twogw";
  spec.gateways.push_back({"outer", ipc("outer"), {"inner"}});
  spec.gateways.push_back({"inner", ipc("inner"), {}});
  spec.procs.push_back({"client", ipc("client"), std::nullopt, 1, std::nullopt, {}, std::nullopt});
  spec.procs.push_back({"server", ipc("server"), "inner", 1, std::nullopt, {}, std::nullopt});
  spec.actors = {actor_spec("client", "driver", kDriverType),
                 actor_spec("server", "echo", kEchoType)};
  up(spec);
  // The echo, reached by entering at `outer`, which peels itself and passes to its peer `inner`.
  runtime::ActorAddr echo = actor("server", "echo");
  runtime::Location via_both = *runtime::Location::parse(
      absl::StrCat("outer.inner.", host_->gateways()[0]->listen_addr().to_string()));
  runtime::ActorAddr through_both{echo.id, via_both};
  auto r = drive(actor("client", "driver"), "ping-pong", {payload_port(through_both)}, 300);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->error.empty()) << r->error;
  EXPECT_EQ(r->messages, 300u);
}

TEST_F(TopologyTest, R_CHAN_4_HundredThousandMessagesArriveInOrderAcrossAGateway) {
  up(three_procs(*this, [&](const std::string& n) { return ipc(n); }));
  auto r = drive(actor("alpha", "driver"), "stream", {payload_port(actor("beta", "echo"))}, kVolume);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->error.empty()) << r->error;
  EXPECT_EQ(r->messages, kVolume);
  EXPECT_EQ(r->out_of_order, 0u);
  EXPECT_EQ(r->failures, 0u);
}

TEST_F(TopologyTest, R_FAIL_3_UndeliverableAtARemoteProcReturnsAcrossTheNetwork) {
  up(three_procs(*this, [&](const std::string& n) { return ipc(n); }));
  // From the host's client to an actor that does not exist on beta (behind the gateway).
  runtime::ActorAddr ghost{
      runtime::ActorId{host_->find_proc("beta")->addr.id,
                       runtime::Uid::singleton(*runtime::Label::parse("ghost"))},
      host_->find_proc("beta")->addr.location};
  runtime::PortRef<Payload>(payload_port(ghost)).send(host_->client(), Payload{});
  auto back = host_->client().next_undeliverable(kDeadline);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ((*back)->delivery_failures().size(), 1u);
  EXPECT_EQ((*back)->root_failure()->invalid, runtime::InvalidReason::kActorNotExist);
  EXPECT_EQ((*back)->dest().id, payload_port(ghost).id);  // the envelope came back whole
}

TEST_F(TopologyTest, R_ENV_3_TtlExpiresAcrossHopsAndComesBack) {
  up(three_procs(*this, [&](const std::string& n) { return ipc(n); }));
  const runtime::PortAddr echo = payload_port(actor("beta", "echo"));
  int expired = 0, delivered = 0;
  for (uint8_t ttl = 1; ttl <= 8; ++ttl) {
    auto [port, rx] = runtime::open_port<Payload>(host_->client());
    Payload p;
    p.reply_to = port.bind();
    auto env = runtime::MessageEnvelope::make(host_->client().self_addr(), echo,
                                              wire::Any::make(std::move(p)), ttl);
    host_->proc().send(std::move(env));
    // Either the echo answers or the envelope comes back expired: never silence.
    auto reply = rx.recv(absl::Milliseconds(500));
    if (reply.ok()) {
      ++delivered;
      continue;
    }
    auto back = host_->client().next_undeliverable(kDeadline);
    ASSERT_TRUE(back.ok()) << "ttl " << int(ttl) << ": neither delivered nor returned";
    EXPECT_EQ((*back)->root_failure()->kind, runtime::FailureKind::kExpired);
    ++expired;
  }
  EXPECT_GT(expired, 2);  // it takes several hops (proc, gateway, dial router, channel, proc)
  EXPECT_GT(delivered, 0);
}

// Past the 8 MiB frame limit a message crosses procs as a transfer of chunks (docs/wire.md §9),
// there and back; the connections carry on. (Past max_message_bytes it fails alone:
// channel_transfer_test.)
TEST_F(TopologyTest, R_CHAN_3_APayloadPastTheFrameLimitCrossesProcsAndTheConnectionCarriesOn) {
  up(three_procs(*this, [&](const std::string& n) { return ipc(n); }));
  const auto target = payload_port(actor("gamma", "echo"));
  auto big = drive(actor("alpha", "driver"), "ping-pong", {target}, 2, 9 << 20);  // > 8 MiB
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->failures, 0u) << big->error;
  EXPECT_EQ(big->messages, 2u);
  auto small = drive(actor("alpha", "driver"), "ping-pong", {target}, 100);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE(small->error.empty()) << small->error;
  EXPECT_EQ(small->messages, 100u);
}

TEST_F(TopologyTest, ChildDeathIsASupervisionEventWithItsExitStatus) {
  up(three_procs(*this, [&](const std::string& n) { return ipc(n); }));
  ASSERT_TRUE(host_->kill("gamma", SIGKILL).ok());
  auto exit = host_->next_exit(kDeadline);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->name, "gamma");
  EXPECT_TRUE(WIFSIGNALED(exit->wait_status));
  EXPECT_EQ(WTERMSIG(exit->wait_status), SIGKILL);
  EXPECT_NE(exit->to_string().find("killed by signal 9"), std::string::npos) << exit->to_string();
}

TEST_F(TopologyTest, R_CHAN_2_KillNineMidStreamReturnsWhatWasUnackedAndLosesNothingSilently) {
  up(three_procs(*this, [&](const std::string& n) { return ipc(n); }));
  // The sender is a node in this test process, so that its channel's pending set is visible.
  NodeOptions o;
  o.id = runtime::ProcId{runtime::Uid::singleton(*runtime::Label::parse("sender"))};
  o.listen = ipc("sender");
  o.scheduler.workers = 1;
  o.channel.delivery_timeout = absl::Seconds(1);
  o.channel.key = *ChannelKey::derive(host_->secret());  // a member of the topology (R-SEC-1)
  auto node = Node::start(std::move(o));
  ASSERT_TRUE(node.ok()) << node.status();
  auto client = *runtime::Client::attach((*node)->proc(), "streamer");
  runtime::PortRef<Payload> echo(payload_port(actor("gamma", "echo")));
  auto [acks, acks_rx] = runtime::open_port<StreamAck>(*client);

  constexpr int kSent = static_cast<int>(2 * kVolume);
  for (int i = 0; i < kSent; ++i) {
    Payload p;
    p.mode = Payload::kStream;
    p.seq = static_cast<uint64_t>(i);
    p.total = kSent;
    p.ack_to = acks.bind();
    echo.send(*client, std::move(p));
    if (i == kSent / 4) {
      ASSERT_TRUE(host_->kill("gamma", SIGKILL).ok());  // mid-stream
    }
  }
  // Every envelope still unacknowledged when gamma died comes back, with the reason.
  int returned = 0;
  for (;;) {
    auto back = client->next_undeliverable(absl::Seconds(3));
    if (!back.ok()) break;
    const auto* root = (*back)->root_failure();
    ASSERT_NE(root, nullptr);
    EXPECT_EQ(root->kind, runtime::FailureKind::kTransport);
    EXPECT_TRUE(root->transport == runtime::TransportReason::kChannelClosed ||
                root->transport == runtime::TransportReason::kAckTimedOut ||
                root->transport == runtime::TransportReason::kDialFailed)
        << root->to_string();
    ++returned;
  }
  EXPECT_GT(returned, 0);
  EXPECT_LE(returned, kSent);
  const auto stats = (*node)->proc().stats();
  EXPECT_EQ(stats.dropped, 0u) << stats.to_string();           // nothing abandoned silently
  EXPECT_EQ(stats.returned, static_cast<uint64_t>(returned));  // each failure came back once
}

TEST_F(TopologyTest, R_ROUTE_3_ProcRestartedOnTheSameAddressIsRedialedAndTrafficResumes) {
  up(three_procs(*this, [&](const std::string& n) { return ipc(n); }), absl::Seconds(1));
  const auto driver = actor("alpha", "driver");
  auto first = drive(driver, "ping-pong", {payload_port(actor("gamma", "echo"))}, 100);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->error.empty()) << first->error;
  ASSERT_TRUE(host_->kill("gamma", SIGKILL).ok());
  ASSERT_TRUE(host_->next_exit(kDeadline).has_value());
  absl::Status restarted = host_->restart("gamma");
  ASSERT_TRUE(restarted.ok()) << restarted;
  // The cached channel to gamma finds the new server, which does not know its session: what
  // was written to the dead one and not acked comes back; the rest goes out on a fresh session.
  absl::StatusOr<runtime::ActorAddr> echo = absl::UnavailableError("not spawned yet");
  for (int attempt = 0; attempt < 20 && !echo.ok(); ++attempt) {
    echo = host_->spawn("gamma", std::string(kEchoType), "echo", {});
  }
  ASSERT_TRUE(echo.ok()) << echo.status();
  bool resumed = false;
  for (int attempt = 0; attempt < 20 && !resumed; ++attempt) {
    auto r = drive(driver, "ping-pong", {payload_port(*echo)}, 100);
    ASSERT_TRUE(r.ok()) << r.status();
    resumed = r->error.empty() && r->messages == 100;
  }
  EXPECT_TRUE(resumed);
}

}  // namespace
}  // namespace postal::routing
