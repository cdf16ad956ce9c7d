// PostOffice: routing by scheme, validation first, capability checks, lifecycle, snapshots
// (M-ADDR-2, M-ADDR-3, M-RECV-2, M-STAT-2).
#include "postal/mail/post_office.h"

#include "gtest/gtest.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/mem_provider.h"

namespace postal::mail {
namespace {

// A provider that only posts and counts what it was asked to do. It declares nothing else,
// cannot answer status queries, and cannot enumerate.
class PostOnlyProvider final : public MailProvider {
 public:
  std::string_view scheme() const override { return "fake"; }
  bool can(Capability op, const MailAddress*) const override { return op == Capability::kPost; }
  absl::Status start() override {
    ++starts;
    return absl::OkStatus();
  }
  void stop(const StopOptions&) override { ++stops; }
  absl::StatusOr<PostReceipt> post(const MailAddress& to, Letter) override {
    ++posts;
    return PostReceipt{to.canonical(), "id", "send", PostPath::kQueued, 0};
  }
  absl::StatusOr<Subscription> subscribe(const MailAddress&, MailHandler,
                                         const SubscribeOptions&) override {
    ++calls_it_must_not_get;
    return Subscription();
  }
  absl::StatusOr<std::optional<Delivery>> fetch(const MailAddress&, const FetchOptions&) override {
    ++calls_it_must_not_get;
    return std::optional<Delivery>();
  }
  absl::StatusOr<MailboxStatus> status(const MailAddress&) override {
    ++calls_it_must_not_get;
    return MailboxStatus{};
  }

  int starts = 0, stops = 0, posts = 0, calls_it_must_not_get = 0;
};

struct Offices {
  PostOffice office;
  PostOnlyProvider* fake = nullptr;
  Offices() {
    auto fake_owned = std::make_unique<PostOnlyProvider>();
    fake = fake_owned.get();
    EXPECT_TRUE(office.register_provider(std::move(fake_owned)).ok());
    EXPECT_TRUE(office.register_provider(*MemProvider::create({.bus = MemBus::isolated()})).ok());
  }
};

TEST(PostOffice, RoutesByScheme) {
  Offices o;
  ASSERT_TRUE(o.office.start().ok());
  EXPECT_EQ(o.fake->starts, 1);
  ASSERT_TRUE(o.office.post("FAKE:a@b/x", Letter::text("x")).ok());
  EXPECT_EQ(o.fake->posts, 1);
  ASSERT_TRUE(o.office.post("mem:a@b/x", Letter::text("x")).ok());
  EXPECT_EQ(o.fake->posts, 1);
  EXPECT_NE(o.office.provider("mem:"), nullptr);
  EXPECT_NE(o.office.provider_as<MemProvider>("mem"), nullptr);
  EXPECT_EQ(o.office.provider_as<MemProvider>("fake"), nullptr);
}

TEST(PostOffice, M_RECV_2_UnknownSchemeFailsSynchronouslyWithWhatToDo) {
  Offices o;
  ASSERT_TRUE(o.office.start().ok());
  absl::Status s = o.office.post("smtp:a@b/x", Letter::text("x")).status();
  EXPECT_TRUE(IsUnknownScheme(s)) << s;
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("register_provider"), absl::string_view::npos) << s;
}

TEST(PostOffice, M_ADDR_2_AddressIsValidatedBeforeAnythingElse) {
  Offices o;  // not even started
  EXPECT_TRUE(IsInvalidMailboxAddress(o.office.post("smtp:a@b/x?y", Letter::text("x")).status()));
  EXPECT_TRUE(IsInvalidMailboxAddress(o.office.post("fake:a@b/x#y", Letter::text("x")).status()));
  EXPECT_EQ(o.fake->posts, 0);
}

TEST(PostOffice, UndeclaredCapabilityFailsBeforeTheProviderIsCalled) {
  Offices o;
  ASSERT_TRUE(o.office.start().ok());
  absl::Status s = o.office.fetch("fake:a@b/x").status();
  EXPECT_TRUE(IsUnsupportedCapability(s)) << s;
  EXPECT_TRUE(IsUnsupportedCapability(o.office.fetch("fake:a@b/x", {AckMode::kManual}).status()));
  EXPECT_TRUE(IsUnsupportedCapability(o.office.peek("fake:a@b/x").status()));
  EXPECT_TRUE(IsUnsupportedCapability(
      o.office.subscribe("fake:a@b/x", [](const Letter&) { return absl::OkStatus(); }).status()));
  EXPECT_TRUE(IsUnsupportedCapability(o.office.dead_letter_topic("fake:a@b/x").status()));
  EXPECT_TRUE(IsUnsupportedCapability(
      o.office.settle(CopyKey{"fake://a@b/x", "s", 1}, Disposition::kHandled).status()));
  EXPECT_EQ(o.fake->calls_it_must_not_get, 0);
}

TEST(PostOffice, M_STAT_1_ProviderThatCannotAnswerLeavesExistsUnset) {
  Offices o;
  ASSERT_TRUE(o.office.start().ok());
  absl::StatusOr<MailboxStatus> s = o.office.status("fake:a@b/x");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state, MailboxState::kUnknown);
  EXPECT_FALSE(s->exists.has_value());  // "I cannot ask" is not "it does not exist"
  EXPECT_NE(s->to_json().find("\"exists\":null"), std::string::npos) << s->to_json();
  EXPECT_EQ(o.fake->calls_it_must_not_get, 0);
}

TEST(PostOffice, M_STAT_2_SnapshotIsDegradedWhenAProviderCannotEnumerate) {
  Offices o;
  ASSERT_TRUE(o.office.start().ok());
  ASSERT_TRUE(o.office.post("mem:a@b/y", Letter::text("1")).ok());
  ASSERT_TRUE(o.office.post("mem:a@b/x", Letter::text("2")).ok());
  MailSnapshot snap = o.office.status();
  EXPECT_EQ(snap.state, MailboxState::kDegraded);
  EXPECT_EQ(snap.unsupported_providers, std::vector<std::string>{"fake"});
  ASSERT_EQ(snap.address_count, 2u);
  EXPECT_EQ(snap.addresses[0].address, "mem://a@b/x");
  EXPECT_EQ(snap.unread_count, 2u);
}

TEST(PostOffice, M_ACK_3_RecoverSaysWhenAProviderHasNoLeases) {
  Offices o;
  ASSERT_TRUE(o.office.start().ok());
  absl::StatusOr<RecoverResult> r = o.office.recover("fake:a@b/x");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->supported);  // 0 reclaimed is not "all clear"
  RecoverAllResult all = o.office.recover();
  EXPECT_EQ(all.unreachable_providers, std::vector<std::string>{"fake"});
}

TEST(PostOffice, LifecycleStartStopAndRegistration) {
  Offices o;
  EXPECT_EQ(o.office.post("mem:a@b/x", Letter::text("x")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(o.office.start().ok());
  EXPECT_TRUE(o.office.running());
  EXPECT_EQ(o.office.register_provider(std::make_unique<PostOnlyProvider>()).code(),
            absl::StatusCode::kAlreadyExists);
  o.office.stop();
  EXPECT_FALSE(o.office.running());
  EXPECT_EQ(o.fake->stops, 1);
  EXPECT_TRUE(o.office.status("mem:a@b/x").ok());  // read-only verbs work while stopped
}

TEST(PostOffice, RegisteringWhileRunningStartsTheProvider) {
  PostOffice office;
  ASSERT_TRUE(office.start().ok());
  auto fake = std::make_unique<PostOnlyProvider>();
  PostOnlyProvider* raw = fake.get();
  ASSERT_TRUE(office.register_provider(std::move(fake)).ok());
  EXPECT_EQ(raw->starts, 1);
  EXPECT_EQ(office.register_provider(nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace postal::mail
