// MailStore: creation, TTL, discovery and admission bounds (M-BOX), for every store.
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "mail_store_suite.h"
#include "postal/mail/mail_errors.h"

namespace postal::mail::testing {
namespace {

TEST_P(MailStoreTest, M_BOX_1_CreateIsIdempotentAndKeepsTheFirstTtl) {
  absl::StatusOr<CreateResult> first =
      store_->create({.name = "task.queue", .ttl = absl::Hours(1), .max_messages = 10});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created);
  clock_->advance(absl::Minutes(10));
  absl::StatusOr<CreateResult> again =
      store_->create({.name = "task.queue", .ttl = absl::Hours(5), .max_messages = 10});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->mailbox.expires_at, first->mailbox.expires_at) << "the first TTL stays";
  EXPECT_EQ(again->mailbox.created_at, first->mailbox.created_at);
  EXPECT_EQ(store_->mailbox("task.queue")->expires_at, first->mailbox.expires_at);
}

TEST_P(MailStoreTest, M_BOX_1_MismatchedBoundsFailWithMailboxConflictAndChangeNothing) {
  make("bounded", {.max_messages = 10, .max_message_bytes = 100});
  absl::StatusOr<CreateResult> r =
      store_->create({.name = "bounded", .max_messages = 10, .max_message_bytes = 101});
  EXPECT_TRUE(IsMailboxConflict(r.status())) << r.status();
  r = store_->create({.name = "bounded", .max_messages = 11, .max_message_bytes = 100});
  EXPECT_TRUE(IsMailboxConflict(r.status())) << r.status();
  EXPECT_EQ(store_->mailbox("bounded")->max_message_bytes, 100u);
  EXPECT_EQ(store_->mailbox("bounded")->max_messages, 10u);
}

TEST_P(MailStoreTest, M_BOX_2_ConcurrentCreatesYieldExactlyOneCreated) {
  constexpr int kThreads = 8;
  std::atomic<int> created{0};
  std::atomic<int> existing{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      absl::StatusOr<CreateResult> r = store_->create({.name = "race"});
      ASSERT_TRUE(r.ok()) << r.status();
      ++(r->created ? created : existing);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(created.load(), 1);
  EXPECT_EQ(existing.load(), kThreads - 1);
}

TEST_P(MailStoreTest, M_BOX_3_TtlEndRemovesTheMailboxAndItsMessages) {
  make("short", {.ttl = absl::Seconds(30)});
  make("forever");
  ASSERT_TRUE(store_->append("short", Priority::kCritical, "gone soon").ok());
  clock_->advance(absl::Seconds(29));
  EXPECT_TRUE(store_->append("short", Priority::kCritical, "still there").ok());
  clock_->advance(absl::Seconds(1));
  // Gone for every verb before any sweep ...
  EXPECT_TRUE(IsMailboxNotFound(store_->append("short", Priority::kUrgent, "x").status()));
  EXPECT_TRUE(IsMailboxNotFound(store_->read_all("short").status()));
  // ... and the sweep names it once.
  absl::StatusOr<std::vector<MailboxInfo>> gone = store_->expire(clock_->now());
  ASSERT_TRUE(gone.ok()) << gone.status();
  ASSERT_EQ(gone->size(), 1u);
  EXPECT_EQ(gone->front().id, "short");
  EXPECT_TRUE(store_->expire(clock_->now())->empty());
  // A new mailbox of the same name starts empty, with the new TTL.
  absl::StatusOr<CreateResult> again = store_->create({.name = "short", .ttl = absl::Hours(1)});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->created);
  EXPECT_EQ(*store_->count("short"), 0u);
  EXPECT_TRUE(store_->mailbox("forever").ok());
}

TEST_P(MailStoreTest, M_BOX_3_AnExpiredMailboxIsReplacedByCreateEvenBeforeTheSweep) {
  make("lapsed", {.ttl = absl::Seconds(1), .max_messages = 5});
  ASSERT_TRUE(store_->append("lapsed", Priority::kUrgent, "old").ok());
  clock_->advance(absl::Seconds(2));
  absl::StatusOr<CreateResult> r = store_->create({.name = "lapsed", .max_messages = 7});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->created);
  EXPECT_TRUE(store_->read_all("lapsed")->empty());
}

TEST_P(MailStoreTest, M_BOX_4_PrivateIdsAre128BitHexAndNeverListed) {
  std::set<std::string> ids;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<CreateResult> r = store_->create({.is_public = false});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->created);
    EXPECT_EQ(r->mailbox.id.size(), 32u);
    EXPECT_EQ(r->mailbox.id.find_first_not_of("0123456789abcdef"), std::string::npos);
    ids.insert(r->mailbox.id);
  }
  EXPECT_EQ(ids.size(), 20u);
  make("public.one");
  absl::StatusOr<std::vector<MailboxInfo>> listed = store_->list_public();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().id, "public.one");
  EXPECT_TRUE(store_->append(*ids.begin(), Priority::kUrgent, "secret").ok());
}

TEST_P(MailStoreTest, M_BOX_4_PrivateCreateWithANameIsRejected) {
  absl::StatusOr<CreateResult> r = store_->create({.name = "chosen", .is_public = false});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(store_->create({.name = ""}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(MailStoreTest, M_BOX_4_PublicListingIsSortedAndSkipsExpired) {
  make("b.queue");
  make("a.queue", {.ttl = absl::Seconds(5)});
  make("c.queue");
  absl::StatusOr<std::vector<MailboxInfo>> listed = store_->list_public();
  ASSERT_TRUE(listed.ok());
  std::vector<std::string> names;
  for (const MailboxInfo& m : *listed) names.push_back(m.id);
  EXPECT_EQ(names, (std::vector<std::string>{"a.queue", "b.queue", "c.queue"}));
  clock_->advance(absl::Seconds(5));
  EXPECT_EQ(store_->list_public()->size(), 2u);
}

TEST_P(MailStoreTest, M_BOX_5_CreatePastTheCapFailsBudgetExhaustedAndCreatesNothing) {
  open_store(StoreLimits{.max_mailboxes = 3});
  make("one");
  make("two", {.ttl = absl::Seconds(1)});
  make("three");
  absl::StatusOr<CreateResult> r = store_->create({.name = "four"});
  EXPECT_TRUE(IsBudgetExhausted(r.status())) << r.status();
  EXPECT_TRUE(IsMailboxNotFound(store_->mailbox("four").status()));
  EXPECT_FALSE(store_->create({.name = "one"})->created) << "an existing one still answers";
  clock_->advance(absl::Seconds(1));  // "two" expired: room for one more
  EXPECT_TRUE(store_->create({.name = "four"}).ok());
}

TEST_P(MailStoreTest, M_BOX_5_DefaultCapIs1024) {
  for (int i = 0; i < 1024; ++i) {
    ASSERT_TRUE(store_->create({.name = absl::StrCat("m", i)}).ok()) << i;
  }
  EXPECT_TRUE(IsBudgetExhausted(store_->create({.name = "m1024"}).status()));
}

TEST_P(MailStoreTest, M_BOX_6_ExactlyTheByteLimitIsAcceptedOneMoreIsNot) {
  make("bytes", {.max_message_bytes = 8});
  EXPECT_TRUE(store_->append("bytes", Priority::kUrgent, std::string(8, 'x')).ok());
  absl::StatusOr<uint64_t> over = store_->append("bytes", Priority::kUrgent, std::string(9, 'x'));
  EXPECT_TRUE(IsBudgetExhausted(over.status())) << over.status();
  over = store_->append("bytes", Priority::kNormal, std::string(9, 'x'));
  EXPECT_TRUE(IsBudgetExhausted(over.status())) << over.status();
  // M-STORE-2: the rejected appends stored nothing.
  EXPECT_EQ(*store_->count("bytes"), 1u);
  EXPECT_EQ(store_->read_all("bytes")->size(), 1u);
}

TEST_P(MailStoreTest, M_BOX_6_ExactlyMaxMessagesAreAcceptedUnderConcurrentAppends) {
  make("count", {.max_messages = 50});
  std::atomic<int> accepted{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const Priority p = (i % 2 == 0) ? Priority::kUrgent : Priority::kNormal;
        absl::StatusOr<uint64_t> seq = store_->append("count", p, std::to_string(t));
        if (seq.ok()) {
          ++accepted;
        } else {
          EXPECT_TRUE(IsBudgetExhausted(seq.status())) << seq.status();
          ++refused;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(accepted.load(), 50);
  EXPECT_EQ(refused.load(), 30);
  EXPECT_EQ(store_->read_all("count")->size(), 50u);
  // Consuming makes room again.
  const uint64_t first = store_->read_all("count")->front().seq;
  ASSERT_TRUE(*store_->erase("count", first));
  EXPECT_TRUE(store_->append("count", Priority::kUrgent, "room").ok());
}

TEST_P(MailStoreTest, M_STORE_2_RejectedAppendsAndCreatesChangeNothing) {
  make("guarded", {.max_messages = 1, .max_message_bytes = 4});
  ASSERT_TRUE(store_->append("guarded", Priority::kCritical, "ok").ok());
  const uint64_t seq = store_->last_seq();
  EXPECT_FALSE(store_->append("guarded", Priority::kCritical, "full").ok());
  EXPECT_FALSE(store_->append("nobody", Priority::kCritical, "x").ok());
  EXPECT_FALSE(store_->create({.name = "guarded", .max_messages = 2}).ok());
  EXPECT_EQ(store_->last_seq(), seq) << "no sequence number was spent";
  if (store_->persistent()) reopen();
  absl::StatusOr<std::vector<StoredMessage>> all = store_->read_all("guarded");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(all->front().body, "ok");
  EXPECT_EQ(store_->mailbox("guarded")->max_messages, 1u);
}

TEST_P(MailStoreTest, RemoveDeletesTheMailboxAndItsMessages) {
  make("doomed", {.durable_all = true});
  ASSERT_TRUE(store_->append("doomed", Priority::kNormal, "n").ok());
  ASSERT_TRUE(store_->append("doomed", Priority::kCritical, "c").ok());
  ASSERT_TRUE(store_->remove("doomed").ok());
  EXPECT_TRUE(IsMailboxNotFound(store_->read_all("doomed").status()));
  EXPECT_TRUE(IsMailboxNotFound(store_->remove("doomed")));
  if (store_->persistent()) reopen();
  EXPECT_TRUE(store_->create({.name = "doomed"})->created);
  EXPECT_TRUE(store_->read_all("doomed")->empty());
}

TEST_P(MailStoreTest, M_BOX_1_AMailboxOutlivesAReopenWithItsBoundsAndTtl) {
  if (!store_->persistent()) GTEST_SKIP() << "a " << store_->kind() << " store keeps nothing";
  const MailboxInfo first =
      make("kept", {.ttl = absl::Hours(2), .max_messages = 3, .max_message_bytes = 64});
  reopen();
  absl::StatusOr<CreateResult> r = store_->create(
      {.name = "kept", .ttl = absl::Hours(9), .max_messages = 3, .max_message_bytes = 64});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->created);
  EXPECT_EQ(r->mailbox.expires_at, first.expires_at);
}

}  // namespace
}  // namespace postal::mail::testing
