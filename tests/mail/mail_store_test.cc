// MailStore: messages, order and durability, for every store (mail_store_suite.h).
#include <algorithm>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "mail_store_suite.h"
#include "postal/mail/mail_errors.h"

namespace postal::mail::testing {
namespace {

std::vector<std::string> bodies(const std::vector<StoredMessage>& messages) {
  std::vector<std::string> out;
  for (const StoredMessage& m : messages) out.push_back(m.body);
  return out;
}

std::vector<std::string> all_bodies(MailStore& store, const std::string& id) {
  absl::StatusOr<std::vector<StoredMessage>> all = store.read_all(id);
  EXPECT_TRUE(all.ok()) << all.status();
  return all.ok() ? bodies(*all) : std::vector<std::string>{};
}

TEST_P(MailStoreTest, AppendReturnsIncreasingSequenceNumbers) {
  make("seq");
  uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<uint64_t> seq = store_->append("seq", Priority::kUrgent, "m");
    ASSERT_TRUE(seq.ok()) << seq.status();
    EXPECT_GT(*seq, last);
    last = *seq;
  }
  EXPECT_EQ(store_->last_seq(), last);
  EXPECT_EQ(*store_->count("seq"), 5u);
}

TEST_P(MailStoreTest, AppendToAnUnknownMailboxFailsMailboxNotFound) {
  absl::StatusOr<uint64_t> seq = store_->append("nobody", Priority::kCritical, "x");
  EXPECT_TRUE(IsMailboxNotFound(seq.status())) << seq.status();
  EXPECT_EQ(store_->last_seq(), 0u);
}

TEST_P(MailStoreTest, M_PRIO_1_ReadAllIsCriticalThenUrgentThenNormalFifoWithin) {
  make("order");
  const std::vector<std::pair<Priority, std::string>> posts = {
      {Priority::kNormal, "n1"},   {Priority::kUrgent, "u1"},   {Priority::kCritical, "c1"},
      {Priority::kNormal, "n2"},   {Priority::kCritical, "c2"}, {Priority::kUrgent, "u2"},
      {Priority::kCritical, "c3"},
  };
  for (const auto& [p, body] : posts) ASSERT_TRUE(store_->append("order", p, body).ok());
  EXPECT_EQ(all_bodies(*store_, "order"),
            (std::vector<std::string>{"c1", "c2", "c3", "u1", "u2", "n1", "n2"}));
}

TEST_P(MailStoreTest, ReadPagesALaneByRange) {
  make("pages");
  std::vector<uint64_t> seqs;
  for (int i = 0; i < 5; ++i) {
    seqs.push_back(*store_->append("pages", Priority::kUrgent, absl::StrCat("m", i)));
  }
  absl::StatusOr<std::vector<StoredMessage>> page =
      store_->read("pages", LaneRange{.priority = Priority::kUrgent, .after = seqs[1], .limit = 2});
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(bodies(*page), (std::vector<std::string>{"m2", "m3"}));
  page = store_->read("pages", LaneRange{.priority = Priority::kUrgent, .through = seqs[0]});
  EXPECT_EQ(bodies(*page), (std::vector<std::string>{"m0"}));
}

TEST_P(MailStoreTest, EmptyAndBinaryBodiesRoundTrip) {
  make("bin");
  const std::string binary("a\0b\xff", 4);
  ASSERT_TRUE(store_->append("bin", Priority::kCritical, "").ok());
  ASSERT_TRUE(store_->append("bin", Priority::kCritical, binary).ok());
  EXPECT_EQ(all_bodies(*store_, "bin"), (std::vector<std::string>{"", binary}));
}

TEST_P(MailStoreTest, M_RECV_5_EraseRemovesOneMessageForGood) {
  make("erase", {.durable_all = true});
  const uint64_t a = *store_->append("erase", Priority::kNormal, "a");
  const uint64_t b = *store_->append("erase", Priority::kUrgent, "b");
  ASSERT_TRUE(*store_->erase("erase", a));
  EXPECT_FALSE(*store_->erase("erase", a)) << "a second erase finds nothing";
  EXPECT_EQ(all_bodies(*store_, "erase"), std::vector<std::string>{"b"});
  EXPECT_EQ(*store_->count("erase"), 1u);
  if (store_->persistent()) {
    reopen();
    EXPECT_EQ(all_bodies(*store_, "erase"), std::vector<std::string>{"b"});
  }
  EXPECT_TRUE(*store_->erase("erase", b));
}

TEST_P(MailStoreTest, M_RECV_5_EraseOfAnInMemoryNormalMessage) {
  make("erase-mem");
  const uint64_t a = *store_->append("erase-mem", Priority::kNormal, "a");
  EXPECT_TRUE(*store_->erase("erase-mem", a));
  EXPECT_TRUE(all_bodies(*store_, "erase-mem").empty());
  EXPECT_EQ(*store_->count("erase-mem"), 0u);
}

TEST_P(MailStoreTest, ConsumeThroughRemovesALanePrefixOnly) {
  make("lane", {.durable_all = true});
  std::vector<uint64_t> urgent;
  for (int i = 0; i < 4; ++i) {
    urgent.push_back(*store_->append("lane", Priority::kUrgent, absl::StrCat("u", i)));
    ASSERT_TRUE(store_->append("lane", Priority::kNormal, absl::StrCat("n", i)).ok());
  }
  absl::StatusOr<uint64_t> n = store_->consume_through("lane", Priority::kUrgent, urgent[2]);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 3u);
  EXPECT_EQ(all_bodies(*store_, "lane"), (std::vector<std::string>{"u3", "n0", "n1", "n2", "n3"}));
  EXPECT_EQ(*store_->count("lane"), 5u);
}

TEST_P(MailStoreTest, ConcurrentAppendsAreAllStoredWithDistinctSequenceNumbers) {
  make("burst");
  constexpr int kThreads = 8;
  constexpr int kEach = 100;
  std::vector<std::vector<uint64_t>> acked(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        absl::StatusOr<uint64_t> seq =
            store_->append("burst", Priority::kCritical, absl::StrCat(t, ":", i));
        if (seq.ok()) acked[t].push_back(*seq);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<uint64_t> seqs;
  for (const auto& a : acked) seqs.insert(a.begin(), a.end());
  ASSERT_EQ(seqs.size(), size_t{kThreads * kEach});
  if (store_->persistent()) reopen();
  absl::StatusOr<std::vector<StoredMessage>> all = store_->read_all("burst");
  ASSERT_TRUE(all.ok());
  std::set<uint64_t> stored;
  for (const StoredMessage& m : *all) stored.insert(m.seq);
  EXPECT_EQ(stored, seqs);
}

// append_async: every append completes exactly once with what append would return; durable ones
// complete in sequence order (the writer commits in submission order), in-memory ones at once; a
// failure completes too, and what completed ok is stored — also when some commit on the caller's
// thread (commit_here_if_idle) between others on the writer's.
TEST_P(MailStoreTest, AppendAsyncCompletesEachAppendOnceInSequenceOrder) {
  make("async", {.max_messages = 150});
  constexpr int kAppends = 200;
  absl::Mutex mu;
  std::vector<uint64_t> durable_seqs;
  int failed = 0;
  int completed = 0;
  for (int i = 0; i < kAppends; ++i) {
    const bool durable = i % 2 == 1;
    store_->append_async("async", durable ? Priority::kCritical : Priority::kNormal,
                         absl::StrCat("m", i), [&, durable](absl::StatusOr<uint64_t> seq) {
                           absl::MutexLock lock(&mu);
                           ++completed;
                           if (seq.ok()) {
                             if (durable) durable_seqs.push_back(*seq);
                           } else {
                             EXPECT_TRUE(IsBudgetExhausted(seq.status())) << seq.status();
                             ++failed;
                           }
                         },
                         // Every other durable append may commit on this thread: the order holds.
                         MailStore::AppendAsync{.commit_here_if_idle = i % 4 == 1});
  }
  {
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                        +[](int* n) { return *n == kAppends; }, &completed),
                                    absl::Seconds(30)));
    EXPECT_EQ(failed, kAppends - 150);  // maxMessages (M-BOX-6) holds without waiting as well
    EXPECT_EQ(durable_seqs.size(), 75u);
    EXPECT_TRUE(std::is_sorted(durable_seqs.begin(), durable_seqs.end()));
  }
  if (store_->persistent()) reopen();
  EXPECT_EQ(all_bodies(*store_, "async").size(),
            store_->persistent() && store_->volatile_normal() ? 75u : 150u);
}

TEST_P(MailStoreTest, M_PRIO_2_CriticalAndUrgentSurviveAReopenNormalDoesNot) {
  if (!store_->persistent()) GTEST_SKIP() << "a " << store_->kind() << " store keeps nothing";
  make("restart");
  ASSERT_TRUE(store_->append("restart", Priority::kNormal, "n").ok());
  ASSERT_TRUE(store_->append("restart", Priority::kUrgent, "u").ok());
  ASSERT_TRUE(store_->append("restart", Priority::kCritical, "c").ok());
  reopen();
  if (!store_->volatile_normal()) {  // the NATS store keeps normal messages too
    EXPECT_EQ(all_bodies(*store_, "restart"), (std::vector<std::string>{"c", "u", "n"}));
    return;
  }
  EXPECT_EQ(all_bodies(*store_, "restart"), (std::vector<std::string>{"c", "u"}));
  EXPECT_EQ(*store_->count("restart"), 2u);
}

TEST_P(MailStoreTest, M_PRIO_2_DurableAllKeepsNormalMessagesAcrossAReopen) {
  if (!store_->persistent()) GTEST_SKIP() << "a " << store_->kind() << " store keeps nothing";
  make("all", {.durable_all = true});
  ASSERT_TRUE(store_->append("all", Priority::kNormal, "n").ok());
  ASSERT_TRUE(store_->append("all", Priority::kCritical, "c").ok());
  reopen();
  EXPECT_EQ(all_bodies(*store_, "all"), (std::vector<std::string>{"c", "n"}));
}

TEST_P(MailStoreTest, SequenceNumbersAreNeverReusedAcrossAReopen) {
  if (!store_->persistent()) GTEST_SKIP() << "a " << store_->kind() << " store keeps nothing";
  make("mark");
  uint64_t last = 0;
  for (Priority p : {Priority::kUrgent, Priority::kNormal, Priority::kNormal}) {
    last = *store_->append("mark", p, "m");
  }
  const uint64_t first = *store_->append("mark", Priority::kUrgent, "erased");
  ASSERT_TRUE(*store_->erase("mark", first));
  last = first;
  reopen();
  EXPECT_GE(store_->last_seq(), last);
  EXPECT_GT(*store_->append("mark", Priority::kUrgent, "after"), last);
}

// The rows carry the high water; a removed mailbox's highest seq is recorded before its rows go.
TEST_P(MailStoreTest, SequenceNumbersAreNeverReusedAfterAMailboxIsRemoved) {
  if (!store_->persistent()) GTEST_SKIP() << "a " << store_->kind() << " store keeps nothing";
  make("gone");
  uint64_t last = 0;
  for (int i = 0; i < 3; ++i) last = *store_->append("gone", Priority::kCritical, "m");
  ASSERT_TRUE(store_->remove("gone").ok());
  reopen();
  EXPECT_GE(store_->last_seq(), last);
  make("again");
  EXPECT_GT(*store_->append("again", Priority::kCritical, "after"), last);
}

INSTANTIATE_TEST_SUITE_P(Stores, MailStoreTest,
                         ::testing::Values(MemStore(), SqliteStore(Durability::kOs),
                                           SqliteStore(Durability::kDisk), NatsStore()),
                         StoreName);

}  // namespace
}  // namespace postal::mail::testing
