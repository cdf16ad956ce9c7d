// M-INBOX-1, M-INBOX-2: accept commits, then answers accepted or duplicate; identity is the
// tuple; the same identity with other content is an IdentityConflict that changes nothing.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "inbox_test_support.h"
#include "postal/mail/inbox_errors.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/sqlite_mail_store.h"

namespace postal::mail::testing {
namespace {

using Kind = AcceptReceipt::Kind;

TEST_F(InboxTest, M_INBOX_1_AcceptThenDuplicateWithCurrentStatus) {
  auto inbox = open_inbox();
  absl::StatusOr<AcceptReceipt> first = inbox->accept(message("e-1"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->kind, Kind::kAccepted);
  EXPECT_EQ(first->status, InboxStatus::kPending);
  absl::StatusOr<AcceptReceipt> again = inbox->accept(message("e-1", R"({ "orderId" : 7.0 })"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->kind, Kind::kDuplicate);
  EXPECT_EQ(again->id, first->id);
  EXPECT_EQ(again->status, InboxStatus::kPending);
  // The record is what the first accept stored, canonical.
  absl::StatusOr<std::optional<InboxRecord>> r = inbox->record(first->id);
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->message.payload, R"({"orderId":7})");
  EXPECT_EQ((*r)->attempts, 0);
}

TEST_F(InboxTest, M_INBOX_1_AcceptIsDurableAcrossReopen) {
  int64_t id = 0;
  {
    auto inbox = open_inbox({.durability = Durability::kDisk});
    id = inbox->accept(message("e-1"))->id;
  }
  auto inbox = open_inbox();
  absl::StatusOr<AcceptReceipt> again = inbox->accept(message("e-1"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->kind, Kind::kDuplicate);
  EXPECT_EQ(again->id, id);
}

TEST_F(InboxTest, M_INBOX_1_EachIdentityComponentMakesAnotherRecord) {
  auto inbox = open_inbox();
  const InboxMessage base = message("e-1");
  ASSERT_EQ(inbox->accept(base)->kind, Kind::kAccepted);
  InboxMessage other_scope = base;
  other_scope.scope = InboxScope::tenant("t2");
  InboxMessage global = base;
  global.scope = InboxScope::global();
  InboxMessage other_source = base;
  other_source.source = "billing";
  InboxMessage other_consumer = base;
  other_consumer.consumer = "orders.audit.v1";
  InboxMessage other_id = base;
  other_id.message_id = "e-2";
  for (const InboxMessage& m : {other_scope, global, other_source, other_consumer, other_id}) {
    absl::StatusOr<AcceptReceipt> r = inbox->accept(m);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->kind, Kind::kAccepted)
        << to_string(m.scope) << " " << m.source << " " << m.consumer << " " << m.message_id;
  }
}

TEST_F(InboxTest, M_INBOX_2_MetadataIsNotPartOfTheFingerprint) {
  auto inbox = open_inbox();
  InboxMessage m = message("e-1");
  m.metadata = {{"trace-id", "a"}};
  ASSERT_EQ(inbox->accept(m)->kind, Kind::kAccepted);
  m.metadata = {{"trace-id", "b"}, {"causation-id", "x"}};
  absl::StatusOr<AcceptReceipt> again = inbox->accept(m);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->kind, Kind::kDuplicate);
  EXPECT_EQ(inbox->record(again->id)->value().message.metadata.at("trace-id"), "a");
}

TEST_F(InboxTest, M_INBOX_2_SameIdentityOtherContentIsAConflictAndChangesNothing) {
  auto inbox = open_inbox();
  const int64_t id = inbox->accept(message("e-1"))->id;
  const InboxRecord before = inbox->record(id)->value();
  InboxMessage other_type = message("e-1");
  other_type.event_type = "order.cancelled";
  InboxMessage other_version = message("e-1");
  other_version.schema_version = 2;
  for (const InboxMessage& m : {message("e-1", R"({"orderId":8})"), other_type, other_version,
                                message("e-1", R"([{"orderId":7}])")}) {
    absl::StatusOr<AcceptReceipt> r = inbox->accept(m);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(IsIdentityConflict(r.status())) << r.status();
  }
  const InboxRecord after = inbox->record(id)->value();
  EXPECT_EQ(after.fingerprint, before.fingerprint);
  EXPECT_EQ(after.message.payload, before.message.payload);
  EXPECT_EQ(after.message.event_type, "order.created");
  EXPECT_EQ(after.status, InboxStatus::kPending);
}

TEST_F(InboxTest, M_INBOX_2_InvalidPayloadsAndEmptyIdentityFieldsStoreNothing) {
  auto inbox = open_inbox({.limits = {.max_bytes = 64, .max_depth = 4}});
  for (const char* bad : {R"({"a":NaN})", R"({"a":1,"a":2})", "[[[[[1]]]]]", R"("\ud800")",
                          R"({"pad":"0123456789012345678901234567890123456789012345678901234"})"}) {
    absl::StatusOr<AcceptReceipt> r = inbox->accept(message("bad", bad));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(IsInvalidPayload(r.status())) << r.status();
  }
  InboxMessage no_id = message("");
  EXPECT_TRUE(IsInvalidPayload(inbox->accept(no_id).status()));
  InboxMessage no_tenant = message("x");
  no_tenant.scope = InboxScope::tenant("");
  EXPECT_TRUE(IsInvalidPayload(inbox->accept(no_tenant).status()));
  // Nothing was stored: the identity is still free.
  EXPECT_EQ(inbox->accept(message("bad"))->kind, Kind::kAccepted);
  EXPECT_TRUE(inbox->status()->counts.at("orders.projection.v1").at(InboxStatus::kPending) == 1);
}

TEST_F(InboxTest, DeclaredConsumersRefuseOthers) {
  auto inbox = open_inbox({.consumers = {"orders.projection.v1"}});
  EXPECT_TRUE(inbox->accept(message("e-1")).ok());
  EXPECT_TRUE(IsInvalidPayload(inbox->accept(message("e-1", "{}", "other")).status()));
}

TEST_F(InboxTest, M_STORE_1_RefusesAFifoAndAMailStoreFile) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo.db").c_str(), 0600), 0);
  EXPECT_TRUE(IsIoFailed(Inbox::open(dir_ / "fifo.db").status()));
  ASSERT_TRUE(SqliteMailStore::open(dir_ / "mail.db").ok());
  absl::StatusOr<std::unique_ptr<Inbox>> wrong = Inbox::open(dir_ / "mail.db");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(std::string(wrong.status().message()).find("not an inbox"), std::string::npos)
      << wrong.status();
}

TEST_F(InboxTest, StatusCountsByConsumerAndOldestPending) {
  auto inbox = open_inbox();
  const absl::Time t0 = clock_->now();
  ASSERT_TRUE(inbox->accept(message("e-1")).ok());
  clock_->advance(absl::Seconds(5));
  ASSERT_TRUE(inbox->accept(message("e-2")).ok());
  ASSERT_TRUE(inbox->accept(message("e-1", "{}", "audit")).ok());
  absl::StatusOr<InboxStatusReport> s = inbox->status();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->counts.at("orders.projection.v1").at(InboxStatus::kPending), 2);
  EXPECT_EQ(s->counts.at("audit").at(InboxStatus::kPending), 1);
  ASSERT_TRUE(s->oldest_pending.has_value());
  EXPECT_EQ(*s->oldest_pending, t0);
}

}  // namespace
}  // namespace postal::mail::testing
