// The mem provider serving retained mailboxes from a store (MemOptions::retained), through a
// PostOffice: create, post with priorities, replaying subscriptions, erase, listing (M-KIND-2).
#include <vector>

#include "absl/synchronization/mutex.h"
#include "mail_store_suite.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/mem_provider.h"
#include "postal/mail/post_office.h"
#include "postal/mail/system_headers.h"

namespace postal::mail::testing {
namespace {

constexpr std::string_view kBox = "mem:tasks@agents.example/queue";

class MemRetainedTest : public MailStoreTest {
 protected:
  void SetUp() override {
    MailStoreTest::SetUp();
    auto retained =
        RetainedMailboxes::create({.store = std::shared_ptr<MailStore>(std::move(store_)),
                                   .clock = clock_,
                                   .sweep_interval = absl::ZeroDuration()});
    ASSERT_TRUE(retained.ok());
    retained_ = *std::move(retained);
    auto mem = MemProvider::create({.bus = MemBus::isolated(clock_), .retained = retained_});
    ASSERT_TRUE(mem.ok()) << mem.status();
    ASSERT_TRUE(office_.register_provider(*std::move(mem)).ok());
    ASSERT_TRUE(office_.start().ok());
  }
  void TearDown() override {
    office_.stop();
    retained_.reset();
    MailStoreTest::TearDown();
  }
  void post(std::string_view priority, std::string_view text) {
    Letter l = Letter::text(text);
    l.headers.set(kPriority, std::string(priority));
    absl::StatusOr<PostReceipt> r = office_.post(kBox, std::move(l));
    ASSERT_TRUE(r.ok()) << r.status();
  }

  std::shared_ptr<RetainedMailboxes> retained_;
  PostOffice office_;
};

// What a subscription receives: the text and the mbx-seq of each letter.
struct Received {
  absl::Mutex mu;
  std::vector<std::pair<std::string, uint64_t>> letters ABSL_GUARDED_BY(mu);
  MailHandler handler() {
    return [this](const Letter& l) -> absl::Status {
      absl::MutexLock lock(&mu);
      letters.emplace_back(l.body.text().value_or("?"), l.headers.get(kRetainedSeq).value_or(0));
      return absl::OkStatus();
    };
  }
  bool wait_for(size_t n) {
    absl::MutexLock lock(&mu);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return letters.size() >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30));
  }
  std::vector<std::string> texts() {
    absl::MutexLock lock(&mu);
    std::vector<std::string> out;
    for (const auto& [text, seq] : letters) out.push_back(text);
    return out;
  }
};

TEST_P(MemRetainedTest, M_KIND_2_TheMemProviderServesRetainedMailboxesThroughThePostOffice) {
  absl::StatusOr<CreateResult> created = office_.create_mailbox(kBox, {.ttl = absl::Hours(1)});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(created->created);
  post("normal", "n1");
  post("critical", "c1");
  post("urgent", "u1");
  Received first;
  absl::StatusOr<Subscription> sub = office_.subscribe(kBox, first.handler());
  ASSERT_TRUE(sub.ok()) << sub.status();
  ASSERT_TRUE(first.wait_for(3));
  EXPECT_EQ(first.texts(), (std::vector<std::string>{"c1", "u1", "n1"}));
  // M-RECV-5: erase by the letter's mbx-seq; a new subscription no longer replays it.
  uint64_t critical_seq = 0;
  {
    absl::MutexLock lock(&first.mu);
    critical_seq = first.letters.front().second;
  }
  ASSERT_TRUE(*office_.erase(kBox, critical_seq));
  sub->unsubscribe();
  Received second;
  absl::StatusOr<Subscription> again = office_.subscribe(kBox, second.handler());
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(second.wait_for(2));
  post("urgent", "live");
  ASSERT_TRUE(second.wait_for(3));
  EXPECT_EQ(second.texts(), (std::vector<std::string>{"u1", "n1", "live"}));
}

// M-KIND-3: kNew replays nothing; kLast replays only the most recently stored message (not the
// highest priority one), then both continue live.
TEST_P(MemRetainedTest, M_KIND_3_DeliverNewReplaysNothingAndLastOnlyTheNewestStored) {
  ASSERT_TRUE(office_.create_mailbox(kBox, {.ttl = absl::Hours(1)}).ok());
  post("critical", "c1");
  post("urgent", "u1");
  post("normal", "n1");
  Received fresh;
  absl::StatusOr<Subscription> only_new =
      office_.subscribe(kBox, fresh.handler(), {.deliver = DeliverPolicy::kNew});
  ASSERT_TRUE(only_new.ok()) << only_new.status();
  post("normal", "live1");
  ASSERT_TRUE(fresh.wait_for(1));
  EXPECT_EQ(fresh.texts(), (std::vector<std::string>{"live1"}));

  Received last;
  absl::StatusOr<Subscription> newest =
      office_.subscribe(kBox, last.handler(), {.deliver = DeliverPolicy::kLast});
  ASSERT_TRUE(newest.ok()) << newest.status();
  ASSERT_TRUE(last.wait_for(1));
  post("urgent", "live2");
  ASSERT_TRUE(last.wait_for(2));
  EXPECT_EQ(last.texts(), (std::vector<std::string>{"live1", "live2"}));
  ASSERT_TRUE(fresh.wait_for(2));
  EXPECT_EQ(fresh.texts(), (std::vector<std::string>{"live1", "live2"}));

  Received all;
  absl::StatusOr<Subscription> everything = office_.subscribe(kBox, all.handler());
  ASSERT_TRUE(all.wait_for(5));
  EXPECT_EQ(all.texts(), (std::vector<std::string>{"c1", "u1", "live2", "n1", "live1"}));
}

// M-RECV-4 through the PostOffice: a queue group's member settles each letter by its status
// (M-ACK-4): OK and a plain error settle it for the group, a retriable error leaves it for the
// group's next lifetime; a plain subscription still replays everything.
TEST_P(MemRetainedTest, M_RECV_4_AQueueGroupSettlesByTheHandlersStatusThroughThePostOffice) {
  ASSERT_TRUE(office_.create_mailbox(kBox).ok());
  for (std::string_view text : {"a", "b", "c", "d"}) post("urgent", text);
  {
    Received first;
    MailHandler record = first.handler();
    absl::StatusOr<Subscription> sub = office_.subscribe(
        kBox,
        [&](const Letter& l) -> absl::Status {
          (void)record(l);
          const std::string text = l.body.text().value_or("");
          if (text == "b") return RetriableError("try again later");
          if (text == "c") return absl::InvalidArgumentError("malformed: discard it");
          return absl::OkStatus();
        },
        {.queue_group = "workers"});
    ASSERT_TRUE(sub.ok()) << sub.status();
    ASSERT_TRUE(first.wait_for(4));
    ASSERT_TRUE(retained_->wait_idle(absl::Seconds(30)));
  }
  Received again;
  absl::StatusOr<Subscription> member =
      office_.subscribe(kBox, again.handler(), {.queue_group = "workers"});
  ASSERT_TRUE(member.ok()) << member.status();
  ASSERT_TRUE(again.wait_for(1));
  ASSERT_TRUE(retained_->wait_idle(absl::Seconds(30)));
  EXPECT_EQ(again.texts(), std::vector<std::string>{"b"});
  Received plain;
  absl::StatusOr<Subscription> all = office_.subscribe(kBox, plain.handler());
  ASSERT_TRUE(plain.wait_for(4));
}

TEST_P(MemRetainedTest, M_RECV_4_AQueueGroupOnAQueueMailboxIsRefused) {
  Received r;
  absl::StatusOr<Subscription> sub =
      office_.subscribe("mem:plain@agents.example/queue", r.handler(), {.queue_group = "w"});
  EXPECT_EQ(sub.status().code(), absl::StatusCode::kInvalidArgument) << sub.status();
  EXPECT_NE(sub.status().message().find("retained mailboxes only"), std::string_view::npos);
}

TEST_P(MemRetainedTest, M_BOX_4_ListPublicNamesRetainedMailboxesByAddress) {
  ASSERT_TRUE(office_.create_mailbox(kBox).ok());
  absl::StatusOr<std::vector<std::string>> listed = office_.list_public("mem");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(*listed, std::vector<std::string>{"mem://tasks@agents.example/queue"});
  ASSERT_TRUE(office_.delete_mailbox(kBox).ok());
  EXPECT_TRUE(office_.list_public("mem")->empty());
}

// M-BOX-4 through the office: the store draws the id (128 bits, 32 hex digits), the returned
// address is the only way in, and the mailbox is never listed.
TEST_P(MemRetainedTest, M_BOX_4_APrivateMailboxIsReachedByItsDrawnAddressAndNeverListed) {
  absl::StatusOr<CreateResult> a = office_.create_private_mailbox("mem", {.ttl = absl::Hours(1)});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->created);
  EXPECT_FALSE(a->mailbox.is_public);
  EXPECT_EQ(a->mailbox.id.size(), 32u) << a->mailbox.id;
  EXPECT_EQ(a->address, "mem://" + a->mailbox.id + "@private");
  absl::StatusOr<CreateResult> b = office_.create_private_mailbox("mem");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(a->mailbox.id, b->mailbox.id);
  Letter l = Letter::text("secret");
  l.headers.set(kPriority, std::string("critical"));
  absl::StatusOr<PostReceipt> posted = office_.post(a->address, std::move(l));
  ASSERT_TRUE(posted.ok()) << posted.status();
  Received got;
  absl::StatusOr<Subscription> sub = office_.subscribe(a->address, got.handler());
  ASSERT_TRUE(sub.ok()) << sub.status();
  ASSERT_TRUE(got.wait_for(1));
  EXPECT_EQ(got.texts(), std::vector<std::string>{"secret"});
  EXPECT_TRUE(office_.list_public("mem")->empty()) << "a private mailbox is never listed";
  // By address a mailbox is public (its address is its name): private ones are drawn.
  EXPECT_EQ(office_.create_mailbox(kBox, {.is_public = false}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(IsUnknownScheme(office_.create_private_mailbox("nope").status()));
  // The private domain is reserved: nobody names a mailbox into it.
  EXPECT_EQ(office_.create_mailbox("mem:guess@private").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(MemRetainedTest, AddressesNotCreatedRetainedStayQueueMailboxes) {
  ASSERT_TRUE(office_.create_mailbox(kBox).ok());
  ASSERT_TRUE(office_.post("mem:plain@agents.example/q", Letter::text("queued")).ok());
  absl::StatusOr<std::optional<Delivery>> d = office_.fetch("mem:plain@agents.example/q");
  ASSERT_TRUE(d.ok() && d->has_value());
  EXPECT_EQ((*d)->letter().body.text().value_or("?"), "queued");
}

TEST_P(MemRetainedTest, AnUnknownPriorityIsRejectedAndNothingIsStored) {
  ASSERT_TRUE(office_.create_mailbox(kBox).ok());
  Letter l = Letter::text("x");
  l.headers.set(kPriority, std::string("highest"));
  absl::StatusOr<PostReceipt> r = office_.post(kBox, std::move(l));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  Received got;
  absl::StatusOr<Subscription> sub = office_.subscribe(kBox, got.handler());
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(retained_->wait_idle(absl::Seconds(30)));
  EXPECT_TRUE(got.texts().empty()) << "the rejected letter was not stored";
}

TEST(MemRetained, WithoutAStoreCreateMailboxIsUnsupported) {
  PostOffice office;
  ASSERT_TRUE(office.register_provider(*MemProvider::create({.bus = MemBus::isolated()})).ok());
  ASSERT_TRUE(office.start().ok());
  EXPECT_TRUE(IsUnsupportedCapability(office.create_mailbox(kBox).status()));
}

INSTANTIATE_TEST_SUITE_P(Stores, MemRetainedTest,
                         ::testing::Values(MemStore(), SqliteStore(Durability::kOs), NatsStore()),
                         StoreName);

}  // namespace
}  // namespace postal::mail::testing
