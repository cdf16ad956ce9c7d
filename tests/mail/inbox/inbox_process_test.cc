// M-INBOX-1 with real processes (inbox_child): concurrent accepts of one set of identities from
// two processes on one file.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "inbox_test_support.h"
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

}  // namespace
}  // namespace postal::mail::testing
