// RetainedMailboxes over every store: store-then-push, replay then live (M-KIND-2), priorities
// (M-PRIO-1), expiry (M-BOX-3), the public listing (M-BOX-4), queue groups (M-RECV-4) and
// deleting a retained message (M-RECV-5).
#include "postal/mail/retained_mailboxes.h"

#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "mail_store_suite.h"
#include "postal/mail/mail_errors.h"

namespace postal::mail::testing {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(30);

// Collects what a subscription receives; waits for it with a deadline.
class Inbox {
 public:
  std::function<void(const RetainedMessage&)> handler() {
    return [this](const RetainedMessage& m) {
      absl::MutexLock lock(&mu_);
      messages_.push_back(m);
    };
  }
  // Records the message, then settles it as `decide` says (M-RECV-4).
  RetainedHandler settling(std::function<Disposition(const RetainedMessage&)> decide) {
    return [this, decide = std::move(decide)](const RetainedMessage& m) {
      {
        absl::MutexLock lock(&mu_);
        messages_.push_back(m);
      }
      return decide(m);
    };
  }
  bool wait_for(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return messages_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kDeadline);
  }
  std::vector<std::string> bodies() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> out;
    for (const RetainedMessage& m : messages_) out.push_back(m.body);
    return out;
  }
  std::vector<uint64_t> seqs() {
    absl::MutexLock lock(&mu_);
    std::vector<uint64_t> out;
    for (const RetainedMessage& m : messages_) out.push_back(m.seq);
    return out;
  }
  size_t size() {
    absl::MutexLock lock(&mu_);
    return messages_.size();
  }

 private:
  absl::Mutex mu_;
  std::vector<RetainedMessage> messages_ ABSL_GUARDED_BY(mu_);
};

class RetainedTest : public MailStoreTest {
 protected:
  void SetUp() override {
    MailStoreTest::SetUp();
    start_retained();
  }
  void start_retained() {
    shared_ = std::shared_ptr<MailStore>(std::move(store_));
    absl::StatusOr<std::unique_ptr<RetainedMailboxes>> r = RetainedMailboxes::create(
        {.store = shared_, .clock = clock_, .sweep_interval = absl::ZeroDuration()});
    ASSERT_TRUE(r.ok()) << r.status();
    mail_ = *std::move(r);
  }
  // Closes the mailboxes and the store, opens the store file again and serves it anew.
  void reopen_retained() {
    mail_.reset();
    shared_.reset();
    open_store();
    start_retained();
  }
  void TearDown() override {
    mail_.reset();
    shared_.reset();
    MailStoreTest::TearDown();
  }
  void create(const std::string& name, MailboxSpec spec = {}) {
    spec.name = name;
    ASSERT_TRUE(mail_->create_mailbox(spec).ok());
  }
  uint64_t publish(const std::string& box, Priority p, const std::string& body) {
    absl::StatusOr<uint64_t> seq = mail_->publish(box, p, body);
    EXPECT_TRUE(seq.ok()) << seq.status();
    return seq.ok() ? *seq : 0;
  }
  RetainedSubscription subscribe(const std::string& box, Inbox& inbox,
                                 RetainedSubscribeOptions options = {}) {
    absl::StatusOr<RetainedSubscription> s = mail_->subscribe(box, inbox.handler(), options);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : RetainedSubscription{};
  }

  std::shared_ptr<MailStore> shared_;
  std::unique_ptr<RetainedMailboxes> mail_;
};

TEST_P(RetainedTest, M_KIND_2_ASubscriptionReplaysInPriorityOrderThenContinuesLive) {
  create("agent.inbox");
  publish("agent.inbox", Priority::kNormal, "n1");
  publish("agent.inbox", Priority::kUrgent, "u1");
  publish("agent.inbox", Priority::kCritical, "c1");
  publish("agent.inbox", Priority::kNormal, "n2");
  Inbox inbox;
  RetainedSubscription sub = subscribe("agent.inbox", inbox);
  ASSERT_TRUE(inbox.wait_for(4));
  publish("agent.inbox", Priority::kNormal, "live");
  ASSERT_TRUE(inbox.wait_for(5));
  EXPECT_EQ(inbox.bodies(), (std::vector<std::string>{"c1", "u1", "n1", "n2", "live"}));
  // Store, then push: the live message is retained too.
  EXPECT_EQ(*shared_->count("agent.inbox"), 5u);
}

TEST_P(RetainedTest, M_KIND_2_EverySubscriptionReplaysTheWholeMailbox) {
  create("board");
  publish("board", Priority::kUrgent, "a");
  publish("board", Priority::kUrgent, "b");
  Inbox first;
  Inbox second;
  RetainedSubscription s1 = subscribe("board", first);
  ASSERT_TRUE(first.wait_for(2));
  s1.unsubscribe();
  RetainedSubscription s2 = subscribe("board", second);
  ASSERT_TRUE(second.wait_for(2));
  EXPECT_EQ(second.bodies(), (std::vector<std::string>{"a", "b"})) << "no consumer position";
}

// Half the publishers use publish_async answered where the commit completes (what a MailboxHost
// does), which skips routing while no subscription exists: the first subscriptions start while
// they run, so a message committed as the first one forms is either routed or replayed.
TEST_P(RetainedTest, M_KIND_2_ConcurrentPublishesDuringReplaysAreNeitherLostNorDoubled) {
  create("busy");
  for (int i = 0; i < 300; ++i) {
    publish("busy", i % 3 == 0 ? Priority::kCritical : Priority::kNormal, absl::StrCat("pre", i));
  }
  constexpr int kPublishers = 4;
  constexpr int kEach = 150;
  std::atomic<bool> go{false};
  std::vector<std::thread> publishers;
  for (int t = 0; t < kPublishers; ++t) {
    publishers.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      std::atomic<int> answered{0};
      for (int i = 0; i < kEach; ++i) {
        const Priority p = i % 2 == 0 ? Priority::kUrgent : Priority::kNormal;
        if (t % 2 == 0) {
          ASSERT_TRUE(mail_->publish("busy", p, absl::StrCat(t, ":", i)).ok());
          continue;
        }
        mail_->publish_async(
            "busy", p, absl::StrCat(t, ":", i),
            [&](absl::StatusOr<uint64_t> seq) {
              EXPECT_TRUE(seq.ok()) << seq.status();
              answered.fetch_add(1);
            },
            {.commit_here_if_idle = i % 3 != 0, .done_where_committed = true});
      }
      while (t % 2 == 1 && answered.load() < kEach) std::this_thread::yield();
    });
  }
  // Subscriptions start while the publishers run, each replaying a different backlog.
  std::vector<std::unique_ptr<Inbox>> inboxes;
  std::vector<RetainedSubscription> subs;
  go = true;
  for (int s = 0; s < 6; ++s) {
    inboxes.push_back(std::make_unique<Inbox>());
    subs.push_back(subscribe("busy", *inboxes.back()));
    std::this_thread::yield();
  }
  for (std::thread& t : publishers) t.join();
  const size_t total = 300 + kPublishers * kEach;
  absl::StatusOr<std::vector<StoredMessage>> stored = shared_->read_all("busy");
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), total);
  std::set<uint64_t> all;
  for (const StoredMessage& m : *stored) all.insert(m.seq);
  for (size_t s = 0; s < inboxes.size(); ++s) {
    ASSERT_TRUE(inboxes[s]->wait_for(total))
        << "subscription " << s << " got " << inboxes[s]->size();
    ASSERT_TRUE(mail_->wait_idle(kDeadline));
    const std::vector<uint64_t> got = inboxes[s]->seqs();
    EXPECT_EQ(got.size(), total) << "subscription " << s << ": a message was doubled";
    EXPECT_EQ(std::set<uint64_t>(got.begin(), got.end()), all)
        << "subscription " << s << ": a message was lost";
  }
}

// publish_async (what a MailboxHost uses for posts from other procs): stored, then pushed live
// like publish, with its sequence number reported once stored; destroying the mailboxes waits for
// what is still being committed, so every `done` runs and nothing acked is missing.
TEST_P(RetainedTest, M_KIND_2_PublishAsyncStoresThenPushesAndTheDestructorWaitsForIt) {
  create("async.inbox");
  Inbox live;
  RetainedSubscription sub = subscribe("async.inbox", live);
  constexpr int kPosts = 100;
  std::atomic<int> done{0};
  for (int i = 0; i < kPosts; ++i) {
    mail_->publish_async("async.inbox", Priority::kUrgent, absl::StrCat("a", i),
                         [&](absl::StatusOr<uint64_t> seq) {
                           EXPECT_TRUE(seq.ok()) << seq.status();
                           done.fetch_add(1);
                         });
  }
  ASSERT_TRUE(live.wait_for(kPosts));
  const std::vector<std::string> bodies = live.bodies();
  const std::set<std::string> got(bodies.begin(), bodies.end());
  EXPECT_EQ(got.size(), size_t{kPosts});
  for (int i = 0; i < kPosts; ++i) {
    mail_->publish_async("async.inbox", Priority::kCritical, absl::StrCat("late", i),
                         [&](absl::StatusOr<uint64_t>) { done.fetch_add(1); });
  }
  sub.unsubscribe();
  mail_.reset();  // waits for the late ones
  EXPECT_EQ(done.load(), 2 * kPosts);
  absl::StatusOr<uint64_t> n = shared_->count("async.inbox");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, uint64_t{2 * kPosts});
}

// Mailbox-level calls hold the mailboxes' lock across a store call that waits for the store's
// writer; publish_async's continuations must therefore never wait for that lock on the writer
// thread. Before they moved to a strand, this interleaving deadlocked within a few rounds.
TEST_P(RetainedTest, M_KIND_2_PublishAsyncNeverDeadlocksWithMailboxLevelCalls) {
  create("busy");
  constexpr int kRounds = 200;
  absl::Mutex mu;
  int done = 0;
  for (int i = 0; i < kRounds; ++i) {
    // Also answered where the commit completes (the writer, or here): that must not wait for
    // the lock either.
    const RetainedPublishAsync how{.commit_here_if_idle = i % 3 == 1,
                                   .done_where_committed = i % 3 != 0};
    mail_->publish_async(
        "busy", Priority::kCritical, absl::StrCat("m", i),
        [&](absl::StatusOr<uint64_t> seq) {
          EXPECT_TRUE(seq.ok()) << seq.status();
          absl::MutexLock lock(&mu);
          ++done;
        },
        how);
    ASSERT_TRUE(mail_->create_mailbox({.name = absl::StrCat("other", i % 8)}).ok());
  }
  absl::MutexLock lock(&mu);
  auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return done == kRounds; };
  EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all), kDeadline));
}

TEST_P(RetainedTest, M_RECV_5_AnErasedMessageNeverReplaysAgain) {
  create("tasks");
  const uint64_t done = publish("tasks", Priority::kUrgent, "done");
  publish("tasks", Priority::kUrgent, "open");
  ASSERT_TRUE(*mail_->erase("tasks", done));
  Inbox inbox;
  RetainedSubscription sub = subscribe("tasks", inbox);
  ASSERT_TRUE(inbox.wait_for(1));
  ASSERT_TRUE(mail_->wait_idle(kDeadline));
  EXPECT_EQ(inbox.bodies(), std::vector<std::string>{"open"});
}

TEST_P(RetainedTest, M_BOX_3_ExpiryRemovesTheMailboxAndTellsItsSubscribers) {
  create("short-lived", {.ttl = absl::Seconds(10)});
  publish("short-lived", Priority::kCritical, "m");
  absl::Mutex mu;
  std::vector<absl::Status> ends;
  Inbox inbox;
  RetainedSubscription sub = subscribe("short-lived", inbox, {.on_end = [&](const absl::Status& s) {
                                         absl::MutexLock lock(&mu);
                                         ends.push_back(s);
                                       }});
  ASSERT_TRUE(inbox.wait_for(1));
  clock_->advance(absl::Seconds(10));  // the expiry timer fires here
  {
    absl::MutexLock lock(&mu);
    auto told = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return !ends.empty(); };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&told), kDeadline));
    EXPECT_TRUE(IsMailboxNotFound(ends.front())) << ends.front();
  }
  EXPECT_TRUE(IsMailboxNotFound(mail_->publish("short-lived", Priority::kUrgent, "x").status()));
  EXPECT_TRUE(IsMailboxNotFound(shared_->count("short-lived").status()));
  EXPECT_TRUE(
      IsMailboxNotFound(mail_->subscribe("short-lived", [](const RetainedMessage&) {}).status()));
}

TEST_P(RetainedTest, M_BOX_4_WatchPublicGivesTheSnapshotThenLiveEventsNeverPrivateOnes) {
  create("before");
  std::vector<MailboxInfo> snapshot;
  absl::Mutex mu;
  std::vector<std::pair<MailboxEventKind, std::string>> events;
  absl::StatusOr<ListingWatch> watch = mail_->watch_public(&snapshot, [&](const MailboxEvent& e) {
    absl::MutexLock lock(&mu);
    events.emplace_back(e.kind, e.mailbox.id);
  });
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_EQ(snapshot.size(), 1u);
  EXPECT_EQ(snapshot.front().id, "before");
  create("after", {.ttl = absl::Seconds(5)});
  create("after", {.ttl = absl::Seconds(5)});  // existing: no second event
  ASSERT_TRUE(mail_->create_mailbox({.is_public = false}).ok());
  create("doomed");
  ASSERT_TRUE(mail_->remove("doomed").ok());
  clock_->advance(absl::Seconds(5));
  ASSERT_TRUE(mail_->wait_idle(kDeadline));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(events, (std::vector<std::pair<MailboxEventKind, std::string>>{
                        {MailboxEventKind::kCreated, "after"},
                        {MailboxEventKind::kCreated, "doomed"},
                        {MailboxEventKind::kRemoved, "doomed"},
                        {MailboxEventKind::kExpired, "after"}}));
}

TEST_P(RetainedTest, M_RECV_4_QueueGroupMembersCompeteEachMessageToExactlyOne) {
  create("jobs");
  std::vector<std::unique_ptr<Inbox>> workers;
  std::vector<RetainedSubscription> subs;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(std::make_unique<Inbox>());
    subs.push_back(subscribe("jobs", *workers.back(), {.queue_group = "workers"}));
  }
  Inbox watcher;  // not in the group: gets everything
  RetainedSubscription all = subscribe("jobs", watcher);
  std::set<uint64_t> published;
  for (int i = 0; i < 90; ++i) published.insert(publish("jobs", Priority::kUrgent, "j"));
  subs[1].unsubscribe();  // a member leaves; a new one joins
  workers.push_back(std::make_unique<Inbox>());
  subs.push_back(subscribe("jobs", *workers.back(), {.queue_group = "workers"}));
  for (int i = 0; i < 90; ++i) published.insert(publish("jobs", Priority::kNormal, "j"));
  ASSERT_TRUE(watcher.wait_for(180));
  ASSERT_TRUE(mail_->wait_idle(kDeadline));
  std::multiset<uint64_t> got;
  for (auto& w : workers) {
    for (uint64_t seq : w->seqs()) got.insert(seq);
  }
  EXPECT_EQ(got.size(), published.size()) << "every message to exactly one member";
  EXPECT_EQ(std::set<uint64_t>(got.begin(), got.end()), published);
  EXPECT_GT(workers[3]->size(), 0u) << "the member that joined late gets work";
}

TEST_P(RetainedTest, M_RECV_4_AGroupReplaysTheBacklogOncePerLifetime) {
  create("backlog");
  for (int i = 0; i < 5; ++i) publish("backlog", Priority::kUrgent, absl::StrCat(i));
  Inbox a;
  Inbox b;
  RetainedSubscription sa = subscribe("backlog", a, {.queue_group = "g"});
  ASSERT_TRUE(a.wait_for(5));
  RetainedSubscription sb = subscribe("backlog", b, {.queue_group = "g"});
  ASSERT_TRUE(mail_->wait_idle(kDeadline));
  EXPECT_EQ(b.size(), 0u) << "a member joining a live group does not replay";
}

TEST_P(RetainedTest, M_RECV_4_ASettledRecordIsNeverRedeliveredToItsGroupWhenItFormsAnew) {
  create("jobs");
  std::set<uint64_t> first;
  for (int i = 0; i < 5; ++i) first.insert(publish("jobs", Priority::kUrgent, absl::StrCat(i)));
  {
    Inbox a;
    RetainedSubscription sa = subscribe("jobs", a, {.queue_group = "g"});
    ASSERT_TRUE(a.wait_for(5));
    ASSERT_TRUE(mail_->wait_idle(kDeadline));
  }  // the group's last member left: the group ends
  std::set<uint64_t> later;
  for (int i = 0; i < 2; ++i) later.insert(publish("jobs", Priority::kNormal, "later"));
  Inbox again;
  RetainedSubscription sg = subscribe("jobs", again, {.queue_group = "g"});
  ASSERT_TRUE(again.wait_for(2));
  ASSERT_TRUE(mail_->wait_idle(kDeadline));
  std::vector<uint64_t> got = again.seqs();
  EXPECT_EQ(std::set<uint64_t>(got.begin(), got.end()), later)
      << "the group formed anew gets only what it never settled";
  EXPECT_EQ(got.size(), later.size());
  // Another group and a plain subscription each see every record once.
  Inbox other;
  Inbox plain;
  RetainedSubscription so = subscribe("jobs", other, {.queue_group = "h"});
  RetainedSubscription sp = subscribe("jobs", plain);
  ASSERT_TRUE(other.wait_for(7));
  ASSERT_TRUE(plain.wait_for(7));
  ASSERT_TRUE(mail_->wait_idle(kDeadline));
  EXPECT_EQ(other.size(), 7u);
  EXPECT_EQ(plain.size(), 7u);
  EXPECT_EQ(again.size(), 2u) << "settling in group h changes nothing for group g";
}

TEST_P(RetainedTest, M_RECV_4_APartialFailureRedeliversOnlyTheUnsettledRecords) {
  create("jobs");
  std::vector<uint64_t> seq;
  for (int i = 0; i < 6; ++i) seq.push_back(publish("jobs", Priority::kUrgent, absl::StrCat(i)));
  {
    // Handles the first, discards the second, fails the third retriably, terminates the fourth,
    // fails the last two retriably: settled are 1, 2 and 4.
    Inbox a;
    std::atomic<int> n{0};
    const std::vector<Disposition> outcome = {Disposition::kHandled,   Disposition::kDiscard,
                                              Disposition::kUnhandled, Disposition::kTerminate,
                                              Disposition::kUnhandled, Disposition::kUnhandled};
    absl::StatusOr<RetainedSubscription> sa = mail_->subscribe(
        "jobs", a.settling([&](const RetainedMessage&) { return outcome[n++]; }),
        {.queue_group = "g"});
    ASSERT_TRUE(sa.ok()) << sa.status();
    ASSERT_TRUE(a.wait_for(6));
    ASSERT_TRUE(mail_->wait_idle(kDeadline));
    EXPECT_EQ(a.size(), 6u) << "an unhandled record is not redelivered within the lifetime";
  }
  Inbox b;
  RetainedSubscription sb = subscribe("jobs", b, {.queue_group = "g"});
  ASSERT_TRUE(b.wait_for(3));
  ASSERT_TRUE(mail_->wait_idle(kDeadline));
  EXPECT_EQ(b.seqs(), (std::vector<uint64_t>{seq[2], seq[4], seq[5]}));
}

TEST_P(RetainedTest, M_RECV_4_AMemberFailingMidReplayLeavesTheRestToAnotherMemberUndoubled) {
  create("jobs");
  std::set<uint64_t> all;
  for (int i = 0; i < 20; ++i) all.insert(publish("jobs", Priority::kUrgent, absl::StrCat(i)));
  // The member forming the group handles three records, then fails on the fourth (its handler
  // ends its subscription and reports it unhandled, like a worker that crashed mid-batch).
  Inbox a;
  RetainedSubscription sa;
  absl::Notification a_ready;
  std::atomic<int> n{0};
  absl::StatusOr<RetainedSubscription> made = mail_->subscribe(
      "jobs", a.settling([&](const RetainedMessage&) {
        if (++n < 4) return Disposition::kHandled;
        a_ready.WaitForNotification();
        sa.unsubscribe();
        return Disposition::kUnhandled;
      }),
      {.queue_group = "g"});
  ASSERT_TRUE(made.ok()) << made.status();
  Inbox b;  // joins while the replay runs: takes the replay over when a fails
  RetainedSubscription sb = subscribe("jobs", b, {.queue_group = "g"});
  sa = *std::move(made);
  a_ready.Notify();
  ASSERT_TRUE(b.wait_for(16));
  ASSERT_TRUE(mail_->wait_idle(kDeadline));
  std::vector<uint64_t> got_a = a.seqs();
  std::vector<uint64_t> got_b = b.seqs();
  ASSERT_EQ(got_a.size(), 4u);
  std::multiset<uint64_t> got(got_a.begin(), got_a.end());
  got.insert(got_b.begin(), got_b.end());
  EXPECT_EQ(got.size(), 20u) << "no record handed to two members";
  EXPECT_EQ(std::set<uint64_t>(got.begin(), got.end()), all);
  sb.unsubscribe();
  // The group forms anew: only the record the failing member left unsettled comes back.
  Inbox c;
  RetainedSubscription sc = subscribe("jobs", c, {.queue_group = "g"});
  ASSERT_TRUE(c.wait_for(1));
  ASSERT_TRUE(mail_->wait_idle(kDeadline));
  EXPECT_EQ(c.seqs(), std::vector<uint64_t>{got_a.back()});
}

TEST_P(RetainedTest, M_RECV_4_SettlementSurvivesReopeningTheStore) {
  if (!shared_->persistent()) GTEST_SKIP() << "a " << shared_->kind() << " store keeps nothing";
  create("jobs");
  std::vector<uint64_t> seq;
  for (int i = 0; i < 4; ++i) seq.push_back(publish("jobs", Priority::kCritical, absl::StrCat(i)));
  {
    Inbox a;
    absl::StatusOr<RetainedSubscription> sa = mail_->subscribe(
        "jobs", a.settling([&](const RetainedMessage& m) {
          return m.seq == seq[1] ? Disposition::kUnhandled : Disposition::kHandled;
        }),
        {.queue_group = "g"});
    ASSERT_TRUE(sa.ok()) << sa.status();
    ASSERT_TRUE(a.wait_for(4));
    ASSERT_TRUE(mail_->wait_idle(kDeadline));
  }
  reopen_retained();
  Inbox b;
  RetainedSubscription sb = subscribe("jobs", b, {.queue_group = "g"});
  ASSERT_TRUE(b.wait_for(1));
  ASSERT_TRUE(mail_->wait_idle(kDeadline));
  EXPECT_EQ(b.seqs(), std::vector<uint64_t>{seq[1]});
  Inbox plain;  // a plain subscription still replays everything
  RetainedSubscription sp = subscribe("jobs", plain);
  ASSERT_TRUE(plain.wait_for(4));
}

TEST_P(RetainedTest, M_RECV_4_ABadQueueGroupNameIsRefusedAndJoinsNothing) {
  create("jobs");
  publish("jobs", Priority::kUrgent, "x");
  Inbox inbox;
  for (const std::string& bad :
       {std::string("g\0h", 3), std::string(kMaxQueueGroupBytes + 1, 'g')}) {
    absl::StatusOr<RetainedSubscription> s =
        mail_->subscribe("jobs", inbox.handler(), {.queue_group = bad});
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  }
  ASSERT_TRUE(mail_->wait_idle(kDeadline));
  EXPECT_EQ(inbox.size(), 0u);
}

TEST_P(RetainedTest, M_BOX_6_PublishPastABoundStoresAndPushesNothing) {
  create("tight", {.max_message_bytes = 3});
  Inbox inbox;
  RetainedSubscription sub = subscribe("tight", inbox);
  EXPECT_TRUE(IsBudgetExhausted(mail_->publish("tight", Priority::kUrgent, "four").status()));
  publish("tight", Priority::kUrgent, "abc");
  ASSERT_TRUE(inbox.wait_for(1));
  ASSERT_TRUE(mail_->wait_idle(kDeadline));
  EXPECT_EQ(inbox.bodies(), std::vector<std::string>{"abc"});
}

INSTANTIATE_TEST_SUITE_P(Stores, RetainedTest,
                         ::testing::Values(MemStore(), SqliteStore(Durability::kOs), NatsStore()),
                         StoreName);

}  // namespace
}  // namespace postal::mail::testing
