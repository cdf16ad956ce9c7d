// nats:// channels through a nats-server that serves TLS (ChannelOptions::nats_tls): a tunnel
// with the CA delivers; one without TLS, or trusting another CA, is refused before anything is
// sent; a server that verifies clients takes only tunnels with a client certificate.
#include <memory>
#include <string>

#include "channel_fixture.h"
#include "support/nats_server.h"
#include "support/scratch_dir.h"
#include "support/test_certs.h"

namespace postal::routing::channel_test {
namespace {

using test_support::NatsServer;
using test_support::TestCerts;

class NatsTlsChannelTest : public ChannelTest {
 protected:
  void SetUp() override {
    ASSERT_FALSE(NatsServer::binary().empty()) << NatsServer::kMissing;
    ASSERT_TRUE(certs_.ok()) << "openssl failed; see " << certs_.log();
  }
  // `verify`: the server also asks clients for a certificate signed by the CA. `elsewhere`: its
  // certificate names another host.
  void start_nats(bool verify, bool elsewhere = false) {
    std::vector<std::string> tls{
        "--tls", "--tlscert", elsewhere ? certs_.elsewhere_cert() : certs_.server_cert(),
        "--tlskey", elsewhere ? certs_.elsewhere_key() : certs_.server_key()};
    if (verify) tls.insert(tls.end(), {"--tlsverify", "--tlscacert", certs_.ca_file()});
    nats_ = std::make_unique<NatsServer>(scratch_.path() / "nats", tls);
    ASSERT_TRUE(nats_->ready()) << nats_->log();
  }
  ChannelAddr addr(const std::string& host = "127.0.0.1") const {
    return must(ChannelAddr::nats(host, static_cast<uint16_t>(nats_->port()), "postal.test.tls"));
  }
  ChannelOptions with(NatsTls tls) const {
    ChannelOptions o;
    o.nats_tls = std::move(tls);
    o.dial_timeout = absl::Seconds(5);
    return o;
  }
  absl::Status serve_status(const ChannelOptions& o, const std::string& host = "127.0.0.1") {
    return ChannelServer::serve(io_, addr(host), receiving_, receiving_, o).status();
  }
  void delivers(const ChannelOptions& o) {
    auto server = serve(addr(), o);
    auto client = dial(server->local_addr(), o);
    for (int n = 0; n < 200; ++n) post(*client, n, n % 7 == 0 ? 3000 : 10);
    expect_in_order(0, 200);
    expect_nothing_more();
  }

  test_support::ScratchDir scratch_;
  TestCerts certs_{scratch_.path() / "certs"};
  std::unique_ptr<NatsServer> nats_;
};

TEST_F(NatsTlsChannelTest, R_SEC_1_WithTheCaATunnelDeliversWithoutTlsOrAnotherCaNothingConnects) {
  start_nats(/*verify=*/false);
  delivers(with({certs_.ca_file(), "", ""}));

  const absl::Status plain = serve_status(with({}));
  EXPECT_EQ(plain.code(), absl::StatusCode::kUnavailable) << plain;
  EXPECT_NE(plain.message().find("wants TLS"), std::string::npos) << plain;

  const absl::Status untrusted = serve_status(with({certs_.other_ca_file(), "", ""}));
  EXPECT_EQ(untrusted.code(), absl::StatusCode::kUnavailable) << untrusted;
  EXPECT_NE(untrusted.message().find("with TLS"), std::string::npos) << untrusted;

  const absl::Status missing = serve_status(with({certs_.path("no-such-ca.pem"), "", ""}));
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument) << missing;
  EXPECT_NE(missing.message().find("no-such-ca.pem"), std::string::npos) << missing;
}

TEST_F(NatsTlsChannelTest, R_SEC_1_AVerifyingServerTakesOnlyTunnelsWithAClientCertificate) {
  start_nats(/*verify=*/true);
  const absl::Status anonymous = serve_status(with({certs_.ca_file(), "", ""}));
  EXPECT_EQ(anonymous.code(), absl::StatusCode::kUnavailable) << anonymous;
  delivers(with({certs_.ca_file(), certs_.client_cert(), certs_.client_key()}));
}

// A certificate signed by the CA but for another host is refused, whether the server was dialed
// by name or by IP address.
TEST_F(NatsTlsChannelTest, R_SEC_1_TheServersCertificateMustNameTheHostDialed) {
  start_nats(/*verify=*/false, /*elsewhere=*/true);
  const ChannelOptions o = with({certs_.ca_file(), "", ""});
  for (const char* host : {"localhost", "127.0.0.1"}) {
    const absl::Status s = serve_status(o, host);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << host << ": " << s;
  }
}

TEST_F(NatsTlsChannelTest, R_SEC_1_DialedByTheNameItsCertificateCarriesAChannelDelivers) {
  start_nats(/*verify=*/false);
  const ChannelOptions o = with({certs_.ca_file(), "", ""});
  auto server = must(ChannelServer::serve(io_, addr("localhost"), receiving_, receiving_, o));
  auto client = dial(server->local_addr(), o);
  for (int n = 0; n < 50; ++n) post(*client, n);
  expect_in_order(0, 50);
}

}  // namespace
}  // namespace postal::routing::channel_test
