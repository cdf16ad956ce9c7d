// The NATS store's own tests, beside the MailStore suite it also passes (mail_store_suite.h):
// more than one store on one server, a server that is not there or dies mid-traffic, bad
// options, a message over the server's max_payload, a record written by a stranger. Each test
// runs a real nats-server of its own.
#include "postal/mail/nats_mail_store.h"

#include <atomic>
#include <thread>
#include <vector>

#include <nats/nats.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "postal/mail/mail_errors.h"
#include "support/nats_server.h"
#include "support/scratch_dir.h"
#include "support/test_certs.h"
#include "support/wait_for.h"

namespace postal::mail {
namespace {

using test_support::NatsServer;

class NatsStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(NatsServer::binary().empty()) << NatsServer::kMissing;
    server_ = std::make_unique<NatsServer>(scratch_.path() / "nats");
    ASSERT_TRUE(server_->ready()) << server_->log();
  }
  std::unique_ptr<MailStore> open(NatsStoreOptions options = {}) {
    options.url = server_->url();
    absl::StatusOr<std::unique_ptr<MailStore>> s = NatsMailStore::open(std::move(options));
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  test_support::ScratchDir scratch_;
  std::unique_ptr<NatsServer> server_;
};

TEST_F(NatsStoreTest, AServerThatIsNotThereFailsOpenWithIoFailedSayingWhatToCheck) {
  const std::string url = server_->url();
  server_->kill9();
  absl::StatusOr<std::unique_ptr<MailStore>> s =
      NatsMailStore::open({.url = url, .timeout = absl::Milliseconds(500)});
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(IsIoFailed(s.status())) << s.status();
  EXPECT_NE(s.status().message().find(url), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("JetStream enabled (-js)"), std::string::npos) << s.status();
}

TEST_F(NatsStoreTest, BadOptionsAreRefusedBeforeConnecting) {
  for (NatsStoreOptions bad : {NatsStoreOptions{.prefix = "lower"}, NatsStoreOptions{.prefix = ""},
                               NatsStoreOptions{.prefix = "A.B"}, NatsStoreOptions{.replicas = 2},
                               NatsStoreOptions{.timeout = absl::ZeroDuration()}}) {
    bad.url = server_->url();
    absl::StatusOr<std::unique_ptr<MailStore>> s = NatsMailStore::open(bad);
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
  }
}

TEST_F(NatsStoreTest, M_BOX_6_AMessageOverTheServersMaxPayloadIsRefusedAndStoresNothing) {
  std::unique_ptr<MailStore> store = open();
  ASSERT_TRUE(store->create({.name = "big"}).ok());
  absl::StatusOr<uint64_t> seq =
      store->append("big", Priority::kCritical, std::string((1 << 20) + 1, 'x'));
  ASSERT_FALSE(seq.ok());
  EXPECT_TRUE(IsBudgetExhausted(seq.status())) << seq.status();
  EXPECT_NE(seq.status().message().find("max_payload"), std::string::npos) << seq.status();
  EXPECT_EQ(*store->count("big"), 0u);
  EXPECT_TRUE(store->append("big", Priority::kCritical, std::string(1 << 19, 'x')).ok());
}

// Two stores on one server are two processes' views of one store: what one creates and appends
// the other sees, and of creates racing from both exactly one reports `created` (M-BOX-2).
TEST_F(NatsStoreTest, M_BOX_2_TwoStoresOnOneServerShareMailboxesAndOneCreateWins) {
  std::unique_ptr<MailStore> a = open();
  std::unique_ptr<MailStore> b = open();
  for (int round = 0; round < 5; ++round) {
    const std::string id = absl::StrCat("race", round);
    std::atomic<int> created{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
      threads.emplace_back([&, t] {
        absl::StatusOr<CreateResult> r = (t % 2 == 0 ? a : b)->create({.name = id});
        ASSERT_TRUE(r.ok()) << r.status();
        if (r->created) ++created;
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(created.load(), 1) << id;
  }
  const uint64_t seq = *a->append("race0", Priority::kUrgent, "from a");
  absl::StatusOr<std::vector<StoredMessage>> seen = b->read_all("race0");
  ASSERT_TRUE(seen.ok()) << seen.status();
  ASSERT_EQ(seen->size(), 1u);
  EXPECT_EQ((*seen)[0].seq, seq);
  EXPECT_EQ((*seen)[0].body, "from a");
  ASSERT_TRUE(*b->erase("race0", seq));
  EXPECT_EQ(*a->count("race0"), 0u);
}

TEST_F(NatsStoreTest, StoresWithDifferentPrefixesAreSeparate) {
  std::unique_ptr<MailStore> a = open({.prefix = "TEAM_A"});
  std::unique_ptr<MailStore> b = open({.prefix = "TEAM_B"});
  ASSERT_TRUE(a->create({.name = "shared-name"}).ok());
  EXPECT_TRUE(IsMailboxNotFound(b->mailbox("shared-name").status()));
  EXPECT_TRUE(b->list_public()->empty());
}

// A dead server fails appends within the timeout (nothing hangs); once it is back the same store
// works again, and everything acknowledged before is there.
TEST_F(NatsStoreTest, AServerKilledMidTrafficFailsAppendsThenTheStoreWorksAgain) {
  std::unique_ptr<MailStore> store = open({.timeout = absl::Seconds(1)});
  ASSERT_TRUE(store->create({.name = "box"}).ok());
  std::vector<uint64_t> acked;
  for (int i = 0; i < 50; ++i) acked.push_back(*store->append("box", Priority::kCritical, "m"));
  server_->kill9();
  absl::StatusOr<uint64_t> lost = store->append("box", Priority::kCritical, "while down");
  ASSERT_FALSE(lost.ok());
  EXPECT_TRUE(IsIoFailed(lost.status())) << lost.status();
  ASSERT_TRUE(server_->restart()) << server_->log();
  ASSERT_TRUE(test_support::wait_for([&] {
    return store->append("box", Priority::kCritical, "after").ok();
  })) << "the store did not reconnect";
  absl::StatusOr<std::vector<StoredMessage>> all = store->read_all("box");
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<uint64_t> kept;
  for (const StoredMessage& m : *all) {
    if (m.body == "m") kept.push_back(m.seq);
  }
  EXPECT_EQ(kept, acked);
}

// A record someone else wrote into the mailbox bucket: lookups of it fail with IoFailed, and
// listings and other mailboxes go on.
TEST_F(NatsStoreTest, AForeignRecordIsRefusedByItsLookupAndSkippedByListings) {
  std::unique_ptr<MailStore> store = open();
  ASSERT_TRUE(store->create({.name = "good"}).ok());
  natsConnection* nc = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, server_->url().c_str()), NATS_OK);
  natsMsg* reply = nullptr;
  // "bad" is 626164 in hex, the bucket's key for a mailbox named "bad".
  ASSERT_EQ(natsConnection_RequestString(&reply, nc, "$KV.POSTAL_BOXES.626164", "{not json", 5000),
            NATS_OK);
  natsMsg_Destroy(reply);
  natsConnection_Destroy(nc);
  EXPECT_TRUE(IsIoFailed(store->mailbox("bad").status()));
  absl::StatusOr<std::vector<MailboxInfo>> listed = store->list_public();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id, "good");
  EXPECT_TRUE(store->append("good", Priority::kNormal, "still works").ok());
}

// TLS to the server (NatsStoreOptions::tls_*): a server that serves TLS and verifies clients
// takes a store with the CA and a client certificate, and refuses one without TLS, one trusting
// another CA and one without a client certificate.
TEST(NatsStoreTlsTest, R_SEC_1_AStoreTalksTlsWithItsCaAndCertificateAndNothingElseConnects) {
  ASSERT_FALSE(NatsServer::binary().empty()) << NatsServer::kMissing;
  test_support::ScratchDir scratch;
  test_support::TestCerts certs(scratch.path() / "certs");
  ASSERT_TRUE(certs.ok()) << "openssl failed; see " << certs.log();
  NatsServer server(scratch.path() / "nats",
                    {"--tls", "--tlscert", certs.server_cert(), "--tlskey", certs.server_key(),
                     "--tlsverify", "--tlscacert", certs.ca_file()});
  ASSERT_TRUE(server.ready()) << server.log();
  auto open = [&](std::string ca, std::string cert, std::string key) {
    return NatsMailStore::open({.url = server.url(),
                                .tls_ca_file = std::move(ca),
                                .tls_cert_file = std::move(cert),
                                .tls_key_file = std::move(key),
                                .timeout = absl::Seconds(2)});
  };
  for (auto [ca, cert] : {std::pair{std::string(), std::string()},
                          std::pair{certs.other_ca_file(), certs.client_cert()},
                          std::pair{certs.ca_file(), std::string()}}) {
    absl::StatusOr<std::unique_ptr<MailStore>> refused =
        open(ca, cert, cert.empty() ? "" : certs.client_key());
    ASSERT_FALSE(refused.ok()) << "ca " << ca << ", cert " << cert;
    EXPECT_TRUE(IsIoFailed(refused.status())) << refused.status();
  }
  absl::StatusOr<std::unique_ptr<MailStore>> missing = open(certs.path("no-such-ca.pem"), "", "");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("no-such-ca.pem"), std::string::npos)
      << missing.status();
  absl::StatusOr<std::unique_ptr<MailStore>> store =
      open(certs.ca_file(), certs.client_cert(), certs.client_key());
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->create({.name = "tls"}).ok());
  const uint64_t seq = *(*store)->append("tls", Priority::kCritical, "over TLS");
  absl::StatusOr<std::vector<StoredMessage>> seen = (*store)->read_all("tls");
  ASSERT_TRUE(seen.ok()) << seen.status();
  ASSERT_EQ(seen->size(), 1u);
  EXPECT_EQ((*seen)[0].seq, seq);
  EXPECT_EQ((*seen)[0].body, "over TLS");
}

}  // namespace
}  // namespace postal::mail
