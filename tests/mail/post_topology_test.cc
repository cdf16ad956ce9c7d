// The post provider across real processes: a `postal proc` hosting postal.MailboxHost, the test
// process posting and fetching through a PostProvider on the host agent's proc, and a subscriber
// proc (mail_test_proc) killed with a delivery in flight.
#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "postal/mail/mailbox_host.h"
#include "postal/mail/post_office.h"
#include "postal/mail/post_provider.h"
#include "postal/routing/host.h"

namespace postal::mail {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(30);
constexpr std::string_view kInbox = "post:orders@shop.test/inbox";

class PostTopologyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat("/tmp/postal-mail-test-", ::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    office_.reset();
    host_.reset();
    std::filesystem::remove_all(dir_);
  }

  runtime::ChannelAddr ipc(const std::string& name) {
    return *runtime::ChannelAddr::parse(absl::StrCat("ipc://", dir_, "/", name, ".sock"));
  }

  void up() {
    routing::TopologySpec spec;
    spec.name = "mail";
    spec.on_proc_exit = routing::OnProcExit::kIgnore;
    spec.procs.push_back({"mail", ipc("mail"), std::nullopt, 1, std::nullopt, {}, std::nullopt});
    spec.procs.push_back({"sub", ipc("sub"), std::nullopt, 1, MAIL_TEST_PROC, {}, std::nullopt});
    spec.actors.push_back({"mail",
                           std::string(kMailboxHostName),
                           std::string(kMailboxHostType),
                           {{"settle_timeout_ms", int64_t{2000}}}});
    spec.actors.push_back({"sub", "holder", "test.HoldingSubscriber", {}});
    routing::HostOptions o;
    o.postal_binary = POSTAL_BINARY;
    o.proc_workers = 1;
    o.channel.delivery_timeout = absl::Seconds(2);
    auto host = routing::Host::up(spec, o);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = *std::move(host);
    // The provider borrows the host agent's client (the host outlives the office).
    auto provider = PostProvider::create(PostOptions{
        .context = std::shared_ptr<runtime::SendContext>(std::shared_ptr<void>(), &host_->client()),
        .host = *host_->actor_addr("mail", kMailboxHostName)});
    ASSERT_TRUE(provider.ok()) << provider.status();
    office_ = std::make_unique<PostOffice>();
    ASSERT_TRUE(office_->register_provider(*std::move(provider)).ok());
    ASSERT_TRUE(office_->start().ok());
  }

  std::string dir_;
  std::unique_ptr<routing::Host> host_;
  std::unique_ptr<PostOffice> office_;
};

TEST_F(PostTopologyTest, PostFetchAckAndStatusAcrossProcs) {
  up();
  ASSERT_EQ(office_->post(kInbox, Letter::text("one"))->path, PostPath::kQueued);
  ASSERT_TRUE(office_->post(kInbox, Letter::text("two")).ok());
  EXPECT_EQ(office_->status(kInbox)->unread_count, 2u);
  absl::StatusOr<std::optional<Delivery>> d = office_->fetch(kInbox, {.ack = AckMode::kManual});
  ASSERT_TRUE(d.ok() && d->has_value()) << d.status();
  EXPECT_EQ((*d)->letter().body.text(), "one");
  EXPECT_EQ(office_->status(kInbox)->in_flight_count, 1u);
  EXPECT_TRUE((*d)->ack(Disposition::kUnhandled));  // back at the head
  EXPECT_FALSE((*d)->ack());                        // once (M-ACK-2)
  absl::StatusOr<std::optional<Delivery>> again = office_->fetch(kInbox);
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->letter().body.text(), "one");
  MailSnapshot snap = office_->status();
  ASSERT_EQ(snap.address_count, 1u);
  EXPECT_EQ(snap.addresses[0].address, "post://orders@shop.test/inbox");
  EXPECT_EQ(snap.unread_count, 1u);
}

TEST_F(PostTopologyTest, KillingASubscribersProcRequeuesItsInFlightMessage) {
  up();
  // The holder on proc `sub` subscribes (through the wire protocol) and never settles.
  runtime::ActorAddr holder = *host_->actor_addr("sub", "holder");
  runtime::PortRef<MailPush> port(holder.port(runtime::Port::handler(wire::type_hash<MailPush>())));
  absl::StatusOr<MailReply> r =
      actors::ActorRef<MailboxHost>(*host_->actor_addr("mail", kMailboxHostName))
          .request(host_->client(), MailSubscribe{std::string(kInbox), "holder", port, {}},
                   kDeadline);
  ASSERT_TRUE(r.ok() && r->status.code == 0) << r.status();

  ASSERT_EQ(office_->post(kInbox, Letter::text("held"))->path, PostPath::kPushed);
  EXPECT_EQ(office_->status(kInbox)->unread_count, 0u);  // in flight at the holder
  ASSERT_TRUE(host_->kill("sub", SIGKILL).ok());
  // M-RETRY-4: the in-flight push is given back when its 2 s settle watchdog fires.
  ASSERT_TRUE(office_->wait_idle(kDeadline).ok());
  absl::StatusOr<std::optional<Delivery>> d = office_->fetch(kInbox);
  ASSERT_TRUE(d.ok() && d->has_value()) << d.status();
  EXPECT_EQ((*d)->letter().body.text(), "held");
  // The subscription is dropped by the first push that comes back undeliverable: the held one
  // (when the channel had not acknowledged it yet) or the next one. Either way "next" ends up in
  // the queue, and later posts are queued.
  ASSERT_TRUE(office_->post(kInbox, Letter::text("next")).ok());
  ASSERT_TRUE(office_->wait_idle(kDeadline).ok());
  MailboxStatus st = *office_->status(kInbox);
  EXPECT_EQ(st.unread_count, 1u);
  EXPECT_EQ(st.extension_int("post.subscriberCount").value_or(-1), 0);
  EXPECT_EQ(office_->post(kInbox, Letter::text("queued"))->path, PostPath::kQueued);
}

}  // namespace
}  // namespace postal::mail
