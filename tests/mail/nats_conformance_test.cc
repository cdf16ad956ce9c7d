// The conformance suite (mail_conformance.h), instantiated for the `nats` provider against a real
// nats-server with JetStream (one per test program, each test on a prefix of its own), and what
// only `nats` promises: mailboxes shared by providers on separate connections, a held copy kept
// from everyone else while its holder lives, the server's ack wait as the backstop.
#include <atomic>
#include <filesystem>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mail_conformance.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/nats_provider.h"
#include "support/child_process.h"
#include "support/nats_server.h"
#include "support/scratch_dir.h"
#include "support/wait_for.h"

namespace postal::mail::testing {
namespace {

using test_support::NatsServer;

// The test program's one nats-server, in a folder of its own (not a test's ScratchDir, which a
// later test of the same name would wipe under the running server); null when none starts.
NatsServer* server() {
  struct Shared {
    std::filesystem::path dir =
        std::filesystem::path("/tmp") / ("postal-" + std::to_string(::getpid()) + "-nats-provider");
    std::unique_ptr<NatsServer> nats;
    Shared() {
      std::filesystem::remove_all(dir);
      if (!NatsServer::binary().empty()) nats = std::make_unique<NatsServer>(dir / "nats");
    }
    ~Shared() {
      nats.reset();
      std::filesystem::remove_all(dir);
    }
  };
  static Shared shared;
  return shared.nats != nullptr && shared.nats->ready() ? shared.nats.get() : nullptr;
}

std::string fresh_prefix() {
  static std::atomic<int> n{0};
  return absl::StrCat("CONF", n.fetch_add(1), "_", ::getpid());
}

ProviderFactory NatsFactory() {
  return ProviderFactory{
      "nats", "nats",
      [](const ConformanceConfig&,
         std::shared_ptr<ManualClock> clock) -> absl::StatusOr<std::unique_ptr<MailProvider>> {
        NatsServer* s = server();
        if (s == nullptr) return absl::UnavailableError(NatsServer::kMissing);
        absl::StatusOr<std::unique_ptr<NatsProvider>> p = NatsProvider::create(
            {.url = s->url(), .prefix = fresh_prefix(), .clock = std::move(clock)});
        if (!p.ok()) return p.status();
        return std::unique_ptr<MailProvider>(*std::move(p));
      }};
}

INSTANTIATE_TEST_SUITE_P(Nats, MailConformance, ::testing::Values(NatsFactory()), ConformanceName);

constexpr const char* kInbox = "nats://orders@shop.test/inbox";

// Two providers of one prefix on separate connections, as two processes would be; real time.
class NatsProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(server(), nullptr) << NatsServer::kMissing;
    prefix_ = fresh_prefix();
    // A short ack wait, so the keep-alive of held copies is exercised by every test.
    a_ = office(absl::Seconds(1));
    b_ = office(absl::Seconds(1));
    ASSERT_TRUE(a_ && b_);
  }
  std::unique_ptr<PostOffice> office(absl::Duration ack_wait) {
    absl::StatusOr<std::unique_ptr<NatsProvider>> p = NatsProvider::create(
        {.url = server()->url(), .prefix = prefix_, .server_ack_wait = ack_wait});
    auto o = std::make_unique<PostOffice>();
    if (!p.ok() || !o->register_provider(*std::move(p)).ok() || !o->start().ok()) return nullptr;
    return o;
  }
  static std::vector<Delivery> poll(PostOffice& o, absl::Duration wait, AckMode ack) {
    absl::StatusOr<std::vector<Delivery>> got =
        o.fetch_batch(kInbox, {.ack = ack, .max_messages = 1, .max_wait = wait});
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? *std::move(got) : std::vector<Delivery>{};
  }

  std::string prefix_;
  std::unique_ptr<PostOffice> a_, b_;
};

TEST_F(NatsProviderTest, M_RECV_1_AMailboxIsSharedByEveryProviderOfThePrefix) {
  ASSERT_TRUE(a_->post(kInbox, Letter::text("one")).ok());
  ASSERT_TRUE(a_->post(kInbox, Letter::text("two")).ok());
  std::optional<Delivery> first = *b_->fetch(kInbox, {});
  std::optional<Delivery> second = *a_->fetch(kInbox, {});
  ASSERT_TRUE(first && second);
  EXPECT_EQ(text_of(first->letter()), "one");  // one queue: stream order across consumers
  EXPECT_EQ(text_of(second->letter()), "two");
  EXPECT_EQ(b_->status(kInbox)->unread_count, 0u);
}

TEST_F(NatsProviderTest, M_ACK_1_AHeldCopyIsNobodyElsesUntilItsHolderReturnsIt) {
  ASSERT_TRUE(a_->post(kInbox, Letter::text("x")).ok());
  std::optional<Delivery> held = *a_->fetch(kInbox, {.ack = AckMode::kManual});
  ASSERT_TRUE(held.has_value());
  EXPECT_FALSE(b_->fetch(kInbox, {})->has_value());
  EXPECT_EQ(b_->status(kInbox)->in_flight_count, 1u);
  a_->stop();  // a stopping provider returns what it holds
  std::vector<Delivery> back = poll(*b_, absl::Seconds(10), AckMode::kAuto);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].letter().headers.get(kRound), 2u);
  EXPECT_FALSE(held->ack()) << "a stopped provider settles nothing";
}

// The server's ack wait is the backstop: a process killed while it holds a copy under a lease
// that never expires loses it to the others one ack wait (1 s here) later, not never.
TEST_F(NatsProviderTest, M_ACK_3_ACopyHeldByAKilledProcessComesBackAfterTheServersAckWait) {
  ASSERT_TRUE(a_->post(kInbox, Letter::text("orphan")).ok());
  test_support::ScratchDir dir;
  const std::filesystem::path log = dir.path() / "child.log";
  test_support::ChildProcess child(NATS_PROVIDER_CHILD, {server()->url(), prefix_, kInbox}, log);
  ASSERT_TRUE(test_support::wait_log_lines(log, "holding orphan", 1))
      << absl::StrJoin(test_support::log_lines(log), "\n");
  // Alive, the child keeps the copy in progress: three ack waits pass and nobody else gets it.
  EXPECT_TRUE(poll(*b_, absl::Seconds(3), AckMode::kAuto).empty());
  child.kill();
  std::vector<Delivery> back = poll(*b_, absl::Seconds(20), AckMode::kAuto);
  ASSERT_EQ(back.size(), 1u) << "the killed holder's copy never came back";
  EXPECT_EQ(text_of(back[0].letter()), "orphan");
  EXPECT_EQ(back[0].letter().headers.get(kRound), 2u);
}

// Big batches settle with their acks gathered into one write on a second connection: every copy
// of the batch is settled, the way asked, and confirmed.
TEST_F(NatsProviderTest, M_ACK_6_ABigBatchSettlesEveryCopyAtOnce) {
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(a_->post(kInbox, Letter::text("x")).ok());
  std::vector<Delivery> first =
      *a_->fetch_batch(kInbox, {.ack = AckMode::kManual, .max_messages = 20});
  ASSERT_EQ(first.size(), 20u);
  for (bool took : ack_all(first, Disposition::kUnhandled)) EXPECT_TRUE(took);
  std::vector<Delivery> all =
      *b_->fetch_batch(kInbox, {.ack = AckMode::kManual, .max_messages = 64});
  ASSERT_EQ(all.size(), 40u) << "the returned copies come back, the others after them";
  EXPECT_EQ(all.front().letter().headers.get(kRound), 2u);
  for (bool took : ack_all(all)) EXPECT_TRUE(took);
  absl::StatusOr<MailboxStatus> s = a_->status(kInbox);
  EXPECT_EQ(s->unread_count + s->in_flight_count, 0u);
  EXPECT_TRUE(b_->fetch_batch(kInbox, {.max_messages = 64})->empty());
}

TEST_F(NatsProviderTest, M_KIND_1_PushSubscriptionsAreRefusedAsUndeclaredAndChangeNothing) {
  EXPECT_FALSE(a_->provider("nats")->can(Capability::kSubscribe));
  absl::StatusOr<Subscription> sub =
      a_->subscribe(kInbox, [](const Letter&) { return absl::OkStatus(); });
  ASSERT_FALSE(sub.ok());
  EXPECT_TRUE(IsUnsupportedCapability(sub.status())) << sub.status();
  EXPECT_EQ(a_->post(kInbox, Letter::text("x"))->path, PostPath::kQueued);
}

TEST_F(NatsProviderTest, M_BOX_6_ALetterOverTheServersMaxPayloadIsRefusedAndNothingIsStored) {
  Letter big = Letter::text(std::string(2 << 20, 'x'));  // nats-server's default: 1 MiB
  absl::StatusOr<PostReceipt> r = a_->post(kInbox, big);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsBudgetExhausted(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("max_payload"), std::string::npos) << r.status();
  absl::Notification done;
  a_->post_async(kInbox, big, [&](absl::StatusOr<PostReceipt> r) {
    EXPECT_TRUE(IsBudgetExhausted(r.status())) << r.status();
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWait));
  EXPECT_EQ(a_->status(kInbox)->unread_count, 0u);
  EXPECT_TRUE(a_->post(kInbox, Letter::text("small")).ok());
}

// A server killed mid-traffic: verbs fail with IoFailed within the timeout (nothing hangs, and a
// fetch never mistakes silence for an empty mailbox), a settlement that could not reach it
// reports false and does not take effect later; once the server is back the provider works
// again, and every acknowledged post is there — the copy whose ack was lost comes back too.
TEST(NatsProvider, M_ACK_2_AServerKilledMidTrafficFailsVerbsThenNothingAcknowledgedIsLost) {
  ASSERT_FALSE(NatsServer::binary().empty()) << NatsServer::kMissing;
  test_support::ScratchDir dir;
  NatsServer nats(dir.path() / "nats");
  ASSERT_TRUE(nats.ready()) << nats.log();
  absl::StatusOr<std::unique_ptr<NatsProvider>> p = NatsProvider::create(
      {.url = nats.url(), .timeout = absl::Seconds(1), .server_ack_wait = absl::Seconds(1)});
  ASSERT_TRUE(p.ok()) << p.status();
  PostOffice office;
  ASSERT_TRUE(office.register_provider(*std::move(p)).ok());
  ASSERT_TRUE(office.start().ok());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(office.post(kInbox, Letter::text("m")).ok());
  std::optional<Delivery> held = *office.fetch(kInbox, {.ack = AckMode::kManual});
  ASSERT_TRUE(held.has_value());

  nats.kill9();
  absl::StatusOr<PostReceipt> lost = office.post(kInbox, Letter::text("while down"));
  ASSERT_FALSE(lost.ok());
  EXPECT_TRUE(IsIoFailed(lost.status())) << lost.status();
  EXPECT_NE(lost.status().message().find(nats.url()), std::string::npos) << lost.status();
  EXPECT_FALSE(office.fetch(kInbox, {}).ok());
  EXPECT_FALSE(held->ack()) << "the server never confirmed it";

  ASSERT_TRUE(nats.restart()) << nats.log();
  ASSERT_TRUE(test_support::wait_for([&] {
    return office.post(kInbox, Letter::text("after")).ok();
  })) << "the provider did not reconnect";
  std::map<std::string, int> seen;
  while (seen["m"] < 50) {
    absl::StatusOr<std::vector<Delivery>> got =
        office.fetch_batch(kInbox, {.max_messages = 64, .max_wait = absl::Seconds(10)});
    ASSERT_TRUE(got.ok()) << got.status();
    if (got->empty()) break;
    for (const Delivery& d : *got) ++seen[text_of(d.letter())];
  }
  EXPECT_EQ(seen["m"], 50) << "an acknowledged post was lost";
  // A post refused for a timeout may still have reached the server (libnats resends what it had
  // not written when the connection broke): at most once, never twice.
  EXPECT_LE(seen["while down"], 1);
}

TEST(NatsProvider, BadOptionsAreRefusedBeforeConnecting) {
  for (NatsProviderOptions bad :
       {NatsProviderOptions{.prefix = "lower"}, NatsProviderOptions{.prefix = "A.B"},
        NatsProviderOptions{.prefix = std::string(33, 'A')}, NatsProviderOptions{.replicas = 0},
        NatsProviderOptions{.timeout = absl::ZeroDuration()},
        NatsProviderOptions{.server_ack_wait = absl::Milliseconds(10)},
        NatsProviderOptions{.max_held = 0}}) {
    absl::StatusOr<std::unique_ptr<NatsProvider>> p = NatsProvider::create(bad);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
  }
}

TEST(NatsProvider, AServerThatIsNotThereFailsStartWithIoFailedNamingIt) {
  const std::string url = "nats://127.0.0.1:1";
  absl::StatusOr<std::unique_ptr<NatsProvider>> p =
      NatsProvider::create({.url = url, .timeout = absl::Milliseconds(500)});
  ASSERT_TRUE(p.ok());
  absl::Status s = (*p)->start();
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(IsIoFailed(s)) << s;
  EXPECT_NE(s.message().find(url), std::string::npos) << s;
}

}  // namespace
}  // namespace postal::mail::testing
