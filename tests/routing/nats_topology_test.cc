// A topology whose procs and gateway listen on nats:// addresses, with the nats-server started by
// the host (`[topology] start_nats`): real `postal proc` children talk through it — ping-pong
// between every pair, a stream in order across the gateway, an undeliverable coming back.
#include <arpa/inet.h>
#include <nats/nats.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nats_conn.h"
#include "postal/routing/channel_key.h"
#include "postal/routing/host.h"
#include "postal/routing/topology_spec.h"
#include "postal/routing/workload.h"
#include "postal/runtime/port.h"
#include "support/nats_server.h"

namespace postal::routing {
namespace {

using runtime::ChannelAddr;

constexpr absl::Duration kDeadline = absl::Seconds(120);
#if defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kVolume = 20'000;
#else
constexpr uint64_t kVolume = 100'000;
#endif

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

class NatsTopologyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(test_support::NatsServer::binary().empty()) << test_support::NatsServer::kMissing;
    port_ = free_port();
  }
  ChannelAddr at(const std::string& name) const {
    return *ChannelAddr::nats("127.0.0.1", static_cast<uint16_t>(port_),
                              absl::StrCat("postal.test", ::getpid(), ".", name));
  }
  TopologySpec spec() const {
    TopologySpec s;
    s.name = absl::StrCat("nats-", ::getpid());
    s.start_nats = absl::StrCat("127.0.0.1:", port_);
    s.gateways.push_back({"edge", at("edge"), {}});
    s.procs.push_back({"alpha", at("alpha"), std::nullopt, 1, std::nullopt, {}, std::nullopt});
    s.procs.push_back({"beta", at("beta"), "edge", 1, std::nullopt, {}, std::nullopt});
    s.procs.push_back({"gamma", at("gamma"), std::nullopt, 1, std::nullopt, {}, std::nullopt});
    for (const char* p : {"alpha", "beta", "gamma"}) {
      s.actors.push_back({p, "driver", std::string(kDriverType), {}});
      s.actors.push_back({p, "echo", std::string(kEchoType), {}});
    }
    return s;
  }
  void up() {
    HostOptions o;
    o.postal_binary = POSTAL_BINARY;
    o.proc_workers = 1;
    auto host = Host::up(spec(), o);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = *std::move(host);
  }
  runtime::ActorAddr actor(const char* proc, const char* name) {
    auto a = host_->actor_addr(proc, name);
    EXPECT_TRUE(a.has_value()) << proc << "/" << name;
    return a.value_or(runtime::ActorAddr{});
  }
  absl::StatusOr<DriveResult> drive(const runtime::ActorAddr& driver, std::string pattern,
                                    const runtime::ActorAddr& echo, uint64_t messages) {
    DriveRequest r;
    r.pattern = std::move(pattern);
    r.targets = {payload_port(echo)};
    r.messages = messages;
    r.size = 64;
    return runtime::request(host_->client(), drive_port(driver), std::move(r), kDeadline);
  }

  int port_ = 0;
  std::unique_ptr<Host> host_;
};

TEST_F(NatsTopologyTest, R_CHAN_4_ProcsAndAGatewayOnNatsTalkInEveryDirection) {
  up();
  EXPECT_EQ(host_->find_proc("beta")->addr.location.vias().size(), 1u);  // advertised via edge
  struct Case {
    const char* from;
    const char* to;
  };
  for (Case c : {Case{"alpha", "beta"}, Case{"beta", "gamma"}, Case{"gamma", "alpha"}}) {
    auto r = drive(actor(c.from, "driver"), "ping-pong", actor(c.to, "echo"), 200);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->error.empty()) << c.from << "->" << c.to << ": " << r->error;
    EXPECT_EQ(r->messages, 200u) << c.from << "->" << c.to;
  }
  auto r = drive(actor("alpha", "driver"), "stream", actor("beta", "echo"), kVolume);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->error.empty()) << r->error;
  EXPECT_EQ(r->messages, kVolume);
  EXPECT_EQ(r->out_of_order, 0u);
  EXPECT_EQ(r->failures, 0u);
}

TEST_F(NatsTopologyTest, R_FAIL_3_AnUndeliverableComesBackAcrossNats) {
  up();
  runtime::ActorAddr ghost{
      runtime::ActorId{host_->find_proc("gamma")->addr.id,
                       runtime::Uid::singleton(*runtime::Label::parse("ghost"))},
      host_->find_proc("gamma")->addr.location};
  runtime::PortRef<Payload>(payload_port(ghost)).send(host_->client(), Payload{});
  auto back = host_->client().next_undeliverable(kDeadline);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_NE((*back)->root_failure(), nullptr);
  EXPECT_EQ((*back)->root_failure()->invalid, runtime::InvalidReason::kActorNotExist);
}

// R-SEC-1 carried to NATS: the nats-server `postal up` starts takes only clients presenting the
// token derived from the topology's secret — its procs do, a stranger does not.
TEST_F(NatsTopologyTest, R_SEC_1_TheStartedNatsServerRefusesAClientWithoutTheTopologysToken) {
  up();
  const std::string url = absl::StrCat("nats://127.0.0.1:", port_);
  natsConnection* nc = nullptr;
  natsOptions* o = nullptr;
  ASSERT_EQ(natsOptions_Create(&o), NATS_OK);
  ASSERT_EQ(natsOptions_SetURL(o, url.c_str()), NATS_OK);
  ASSERT_EQ(natsOptions_SetMaxReconnect(o, 0), NATS_OK);
  EXPECT_NE(natsConnection_Connect(&nc, o), NATS_OK) << "a client without the token got in";
  if (nc != nullptr) natsConnection_Destroy(nc);
  nc = nullptr;
  auto key = ChannelKey::derive(host_->secret());
  ASSERT_TRUE(key.ok()) << key.status();
  const std::string token = internal::nats_token(**key);
  ASSERT_EQ(natsOptions_SetToken(o, token.c_str()), NATS_OK);
  EXPECT_EQ(natsConnection_Connect(&nc, o), NATS_OK) << "the topology's own token was refused";
  if (nc != nullptr) natsConnection_Destroy(nc);
  natsOptions_Destroy(o);
  // And the topology works through it.
  auto r = drive(actor("alpha", "driver"), "ping-pong", actor("gamma", "echo"), 100);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->messages, 100u);
}

TEST_F(NatsTopologyTest, StartNatsIsCheckedInTheFile) {
  for (const char* bad : {"4222", "127.0.0.1", "127.0.0.1:0", "[::1]:4222", "h:99999"}) {
    const std::string toml = absl::StrCat(
        "[topology]\nname = \"t\"\nstart_nats = \"", bad,
        "\"\n[[proc]]\nname = \"a\"\nlisten = \"nats://127.0.0.1:4222/t.a\"\n");
    absl::StatusOr<TopologySpec> s = parse_topology(toml, "t.toml");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("start_nats"), std::string::npos) << s.status();
  }
  absl::StatusOr<TopologySpec> ok = parse_topology(
      "[topology]\nname = \"t\"\nstart_nats = \"127.0.0.1:4222\"\n[[proc]]\nname = \"a\"\n"
      "listen = \"nats://127.0.0.1:4222/t.a\"\n",
      "t.toml");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->start_nats, "127.0.0.1:4222");
  EXPECT_EQ(ok->procs[0].listen.subject(), "t.a");
}

}  // namespace
}  // namespace postal::routing
