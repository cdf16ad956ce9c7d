// M-INBOX-3: claims with a lease and a token; the handler's writes commit with the completion
// or not at all; stale claims, deadlines and cancellation are refused at the commit; retries
// with backoff, then DEAD; unsupported events DEAD; ownership checked at startup.
#include "postal/mail/inbox_worker.h"

#include <functional>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "inbox_test_support.h"
#include "postal/mail/inbox_errors.h"

namespace postal::mail::testing {
namespace {

constexpr char kConsumer[] = "orders.projection.v1";

class InboxWorkerTest : public InboxTest {
 protected:
  void SetUp() override {
    InboxTest::SetUp();
    inbox_ = open_inbox();
    exec_sql(file(), "CREATE TABLE effect (message_id TEXT NOT NULL, who TEXT)");
  }
  std::filesystem::path file() const { return dir_ / "inbox.db"; }
  int64_t effects() const { return query_int(file(), "SELECT count(*) FROM effect"); }
  int64_t accept(const std::string& id) {
    absl::StatusOr<AcceptReceipt> r = inbox_->accept(message(id));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->id : 0;
  }
  InboxRecord record(int64_t id) { return inbox_->record(id)->value(); }

  // A worker whose handler writes one effect row tagged `who`, then runs `after` (if any).
  std::unique_ptr<InboxWorker> worker(
      std::string who, InboxWorkerOptions options = {},
      std::function<absl::Status(HandlerContext&)> after = nullptr) {
    std::vector<HandlerRegistration> handlers;
    handlers.push_back(
        {.consumer = kConsumer,
         .supports = {{"order.created", 1}},
         .handler = [who, after](std::string_view, HandlerContext& ctx) -> absl::Status {
           absl::Status s = ctx.tx.execute("INSERT INTO effect (message_id, who) VALUES (?, ?)",
                                           {ctx.record.message.message_id, who});
           if (!s.ok()) return s;
           return after ? after(ctx) : absl::OkStatus();
         }});
    absl::StatusOr<std::unique_ptr<InboxWorker>> w =
        InboxWorker::create(*inbox_, std::move(handlers), options);
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? *std::move(w) : nullptr;
  }

  std::unique_ptr<Inbox> inbox_;
};

TEST_F(InboxWorkerTest, M_INBOX_3_HandlerWritesCommitWithTheCompletion) {
  const int64_t id = accept("e-1");
  auto w = worker("a");
  absl::StatusOr<ProcessResult> r = w->run_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1);
  EXPECT_EQ(record(id).status, InboxStatus::kCompleted);
  EXPECT_EQ(record(id).attempts, 1);
  EXPECT_EQ(effects(), 1);
  // A redelivery is a duplicate that reports the outcome and is not processed again.
  EXPECT_EQ(inbox_->accept(message("e-1"))->status, InboxStatus::kCompleted);
  EXPECT_EQ(w->run_once()->completed, 0);
  EXPECT_EQ(effects(), 1);
}

// M-INBOX-3 with the worker's statement cache full: a handler whose SQL text differs on every
// call (values formatted into it) still writes in the record's transaction — past the cache's
// 64 texts each statement is prepared for its call — and a failed handler's writes still roll
// back, cached or not.
TEST_F(InboxWorkerTest, M_INBOX_3_HandlerWritesPastTheStatementCacheCommitAndRollBackAlike) {
  constexpr int kRecords = 100;  // more distinct texts than the cache keeps
  for (int i = 0; i < kRecords; ++i) accept(absl::StrCat("e-", i));
  std::vector<HandlerRegistration> handlers;
  handlers.push_back({.consumer = kConsumer,
                      .supports = {{"order.created", 1}},
                      .handler = [](std::string_view, HandlerContext& ctx) -> absl::Status {
                        const std::string& id = ctx.record.message.message_id;
                        absl::Status s = ctx.tx.execute(absl::StrCat(
                            "INSERT INTO effect (message_id, who) VALUES ('", id, "', 'x')"));
                        if (!s.ok()) return s;
                        // Every tenth fails after its write: the write must not survive.
                        return id.ends_with('7') ? absl::InternalError("after the write")
                                                 : absl::OkStatus();
                      }});
  auto w = InboxWorker::create(*inbox_, std::move(handlers), {.batch = kRecords});
  ASSERT_TRUE(w.ok()) << w.status();
  absl::StatusOr<ProcessResult> r = (*w)->run_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, kRecords - 10);
  EXPECT_EQ(r->retryable, 10);
  EXPECT_EQ(effects(), kRecords - 10);
  EXPECT_EQ(query_int(file(), "SELECT count(*) FROM effect WHERE message_id LIKE '%7'"), 0);
}

TEST_F(InboxWorkerTest, M_INBOX_3_FailedHandlerRollsBackItsWritesAndRetriesWithBackoff) {
  const int64_t id = accept("e-1");
  int calls = 0;
  auto w = worker("a", {.backoff_base = absl::Seconds(2)}, [&](HandlerContext&) {
    return ++calls == 1 ? absl::UnavailableError("database of record is busy") : absl::OkStatus();
  });
  EXPECT_EQ(w->run_once()->retryable, 1);
  EXPECT_EQ(effects(), 0);  // the insert rolled back with the failure
  EXPECT_EQ(record(id).status, InboxStatus::kRetryable);
  EXPECT_EQ(record(id).next_attempt_at, clock_->now() + absl::Seconds(2));
  EXPECT_EQ(w->run_once()->completed, 0);  // still backing off
  clock_->advance(absl::Seconds(2));
  EXPECT_EQ(w->run_once()->completed, 1);
  EXPECT_EQ(effects(), 1);
  EXPECT_EQ(record(id).attempts, 2);
}

TEST_F(InboxWorkerTest, M_INBOX_3_AttemptBudgetSpentGoesDeadAndOperatorRetryRevives) {
  const int64_t id = accept("e-1");
  bool fail = true;
  auto w = worker("a", {.max_attempts = 3, .backoff_base = absl::Seconds(1)}, [&](HandlerContext&) {
    return fail ? absl::InternalError("boom") : absl::OkStatus();
  });
  for (int attempt = 1; attempt <= 3; ++attempt) {
    ASSERT_NE(record(id).status, InboxStatus::kDead);
    absl::StatusOr<ProcessResult> r = w->run_once();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(attempt < 3 ? r->retryable : r->dead, 1) << "attempt " << attempt;
    clock_->advance(absl::Minutes(1));
  }
  EXPECT_EQ(record(id).status, InboxStatus::kDead);
  EXPECT_EQ(record(id).last_error, "boom");
  EXPECT_EQ(w->run_once()->completed, 0);
  EXPECT_EQ(effects(), 0);
  EXPECT_EQ(inbox_->accept(message("e-1"))->status, InboxStatus::kDead);
  ASSERT_EQ(*inbox_->retry_dead(kConsumer), 1);
  EXPECT_EQ(record(id).attempts, 0);
  fail = false;
  EXPECT_EQ(w->run_once()->completed, 1);
  EXPECT_EQ(effects(), 1);
}

TEST_F(InboxWorkerTest, M_INBOX_3_PermanentErrorGoesDeadAtOnce) {
  const int64_t id = accept("e-1");
  auto w = worker("a", {}, [](HandlerContext&) { return InboxPermanentError("not a tenant"); });
  EXPECT_EQ(w->run_once()->dead, 1);
  EXPECT_EQ(record(id).status, InboxStatus::kDead);
  EXPECT_EQ(record(id).attempts, 1);
  EXPECT_EQ(effects(), 0);
}

TEST_F(InboxWorkerTest, M_INBOX_3_UnsupportedEventTypeOrSchemaGoesDeadWithoutTheHandler) {
  InboxMessage v2 = message("e-1");
  v2.schema_version = 2;
  InboxMessage other = message("e-2");
  other.event_type = "order.shipped";
  const int64_t a = inbox_->accept(v2)->id;
  const int64_t b = inbox_->accept(other)->id;
  auto w = worker("a");
  absl::StatusOr<ProcessResult> r = w->run_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dead, 2);
  EXPECT_EQ(effects(), 0);  // the handler never ran
  EXPECT_EQ(record(a).status, InboxStatus::kDead);
  EXPECT_NE(record(a).last_error.find("schema version 2"), std::string::npos);
  EXPECT_EQ(record(b).status, InboxStatus::kDead);
}

TEST_F(InboxWorkerTest, M_INBOX_3_StaleClaimAfterTakeoverCannotCommitAndRollsBack) {
  const int64_t id = accept("e-1");
  auto a = worker("a", {.lease = absl::Seconds(10)});
  auto b = worker("b", {.lease = absl::Seconds(10)});
  absl::StatusOr<std::vector<InboxClaim>> claimed = a->claim();
  ASSERT_TRUE(claimed.ok() && claimed->size() == 1);
  clock_->advance(absl::Seconds(11));  // a's lease ends: b takes the record over
  absl::StatusOr<ProcessResult> by_b = b->run_once();
  ASSERT_TRUE(by_b.ok()) << by_b.status();
  EXPECT_EQ(by_b->completed, 1);
  absl::StatusOr<ProcessResult> by_a = a->process(*std::move(claimed));
  ASSERT_TRUE(by_a.ok()) << by_a.status();
  EXPECT_EQ(by_a->stale, 1);
  EXPECT_EQ(by_a->completed, 0);
  EXPECT_EQ(effects(), 1);  // b's write only: a's rolled back with its refused completion
  EXPECT_EQ(query_int(file(), "SELECT count(*) FROM effect WHERE who = 'a'"), 0);
  EXPECT_EQ(record(id).status, InboxStatus::kCompleted);
  EXPECT_EQ(record(id).attempts, 2);
}

TEST_F(InboxWorkerTest, M_INBOX_3_LeaseEndingInsideTheHandlerRefusesTheCommit) {
  const int64_t id = accept("e-1");
  bool slow = true;
  auto w = worker("a", {.lease = absl::Seconds(10), .handler_timeout = absl::Minutes(1)},
                  [&](HandlerContext&) {
                    if (slow) clock_->advance(absl::Seconds(11));
                    return absl::OkStatus();
                  });
  absl::StatusOr<ProcessResult> r = w->run_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stale, 1);
  EXPECT_EQ(effects(), 0);
  EXPECT_EQ(record(id).status, InboxStatus::kProcessing);  // the lease brings it back
  slow = false;
  EXPECT_EQ(w->run_once()->completed, 1);
  EXPECT_EQ(effects(), 1);
}

TEST_F(InboxWorkerTest, M_INBOX_3_HandlerPastItsDeadlineHasItsCommitRefused) {
  const int64_t id = accept("e-1");
  auto w = worker("a", {.handler_timeout = absl::Seconds(1)}, [&](HandlerContext& ctx) {
    EXPECT_EQ(ctx.deadline, clock_->now() + absl::Seconds(1));
    clock_->advance(absl::Seconds(2));  // a handler that ran too long
    return absl::OkStatus();
  });
  EXPECT_EQ(w->run_once()->retryable, 1);
  EXPECT_EQ(effects(), 0);
  EXPECT_EQ(record(id).status, InboxStatus::kRetryable);
  EXPECT_NE(record(id).last_error.find("deadline"), std::string::npos);
}

TEST_F(InboxWorkerTest, M_INBOX_3_CancellationRollsBackAndStopsTheBatch) {
  const int64_t first = accept("e-1");
  const int64_t second = accept("e-2");
  InboxWorker* self = nullptr;
  auto w = worker("a", {}, [&](HandlerContext& ctx) {
    self->cancel();
    EXPECT_TRUE(ctx.cancelled());
    return absl::OkStatus();  // ignores the signal: the commit is refused anyway
  });
  self = w.get();
  absl::StatusOr<ProcessResult> r = w->run_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cancelled, 2);
  EXPECT_EQ(r->completed, 0);
  EXPECT_EQ(effects(), 0);
  EXPECT_EQ(record(first).status, InboxStatus::kRetryable);    // rolled back, ready again
  EXPECT_EQ(record(second).status, InboxStatus::kProcessing);  // never started: lease returns it
}

TEST_F(InboxWorkerTest, M_INBOX_3_ASavepointPerRecordKeepsABatchsRecordsApart) {
  const int64_t bad = accept("e-bad");
  const int64_t good = accept("e-good");
  auto w = worker("a", {}, [](HandlerContext& ctx) {
    return ctx.record.message.message_id == "e-bad" ? absl::InternalError("no") : absl::OkStatus();
  });
  absl::StatusOr<ProcessResult> r = w->run_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1);
  EXPECT_EQ(r->retryable, 1);
  EXPECT_EQ(query_int(file(), "SELECT count(*) FROM effect WHERE message_id = 'e-good'"), 1);
  EXPECT_EQ(query_int(file(), "SELECT count(*) FROM effect WHERE message_id = 'e-bad'"), 0);
  EXPECT_EQ(record(bad).status, InboxStatus::kRetryable);
  EXPECT_EQ(record(good).status, InboxStatus::kCompleted);
}

TEST_F(InboxWorkerTest, M_INBOX_3_LeaseExpiredWithBudgetSpentGoesDeadOnClaim) {
  const int64_t id = accept("e-1");
  auto w = worker("a", {.lease = absl::Seconds(5), .max_attempts = 1});
  ASSERT_EQ(w->claim()->size(), 1u);  // and the worker "dies": no process()
  clock_->advance(absl::Seconds(6));
  EXPECT_TRUE(w->claim()->empty());
  EXPECT_EQ(record(id).status, InboxStatus::kDead);
}

TEST_F(InboxWorkerTest, M_INBOX_3_HandlerEndingTheTransactionFailsTheBatch) {
  accept("e-1");
  auto w = worker("a", {}, [](HandlerContext& ctx) { return ctx.tx.execute("COMMIT"); });
  absl::StatusOr<ProcessResult> r = w->run_once();
  EXPECT_FALSE(r.ok());
}

TEST_F(InboxWorkerTest, M_INBOX_3_OwnershipIsCheckedAtStartup) {
  auto noop = [](std::string_view, HandlerContext&) { return absl::OkStatus(); };
  std::vector<HandlerRegistration> twice;
  twice.push_back({.consumer = "a", .supports = {}, .handler = noop});
  twice.push_back({.consumer = "a", .supports = {}, .handler = noop});
  absl::StatusOr<std::unique_ptr<InboxWorker>> dup = InboxWorker::create(*inbox_, std::move(twice));
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(std::string(dup.status().message()).find("two handlers"), std::string::npos);

  std::vector<HandlerRegistration> one;
  one.push_back({.consumer = "a", .supports = {}, .handler = noop});
  absl::StatusOr<std::unique_ptr<InboxWorker>> missing =
      InboxWorker::create(*inbox_, std::move(one), {.consumers = {"a", "b"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message())
                .find("'b' is owned by this worker but has no handler"),
            std::string::npos);
}

TEST_F(InboxWorkerTest, M_INBOX_3_AWorkerClaimsOnlyTheConsumersItOwns) {
  ASSERT_TRUE(inbox_->accept(message("e-1", "{}", "other.consumer")).ok());
  const int64_t mine = accept("e-2");
  auto noop = [](std::string_view, HandlerContext&) { return absl::OkStatus(); };
  std::vector<HandlerRegistration> handlers;
  handlers.push_back({.consumer = kConsumer, .supports = {{"order.created", 1}}, .handler = noop});
  handlers.push_back({.consumer = "other.consumer", .supports = {}, .handler = noop});
  auto w = InboxWorker::create(*inbox_, std::move(handlers), {.consumers = {kConsumer}});
  ASSERT_TRUE(w.ok()) << w.status();
  absl::StatusOr<std::vector<InboxClaim>> c = (*w)->claim();
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->size(), 1u);
  EXPECT_EQ(c->front().record.id, mine);
}

}  // namespace
}  // namespace postal::mail::testing

namespace postal::mail::testing {
namespace {

// M-INBOX-3 claim order: a due retry is taken before PENDING work that arrived after it was
// first claimed, and with several consumers each claim starts with the next one, so a busy
// consumer does not starve another.
TEST_F(InboxWorkerTest, M_INBOX_3_ADueRetryIsClaimedBeforeNewWorkAndConsumersTakeTurns) {
  const int64_t failing = accept("first");
  bool fail = true;
  auto w = worker("a", {.batch = 1, .backoff_base = absl::Seconds(1)}, [&](HandlerContext&) {
    return fail ? absl::InternalError("once") : absl::OkStatus();
  });
  ASSERT_EQ(w->run_once()->retryable, 1);
  accept("second");
  clock_->advance(absl::Seconds(2));  // the retry is due
  fail = false;
  std::vector<InboxClaim> c = *w->claim();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].record.id, failing);
  ASSERT_EQ(w->process(std::move(c))->completed, 1);

  auto inbox = Inbox::open(dir_ / "two.db", {.clock = clock_, .consumers = {"x", "y"}});
  ASSERT_TRUE(inbox.ok()) << inbox.status();
  int n = 0;
  for (const char* consumer : {"x", "x", "x", "y"}) {
    ASSERT_TRUE((*inbox)->accept(message(absl::StrCat("m", n++), "{}", consumer)).ok());
  }
  std::vector<HandlerRegistration> hs;
  for (const char* consumer : {"x", "y"}) {
    hs.push_back({.consumer = consumer,
                  .supports = {{"order.created", 1}},
                  .handler = [](std::string_view, HandlerContext&) { return absl::OkStatus(); }});
  }
  auto two = InboxWorker::create(**inbox, std::move(hs), {.batch = 1});
  ASSERT_TRUE(two.ok()) << two.status();
  std::vector<std::string> order;
  for (int i = 0; i < 2; ++i) {
    std::vector<InboxClaim> got = *(*two)->claim();
    ASSERT_EQ(got.size(), 1u);
    order.push_back(got[0].record.message.consumer);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"x", "y"}));  // y's one record is not behind x's
}

}  // namespace
}  // namespace postal::mail::testing
