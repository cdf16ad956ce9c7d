// MailStore: queue-group settlement marks (M-RECV-4), for every store (mail_store_suite.h):
// per (mailbox, group, message), durable with durable messages, gone with what they mark,
// bounded in groups, and refused whole when the request is bad.
#include <vector>

#include "absl/strings/str_cat.h"
#include "mail_store_suite.h"
#include "postal/mail/mail_errors.h"

namespace postal::mail::testing {
namespace {

std::vector<uint64_t> seqs_of(const std::vector<StoredMessage>& messages) {
  std::vector<uint64_t> out;
  for (const StoredMessage& m : messages) out.push_back(m.seq);
  return out;
}

std::vector<uint64_t> marks(MailStore& store, const std::string& id, const std::string& group) {
  absl::StatusOr<std::vector<uint64_t>> s = store.settled(id, group);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : std::vector<uint64_t>{};
}

TEST_P(MailStoreTest, M_RECV_4_SettlementIsPerGroupAndReadUnsettledSkipsOnlyThatGroupsMarks) {
  make("jobs", {.durable_all = true});
  std::vector<uint64_t> seq;
  for (int i = 0; i < 4; ++i) seq.push_back(*store_->append("jobs", Priority::kUrgent, "u"));
  ASSERT_TRUE(store_->settle("jobs", "workers", {seq[0], seq[2]}).ok());
  EXPECT_EQ(marks(*store_, "jobs", "workers"), (std::vector<uint64_t>{seq[0], seq[2]}));
  EXPECT_TRUE(marks(*store_, "jobs", "auditors").empty()) << "another group is unaffected";
  absl::StatusOr<std::vector<StoredMessage>> left = store_->read_unsettled("jobs", "workers");
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_EQ(seqs_of(*left), (std::vector<uint64_t>{seq[1], seq[3]}));
  EXPECT_EQ(seqs_of(*store_->read_unsettled("jobs", "auditors")), seq);
  EXPECT_EQ(*store_->count("jobs"), 4u) << "settling removes nothing from the mailbox";
  ASSERT_TRUE(store_->settle("jobs", "workers", {seq[0]}).ok()) << "settling again is a no-op";
  EXPECT_EQ(marks(*store_, "jobs", "workers").size(), 2u);
}

TEST_P(MailStoreTest, M_RECV_4_MarksOfDurableMessagesSurviveAReopenInMemoryOnesGoWithThem) {
  if (!store_->persistent()) GTEST_SKIP() << "a " << store_->kind() << " store keeps nothing";
  make("box");
  const uint64_t urgent = *store_->append("box", Priority::kUrgent, "u");
  const uint64_t normal = *store_->append("box", Priority::kNormal, "n");  // in memory (M-PRIO-2)
  ASSERT_TRUE(store_->settle("box", "g", {urgent, normal}).ok());
  EXPECT_EQ(marks(*store_, "box", "g"), (std::vector<uint64_t>{urgent, normal}));
  reopen();
  // The NATS store keeps normal messages, so their marks too.
  const std::vector<uint64_t> kept = store_->volatile_normal()
                                         ? std::vector<uint64_t>{urgent}
                                         : std::vector<uint64_t>{urgent, normal};
  EXPECT_EQ(marks(*store_, "box", "g"), kept);
  EXPECT_TRUE(store_->read_unsettled("box", "g")->empty());
}

TEST_P(MailStoreTest, M_RECV_4_MarksGoWithErasedConsumedAndRemovedMessages) {
  make("box", {.durable_all = true});
  std::vector<uint64_t> u;
  for (int i = 0; i < 3; ++i) u.push_back(*store_->append("box", Priority::kUrgent, "u"));
  const uint64_t n = *store_->append("box", Priority::kNormal, "n");
  ASSERT_TRUE(store_->settle("box", "g", {u[0], u[1], u[2], n}).ok());
  ASSERT_TRUE(*store_->erase("box", n));
  EXPECT_EQ(marks(*store_, "box", "g"), (std::vector<uint64_t>{u[0], u[1], u[2]}));
  ASSERT_EQ(*store_->consume_through("box", Priority::kUrgent, u[1]), 2u);
  EXPECT_EQ(marks(*store_, "box", "g"), std::vector<uint64_t>{u[2]});
  ASSERT_TRUE(store_->remove("box").ok());
  make("box", {.durable_all = true});  // the same name again: nothing of the old one's marks
  const uint64_t again = *store_->append("box", Priority::kUrgent, "again");
  EXPECT_TRUE(marks(*store_, "box", "g").empty());
  EXPECT_EQ(seqs_of(*store_->read_unsettled("box", "g")), std::vector<uint64_t>{again});
  if (store_->persistent()) {
    reopen();
    EXPECT_TRUE(marks(*store_, "box", "g").empty());
  }
}

TEST_P(MailStoreTest, M_RECV_4_MarksExpireWithTheirMailbox) {
  make("brief", {.ttl = absl::Seconds(5), .durable_all = true});
  const uint64_t a = *store_->append("brief", Priority::kUrgent, "a");
  ASSERT_TRUE(store_->settle("brief", "g", {a}).ok());
  clock_->advance(absl::Seconds(6));
  EXPECT_TRUE(IsMailboxNotFound(store_->settled("brief", "g").status()));
  EXPECT_TRUE(IsMailboxNotFound(store_->settle("brief", "g", {a})));
  ASSERT_TRUE(store_->expire(clock_->now()).ok());
  make("brief", {.durable_all = true});
  EXPECT_TRUE(marks(*store_, "brief", "g").empty());
}

TEST_P(MailStoreTest, M_RECV_4_AMarkForAMessageTheMailboxDoesNotHoldIsSkipped) {
  make("a", {.durable_all = true});
  make("b", {.durable_all = true});
  const uint64_t in_a = *store_->append("a", Priority::kUrgent, "x");
  const uint64_t in_b = *store_->append("b", Priority::kNormal, "y");
  ASSERT_TRUE(store_->settle("a", "g", {in_a, in_b, in_b + 1000}).ok());
  EXPECT_EQ(marks(*store_, "a", "g"), std::vector<uint64_t>{in_a});
  EXPECT_TRUE(marks(*store_, "b", "g").empty());
}

TEST_P(MailStoreTest, M_RECV_4_BadSettlementsAreRefusedAndMarkNothing) {
  make("box", {.durable_all = true});
  const uint64_t a = *store_->append("box", Priority::kUrgent, "a");
  EXPECT_EQ(store_->settle("box", "", {a}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->settle("box", std::string("g\0h", 3), {a}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->settle("box", std::string(kMaxQueueGroupBytes + 1, 'g'), {a}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_->settle("box", std::string(kMaxQueueGroupBytes, 'g'), {a}).ok());
  EXPECT_TRUE(IsMailboxNotFound(store_->settle("nowhere", "g", {a})));
  EXPECT_TRUE(marks(*store_, "box", "g").empty());
}

TEST_P(MailStoreTest, M_RECV_4_SettlingGroupsPerMailboxAreBounded) {
  open_store(StoreLimits{.max_settling_groups = 2});
  make("box", {.durable_all = true});
  make("other", {.durable_all = true});
  const uint64_t a = *store_->append("box", Priority::kUrgent, "a");
  const uint64_t n = *store_->append("box", Priority::kNormal, "n");
  ASSERT_TRUE(store_->settle("box", "g1", {a}).ok());
  ASSERT_TRUE(store_->settle("box", "g2", {n}).ok());
  absl::Status third = store_->settle("box", "g3", {a, n});
  EXPECT_TRUE(IsBudgetExhausted(third)) << third;
  EXPECT_TRUE(IsBudgetExhausted(store_->settle("box", "g3", {}))) << "the check alone, too";
  EXPECT_TRUE(marks(*store_, "box", "g3").empty()) << "a refused settle marks nothing";
  EXPECT_TRUE(store_->settle("box", "g1", {n}).ok()) << "a group holding marks goes on";
  const uint64_t o = *store_->append("other", Priority::kUrgent, "o");
  EXPECT_TRUE(store_->settle("other", "g3", {o}).ok()) << "the bound is per mailbox";
  // A group whose marked messages are all gone no longer counts.
  ASSERT_TRUE(*store_->erase("box", n));
  ASSERT_TRUE(*store_->erase("box", a));
  EXPECT_TRUE(store_->settle("box", "g3", {}).ok());
}

}  // namespace
}  // namespace postal::mail::testing
