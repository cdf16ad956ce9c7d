// The mail-layer adapter: fetch with a lease, accept (which commits), then settle — handled for
// accepted and duplicate, discard for a conflict or a non-event, unhandled when the inbox could
// not store it (M-INBOX-1, seed 001 "accept before acknowledging").
#include "postal/mail/inbox_mail_consumer.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "inbox_test_support.h"
#include "postal/mail/inbox_errors.h"
#include "postal/mail/inbox_letter.h"
#include "postal/mail/mem_provider.h"

namespace postal::mail::testing {
namespace {

constexpr char kQueue[] = "mem:svc@example.com/orders";

class InboxMailConsumerTest : public InboxTest {
 protected:
  void SetUp() override {
    InboxTest::SetUp();
    ASSERT_TRUE(office_.register_provider(*MemProvider::create({.bus = MemBus::isolated()})).ok());
    ASSERT_TRUE(office_.start().ok());
  }
  InboxMailConsumerOptions options() const {
    return {.address = kQueue,
            .scope = InboxScope::tenant("t1"),
            .source = "orders-service",
            .consumer = "orders.projection.v1"};
  }
  void post(const std::string& id, const std::string& payload) {
    InboxEvent e;
    e.event_id = id;
    e.event_type = "order.created";
    e.payload = payload;
    ASSERT_TRUE(office_.post(kQueue, to_letter(e)).ok());
  }
  size_t queued() { return office_.peek(kQueue, 10)->size(); }

  PostOffice office_;
};

TEST_F(InboxMailConsumerTest, M_INBOX_1_AcceptsBeforeAcknowledgingAndAcksDuplicates) {
  auto inbox = open_inbox();
  InboxMailConsumer consumer(*inbox, office_, options());
  post("e-1", R"({"orderId":7})");
  post("e-1", R"({"orderId":7.0})");  // a redelivery by the producer
  absl::StatusOr<std::optional<MailAcceptOutcome>> first = consumer.poll_once();
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status();
  ASSERT_TRUE((*first)->receipt.ok()) << (*first)->receipt.status();
  EXPECT_EQ((*first)->receipt->kind, AcceptReceipt::Kind::kAccepted);
  EXPECT_EQ((*first)->settled, Disposition::kHandled);
  EXPECT_TRUE((*first)->settlement_took_effect);
  absl::StatusOr<std::optional<MailAcceptOutcome>> second = consumer.poll_once();
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*second)->receipt->kind, AcceptReceipt::Kind::kDuplicate);
  EXPECT_EQ((*second)->settled, Disposition::kHandled);
  EXPECT_EQ(queued(), 0u);
  EXPECT_FALSE(consumer.poll_once()->has_value());
  EXPECT_EQ(inbox->record((*first)->receipt->id)->value().message.message_id, "e-1");
}

TEST_F(InboxMailConsumerTest, M_INBOX_2_AConflictIsDiscardedNotRedelivered) {
  auto inbox = open_inbox();
  InboxMailConsumer consumer(*inbox, office_, options());
  post("e-1", R"({"orderId":7})");
  post("e-1", R"({"orderId":8})");
  ASSERT_TRUE(consumer.poll_once().ok());
  absl::StatusOr<std::optional<MailAcceptOutcome>> conflict = consumer.poll_once();
  ASSERT_TRUE(conflict.ok() && conflict->has_value());
  EXPECT_TRUE(IsIdentityConflict((*conflict)->receipt.status()));
  EXPECT_EQ((*conflict)->settled, Disposition::kDiscard);
  EXPECT_EQ(queued(), 0u);
}

TEST_F(InboxMailConsumerTest, M_INBOX_1_AStorageFailureLeavesTheLetterForRedelivery) {
  auto inbox = open_inbox({.busy_timeout = absl::Milliseconds(20)});
  InboxMailConsumer consumer(*inbox, office_, options());
  post("e-1", R"({"orderId":7})");
  // Another connection holds the file's write lock: accept cannot commit.
  sqlite3* blocker = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "inbox.db").c_str(), &blocker), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(blocker, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  absl::StatusOr<std::optional<MailAcceptOutcome>> failed = consumer.poll_once();
  ASSERT_TRUE(failed.ok() && failed->has_value());
  EXPECT_FALSE((*failed)->receipt.ok());
  EXPECT_EQ((*failed)->settled, Disposition::kUnhandled);
  EXPECT_EQ(queued(), 1u);  // back in the queue
  sqlite3_exec(blocker, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(blocker);
  absl::StatusOr<std::optional<MailAcceptOutcome>> retried = consumer.poll_once();
  ASSERT_TRUE(retried.ok() && retried->has_value());
  EXPECT_EQ((*retried)->receipt->kind, AcceptReceipt::Kind::kAccepted);
}

}  // namespace
}  // namespace postal::mail::testing
