// `postal inbox status|retry FILE`, the real binary as a subprocess: counts by consumer and
// status, the oldest pending record, JSON, and DEAD records moved back (M-INBOX-3).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "inbox_test_support.h"
#include "support/postal_process.h"

namespace postal::mail::testing {
namespace {

using std::chrono::seconds;
using test_support::Outcome;
using test_support::run_postal;

class InboxCli : public InboxTest {
 protected:
  Outcome inbox(std::vector<std::string> args) {
    args.insert(args.begin(), "inbox");
    return run_postal(args, dir_ / "out.txt", seconds(30));
  }
};

TEST_F(InboxCli, M_INBOX_3_StatusCountsAndRetryMovesDeadBack) {
  const std::filesystem::path file = dir_ / "inbox.db";
  {
    auto in = Inbox::open(file);  // system time: the CLI measures the age against it
    ASSERT_TRUE(in.ok()) << in.status();
    ASSERT_TRUE((*in)->accept(message("e-1")).ok());
    ASSERT_TRUE((*in)->accept(message("e-2")).ok());
    ASSERT_TRUE((*in)->accept(message("e-3", "{}", "audit.v1")).ok());
  }
  exec_sql(file, "UPDATE inbox SET status = 'DEAD' WHERE message_id = 'e-2'");

  Outcome text = inbox({"status", file.string()});
  ASSERT_EQ(text.exit_status, 0) << text.output;
  EXPECT_NE(text.output.find("orders.projection.v1"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("oldest pending: "), std::string::npos) << text.output;

  Outcome json = inbox({"status", file.string(), "--json"});
  ASSERT_EQ(json.exit_status, 0) << json.output;
  nlohmann::json j = nlohmann::json::parse(json.output);
  EXPECT_EQ(j["consumers"]["orders.projection.v1"]["PENDING"], 1);
  EXPECT_EQ(j["consumers"]["orders.projection.v1"]["DEAD"], 1);
  EXPECT_EQ(j["consumers"]["audit.v1"]["PENDING"], 1);
  EXPECT_GE(j["oldest_pending_age_ms"].get<int64_t>(), 0);

  Outcome retry = inbox({"retry", file.string(), "--consumer", "orders.projection.v1"});
  ASSERT_EQ(retry.exit_status, 0) << retry.output;
  EXPECT_NE(retry.output.find("moved 1 DEAD record back"), std::string::npos) << retry.output;
  EXPECT_EQ(query_int(file, "SELECT count(*) FROM inbox WHERE status = 'PENDING'"), 3);

  Outcome missing = inbox({"status", (dir_ / "nope.db").string()});
  EXPECT_EQ(missing.exit_status, 1) << missing.output;
  EXPECT_NE(missing.output.find("no inbox at"), std::string::npos) << missing.output;
}

}  // namespace
}  // namespace postal::mail::testing
