// M-INBOX-1 and M-INBOX-3 with real processes (inbox_child): concurrent accepts of one set of
// identities from two processes on one file, and a worker killed with kill -9 inside its
// handler's transaction.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "inbox_test_support.h"
#include "postal/mail/inbox_worker.h"
#include "support/child_process.h"

namespace postal::mail::testing {
namespace {

using test_support::ChildProcess;
using test_support::log_lines;

TEST_F(InboxTest, M_INBOX_1_ConcurrentAcceptsFromTwoProcessesYieldOneAcceptedPerIdentity) {
  const std::filesystem::path file = dir_ / "inbox.db";
  ASSERT_TRUE(Inbox::open(file).ok());  // both children start on an existing inbox
  constexpr int kIds = 500;
  ChildProcess a(INBOX_CHILD, {"accept", file.string(), "m", std::to_string(kIds)}, dir_ / "a.log");
  ChildProcess b(INBOX_CHILD, {"accept", file.string(), "m", std::to_string(kIds)}, dir_ / "b.log");
  ASSERT_EQ(a.wait_exit(std::chrono::seconds(60)), 0) << log_lines(dir_ / "a.log").back();
  ASSERT_EQ(b.wait_exit(std::chrono::seconds(60)), 0) << log_lines(dir_ / "b.log").back();
  std::map<std::string, int> accepted;
  size_t answers = 0;
  for (const char* log : {"a.log", "b.log"}) {
    for (const std::string& l : log_lines(dir_ / log)) {
      if (l.rfind("accepted ", 0) == 0) ++accepted[l.substr(9)];
      if (l.rfind("accepted ", 0) == 0 || l.rfind("duplicate ", 0) == 0) ++answers;
    }
  }
  EXPECT_EQ(answers, size_t{2 * kIds});
  EXPECT_EQ(accepted.size(), size_t{kIds});
  for (const auto& [id, n] : accepted) EXPECT_EQ(n, 1) << id << " was accepted " << n << " times";
  EXPECT_EQ(query_int(file, "SELECT count(*) FROM inbox"), kIds);
}

TEST_F(InboxTest, M_INBOX_3_WorkerKilledInsideItsHandlerLeavesNeitherWritesNorCompletion) {
  const std::filesystem::path file = dir_ / "inbox.db";
  int64_t id = 0;
  {
    auto inbox = open_inbox({.durability = Durability::kDisk});
    exec_sql(file, "CREATE TABLE effect (message_id TEXT NOT NULL)");
    InboxMessage m = message("m-1", "{}", "c");
    m.scope = InboxScope::global();
    m.source = "s";
    m.event_type = "t";
    id = inbox->accept(m)->id;
  }
  {
    ChildProcess worker(INBOX_CHILD, {"work", file.string()}, dir_ / "work.log");
    ASSERT_TRUE(test_support::wait_log_lines(dir_ / "work.log", "in-handler m-1", 1))
        << "the worker never reached its handler";
    worker.kill();  // kill -9 with the handler's insert done and the transaction open
  }
  EXPECT_EQ(query_int(file, "SELECT count(*) FROM effect"), 0);
  // The claim committed (PROCESSING, one attempt); nothing of the handler's transaction did.
  EXPECT_EQ(query_int(file, "SELECT count(*) FROM inbox WHERE status = 'PROCESSING'"), 1);
  EXPECT_EQ(query_int(file, "SELECT attempts FROM inbox"), 1);

  // After the lease, another worker completes it: one committed effect.
  clock_ = std::make_shared<ManualClock>(absl::Now() + absl::Hours(1));
  auto inbox = open_inbox();
  std::vector<HandlerRegistration> handlers;
  handlers.push_back({.consumer = "c",
                      .supports = {{"t", 1}},
                      .handler = [](std::string_view, HandlerContext& ctx) {
                        return ctx.tx.execute("INSERT INTO effect (message_id) VALUES (?)",
                                              {ctx.record.message.message_id});
                      }});
  auto worker = InboxWorker::create(*inbox, std::move(handlers));
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::StatusOr<ProcessResult> r = (*worker)->run_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1);
  EXPECT_EQ(query_int(file, "SELECT count(*) FROM effect"), 1);
  EXPECT_EQ(inbox->record(id)->value().status, InboxStatus::kCompleted);
  EXPECT_EQ(inbox->record(id)->value().attempts, 2);
}

}  // namespace
}  // namespace postal::mail::testing
