// A topology whose procs and gateway listen on nats:// addresses, with the nats-server started by
// the host (`[topology] start_nats`): real `postal proc` children talk through it — ping-pong
// between every pair, a stream in order across the gateway, an undeliverable coming back.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nats/nats.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "nats_conn.h"
#include "postal/routing/channel_key.h"
#include "postal/routing/host.h"
#include "postal/routing/nats_users.h"
#include "postal/routing/topology_spec.h"
#include "postal/routing/workload.h"
#include "postal/runtime/port.h"
#include "support/free_port.h"
#include "support/nats_server.h"
#include "support/scratch_dir.h"
#include "support/test_certs.h"

namespace postal::routing {
namespace {

using runtime::ChannelAddr;

constexpr absl::Duration kDeadline = absl::Seconds(120);
#if defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kVolume = 20'000;
#else
constexpr uint64_t kVolume = 100'000;
#endif

using test_support::free_port;

// Procs alpha and beta, each with a driver and an echo, listening on `subject_prefix`.<name> of
// the NATS server at 127.0.0.1:`port`.
TopologySpec two_procs_on_nats(const std::string& name, int port,
                               const std::string& subject_prefix) {
  TopologySpec s;
  s.name = name;
  for (const char* p : {"alpha", "beta"}) {
    s.procs.push_back({p,
                       *ChannelAddr::nats("127.0.0.1", static_cast<uint16_t>(port),
                                          absl::StrCat(subject_prefix, ".", p)),
                       std::nullopt,
                       1,
                       std::nullopt,
                       {},
                       std::nullopt});
    s.actors.push_back({p, "driver", std::string(kDriverType), {}});
    s.actors.push_back({p, "echo", std::string(kEchoType), {}});
  }
  return s;
}

// 100 ping-pongs from alpha's driver to beta's echo, all answered.
void expect_ping_pong_alpha_to_beta(Host& host) {
  DriveRequest r;
  r.pattern = "ping-pong";
  r.targets = {payload_port(*host.actor_addr("beta", "echo"))};
  r.messages = 100;
  r.size = 64;
  auto result = runtime::request(host.client(), drive_port(*host.actor_addr("alpha", "driver")),
                                 std::move(r), kDeadline);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->error.empty()) << result->error;
  EXPECT_EQ(result->messages, 100u);
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

  std::string url() const { return absl::StrCat("nats://127.0.0.1:", port_); }

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

// A libnats connection presenting `creds` (nothing when empty), recording the server's
// permission violations.
class NatsPeer {
 public:
  NatsPeer(const std::string& url, const internal::NatsCredentials* creds) {
    natsOptions* o = nullptr;
    natsOptions_Create(&o);
    natsOptions_SetURL(o, url.c_str());
    natsOptions_SetMaxReconnect(o, 0);
    natsOptions_SetErrorHandler(o, &NatsPeer::on_error, this);
    if (creds != nullptr && !creds->token.empty()) natsOptions_SetToken(o, creds->token.c_str());
    if (creds != nullptr && !creds->user.empty()) {
      natsOptions_SetUserInfo(o, creds->user.c_str(), creds->password.c_str());
    }
    status_ = natsConnection_Connect(&nc_, o);
    natsOptions_Destroy(o);
  }
  ~NatsPeer() {
    for (natsSubscription* s : subs_) natsSubscription_Destroy(s);
    if (nc_ != nullptr) {
      natsConnection_Close(nc_);
      natsConnection_Destroy(nc_);
    }
  }
  bool connected() const { return status_ == NATS_OK; }
  void subscribe(const std::string& subject) {
    natsSubscription* sub = nullptr;
    if (natsConnection_SubscribeSync(&sub, nc_, subject.c_str()) == NATS_OK) subs_.push_back(sub);
    natsConnection_Flush(nc_);
  }
  void publish(const std::string& subject) {
    natsConnection_PublishString(nc_, subject.c_str(), "x");
    natsConnection_Flush(nc_);
  }
  // Once `n` violations were reported (false at the deadline): their texts.
  std::vector<std::string> violations(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return errors_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
    return errors_;
  }

 private:
  static void on_error(natsConnection* nc, natsSubscription*, natsStatus s, void* self) {
    auto* p = static_cast<NatsPeer*>(self);
    const char* text = nullptr;
    natsConnection_GetLastError(nc, &text);
    absl::MutexLock lock(&p->mu_);
    p->errors_.push_back(absl::StrCat(natsStatus_GetText(s), ": ", text ? text : ""));
  }

  natsConnection* nc_ = nullptr;
  natsStatus status_ = NATS_ERR;
  std::vector<natsSubscription*> subs_;
  absl::Mutex mu_;
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
};

// R-SEC-4 (R-SEC-1 carried to NATS): the nats-server `postal up` starts takes only the users
// derived from the topology's secret — a stranger, the bare token and a wrong password are refused.
TEST_F(NatsTopologyTest, R_SEC_4_TheStartedNatsServerRefusesAClientWithoutTheTopologysUsers) {
  up();
  auto key = ChannelKey::derive(host_->secret());
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_FALSE(NatsPeer(url(), nullptr).connected()) << "a client without credentials got in";
  internal::NatsCredentials token_only;
  token_only.token = internal::nats_token(**key);
  EXPECT_FALSE(NatsPeer(url(), &token_only).connected()) << "the token alone is not a user";
  internal::NatsCredentials wrong = internal::nats_credentials(key->get(), "alpha");
  wrong.password = internal::nats_credentials(key->get(), "beta").password;
  EXPECT_FALSE(NatsPeer(url(), &wrong).connected()) << "beta's password let alpha in";
  const internal::NatsCredentials alpha = internal::nats_credentials(key->get(), "alpha");
  EXPECT_TRUE(NatsPeer(url(), &alpha).connected()) << "alpha's own credentials were refused";
  // And the topology works through it.
  auto r = drive(actor("alpha", "driver"), "ping-pong", actor("gamma", "echo"), 100);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->messages, 100u);
}

// R-SEC-4: each member may serve (subscribe to) only its own subject and inboxes, and publish
// only to the topology's subjects and inboxes; the dial-only user serves nothing. Each forbidden
// call follows an allowed one, so a violation reported for the allowed one would show.
TEST_F(NatsTopologyTest, R_SEC_4_AMemberMayServeOnlyItsOwnSubjectAndPublishOnlyInTheTopology) {
  up();
  auto key = ChannelKey::derive(host_->secret());
  ASSERT_TRUE(key.ok()) << key.status();
  const std::string beta = std::string(at("beta").subject());
  const std::string alpha_subject = std::string(at("alpha").subject());
  const internal::NatsCredentials alpha = internal::nats_credentials(key->get(), "alpha");
  NatsPeer a(url(), &alpha);
  ASSERT_TRUE(a.connected());
  a.subscribe(alpha.inbox_prefix + ".mine");
  a.subscribe(beta + ".t.*");  // serving beta: forbidden
  std::vector<std::string> v = a.violations(1);
  ASSERT_EQ(v.size(), 1u) << "alpha subscribed to beta's subject";
  EXPECT_NE(v[0].find(beta), std::string::npos) << v[0];
  a.subscribe(internal::nats_inbox_prefix("beta") + ".*");  // reading beta's inboxes
  v = a.violations(2);
  ASSERT_EQ(v.size(), 2u) << "alpha subscribed to beta's inboxes";
  a.publish(beta + ".t.stray");  // allowed: beta's tunnel drops an unknown connection
  a.publish("$JS.API.INFO");     // outside the topology
  v = a.violations(3);
  ASSERT_EQ(v.size(), 3u) << "alpha published outside the topology";
  EXPECT_NE(v[2].find("$JS.API.INFO"), std::string::npos) << v[2];

  const internal::NatsCredentials client = internal::nats_credentials(key->get(), "");
  EXPECT_EQ(client.user, internal::kNatsDialOnlyUser);
  NatsPeer c(url(), &client);
  ASSERT_TRUE(c.connected());
  c.subscribe(client.inbox_prefix + ".mine");
  c.subscribe(alpha_subject + ".t.*");  // the dial-only user serves nothing
  v = c.violations(1);
  ASSERT_EQ(v.size(), 1u) << "the dial-only user subscribed to alpha's subject";
  EXPECT_NE(v[0].find(alpha_subject), std::string::npos) << v[0];
  // The members themselves are unaffected.
  auto r = drive(actor("beta", "driver"), "ping-pong", actor("alpha", "echo"), 100);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->messages, 100u);
}

TEST_F(NatsTopologyTest, StartNatsIsCheckedInTheFile) {
  for (const char* bad : {"4222", "127.0.0.1", "127.0.0.1:0", "[::1]:4222", "h:99999"}) {
    const std::string toml =
        absl::StrCat("[topology]\nname = \"t\"\nstart_nats = \"", bad,
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

TEST_F(NatsTopologyTest, NatsTlsIsCheckedInTheFile) {
  const std::string head = "[topology]\nname = \"t\"\n";
  const std::string proc = "[[proc]]\nname = \"a\"\nlisten = \"nats://127.0.0.1:4222/t.a\"\n";
  struct Bad {
    const char* keys;
    const char* says;
  };
  for (Bad b :
       {Bad{"nats_tls_ca = \"\"\n", "nats_tls_ca is empty"},
        Bad{"nats_tls_cert = \"c.pem\"\nnats_tls_key = \"k.pem\"\n", "needs nats_tls_ca"},
        Bad{"nats_tls_ca = \"ca.pem\"\nnats_tls_cert = \"c.pem\"\n", "needs both"},
        Bad{"nats_tls_ca = 7\n", "nats_tls_ca"},
        Bad{"start_nats = \"127.0.0.1:4222\"\nnats_tls_ca = \"ca.pem\"\n", "serves no TLS"}}) {
    absl::StatusOr<TopologySpec> s = parse_topology(head + b.keys + proc, "t.toml");
    ASSERT_FALSE(s.ok()) << b.keys;
    EXPECT_NE(s.status().message().find(b.says), std::string::npos) << s.status();
  }
  absl::StatusOr<TopologySpec> ok = parse_topology(
      head + "nats_tls_ca = \"ca.pem\"\nnats_tls_cert = \"c.pem\"\nnats_tls_key = \"k.pem\"\n" +
          proc,
      "t.toml");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->nats_tls.ca_file, "ca.pem");
  EXPECT_EQ(ok->nats_tls.cert_file, "c.pem");
  EXPECT_EQ(ok->nats_tls.key_file, "k.pem");
}

// `nats_tls_ca`/`_cert`/`_key` reach every launched proc: real `postal proc` children talk to a
// nats-server that serves TLS and verifies client certificates (the host's own client too).
TEST(NatsTlsTopologyTest, R_SEC_1_ProcsWithNatsTlsTalkThroughAServerThatRequiresIt) {
  ASSERT_FALSE(test_support::NatsServer::binary().empty()) << test_support::NatsServer::kMissing;
  test_support::ScratchDir scratch;
  test_support::TestCerts certs(scratch.path() / "certs");
  ASSERT_TRUE(certs.ok()) << "openssl failed; see " << certs.log();
  test_support::NatsServer nats(
      scratch.path() / "nats", {"--tls", "--tlscert", certs.server_cert(), "--tlskey",
                                certs.server_key(), "--tlsverify", "--tlscacert", certs.ca_file()});
  ASSERT_TRUE(nats.ready()) << nats.log();
  TopologySpec s = two_procs_on_nats(absl::StrCat("nats-tls-", ::getpid()), nats.port(),
                                     absl::StrCat("postal.tls", ::getpid()));
  s.nats_tls = {certs.ca_file(), certs.client_cert(), certs.client_key()};
  HostOptions o;
  o.postal_binary = POSTAL_BINARY;
  o.proc_workers = 1;
  auto host = Host::up(s, o);
  ASSERT_TRUE(host.ok()) << host.status();
  expect_ping_pong_alpha_to_beta(**host);
}

// R-SEC-4 on a cluster the operator runs: `postal nats-users` prints the users and permissions of
// a topology from its secret; a nats-server configured with them takes the topology's procs (a
// real `postal proc` each, given the same secret) and keeps each to its own subject.
TEST(NatsUsersTest, R_SEC_4_AClusterConfiguredByNatsUsersKeepsEachProcToItsSubject) {
  ASSERT_FALSE(test_support::NatsServer::binary().empty()) << test_support::NatsServer::kMissing;
  test_support::ScratchDir scratch;
  const std::string secret(32, 'k');
  const std::filesystem::path secret_file = scratch.path() / "topology.secret";
  std::ofstream(secret_file) << secret;
  // The topology names the server's port, so the test picks it before starting the server.
  const int port = free_port();
  const TopologySpec s = two_procs_on_nats(absl::StrCat("nats-users-", ::getpid()), port,
                                           absl::StrCat("postal.users", ::getpid()));
  const std::filesystem::path toml = scratch.path() / "t.toml";
  std::ofstream(toml) << "[topology]\nname = \"" << s.name << "\"\n"
                      << "[[proc]]\nname = \"alpha\"\nlisten = \"" << s.procs[0].listen.to_string()
                      << "\"\n[[proc]]\nname = \"beta\"\nlisten = \""
                      << s.procs[1].listen.to_string() << "\"\n";
  const std::filesystem::path conf = scratch.path() / "auth.conf";
  ASSERT_EQ(std::system(absl::StrCat(POSTAL_BINARY, " nats-users '", toml.string(),
                                     "' --secret-fd 3 3< '", secret_file.string(), "' > '",
                                     conf.string(), "'")
                            .c_str()),
            0);
  // Without the secret it says what it needs and prints nothing.
  const std::filesystem::path none = scratch.path() / "none.conf";
  EXPECT_NE(std::system(absl::StrCat("env -u POSTAL_SECRET_FD ", POSTAL_BINARY, " nats-users '",
                                     toml.string(), "' > '", none.string(), "' 2>/dev/null")
                            .c_str()),
            0);
  EXPECT_EQ(std::filesystem::file_size(none), 0u);
  auto key = ChannelKey::derive(secret);
  ASSERT_TRUE(key.ok()) << key.status();
  std::stringstream printed;
  printed << std::ifstream(conf).rdbuf();
  EXPECT_EQ(printed.str(), nats_authorization(s, **key)) << "the command and the library agree";

  test_support::NatsServer nats(scratch.path() / "nats",
                                {"-c", conf.string(), "-p", std::to_string(port)});
  ASSERT_TRUE(nats.ready()) << nats.log();
  HostOptions o;
  o.postal_binary = POSTAL_BINARY;
  o.proc_workers = 1;
  o.secret = secret;
  auto host = Host::up(s, o);
  ASSERT_TRUE(host.ok()) << host.status();
  expect_ping_pong_alpha_to_beta(**host);

  EXPECT_FALSE(NatsPeer(absl::StrCat("nats://127.0.0.1:", port), nullptr).connected())
      << "a stranger got in";
  const internal::NatsCredentials alpha = internal::nats_credentials(key->get(), "alpha");
  NatsPeer a(absl::StrCat("nats://127.0.0.1:", port), &alpha);
  ASSERT_TRUE(a.connected());
  a.subscribe(std::string(s.procs[1].listen.subject()) + ".t.*");
  std::vector<std::string> v = a.violations(1);
  ASSERT_EQ(v.size(), 1u) << "alpha subscribed to beta's subject";
}

}  // namespace
}  // namespace postal::routing
