// `postal mq9` as a real process, used by real NATS clients: the example `mq9_client` (libnats
// only, no postal headers) and, for the restart, libnats from this test. Rules: M-KIND-2,
// M-PRIO-1, M-BOX-4 (through the example), M-PRIO-2 (critical and urgent survive a kill -9 of
// the bridge on a SQLite store; normal does not; on a NATS store every message survives a kill -9
// of the bridge and of nats-server).
#include <nats/nats.h>
#include <signal.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "support/child_process.h"
#include "support/nats_server.h"

namespace postal {
namespace {

using test_support::ChildProcess;
using test_support::log_lines;
using test_support::wait_log_lines;

constexpr std::string_view kServing = "mq9 bridge serving ";

class Mq9CommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("mq9_command_test_", ::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Starts `postal mq9` on a free port; its nats:// url (empty if it did not come up).
  std::string start_bridge(std::unique_ptr<ChildProcess>& bridge, const std::string& log_name,
                           std::vector<std::string> extra = {}) {
    const auto log = dir_ / log_name;
    std::vector<std::string> args = {"mq9", "--listen", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    bridge = std::make_unique<ChildProcess>(POSTAL_BINARY, args, log);
    if (!wait_log_lines(log, std::string(kServing), 1, absl::Seconds(20))) return "";
    for (const std::string& line : log_lines(log)) {
      if (line.rfind(kServing, 0) == 0) {
        std::string rest = line.substr(kServing.size());
        return rest.substr(0, rest.find(' '));
      }
    }
    return "";
  }

  std::filesystem::path dir_;
};

TEST_F(Mq9CommandTest, AStockLibnatsClientCreatesPostsAndReceivesTheReplayInPriorityOrder) {
  std::unique_ptr<ChildProcess> bridge;
  const std::string url = start_bridge(bridge, "bridge.log");
  ASSERT_FALSE(url.empty()) << "postal mq9 did not print its url";
  ChildProcess client(MQ9_CLIENT, {url}, dir_ / "client.log");
  const int rc = client.wait_exit(std::chrono::seconds(60));
  std::string out;
  for (const std::string& l : log_lines(dir_ / "client.log")) out += l + "\n";
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("mq9_client: ok"), std::string::npos) << out;
}

// One libnats request; the reply body ("" on a timeout).
std::string request(natsConnection* nc, const std::string& subject, const std::string& body) {
  natsMsg* reply = nullptr;
  if (natsConnection_Request(&reply, nc, subject.c_str(), body.data(),
                             static_cast<int>(body.size()), 5000) != NATS_OK) {
    return "";
  }
  std::string out(natsMsg_GetData(reply), natsMsg_GetDataLength(reply));
  natsMsg_Destroy(reply);
  return out;
}

TEST_F(Mq9CommandTest, M_PRIO_2_CriticalAndUrgentSurviveAKillOfTheBridgeNormalDoesNot) {
  const std::string store = (dir_ / "mq9.db").string();
  std::unique_ptr<ChildProcess> bridge;
  std::string url = start_bridge(bridge, "first.log", {"--store", store});
  ASSERT_FALSE(url.empty());
  natsConnection* nc = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, url.c_str()), NATS_OK);
  ASSERT_NE(request(nc, "$mq9.AI.MAILBOX.CREATE", R"({"public":true,"name":"alerts","ttl":600})"),
            "");
  const std::string base = "$mq9.AI.MAILBOX.MSG.alerts";
  ASSERT_NE(request(nc, base, "normal").find("msg_id"), std::string::npos);
  ASSERT_NE(request(nc, base + ".urgent", "urgent").find("msg_id"), std::string::npos);
  ASSERT_NE(request(nc, base + ".critical", "critical").find("msg_id"), std::string::npos);
  natsConnection_Destroy(nc);
  bridge->kill();  // kill -9: the acknowledged durable messages are in the file

  url = start_bridge(bridge, "second.log", {"--store", store});
  ASSERT_FALSE(url.empty());
  ASSERT_EQ(natsConnection_ConnectTo(&nc, url.c_str()), NATS_OK);
  natsSubscription* sub = nullptr;
  ASSERT_EQ(natsConnection_SubscribeSync(&sub, nc, (base + ".*").c_str()), NATS_OK);
  std::vector<std::string> got;
  for (natsMsg* m = nullptr; natsSubscription_NextMsg(&m, sub, 1000) == NATS_OK;) {
    got.emplace_back(natsMsg_GetData(m), natsMsg_GetDataLength(m));
    natsMsg_Destroy(m);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"critical", "urgent"}));
  natsSubscription_Destroy(sub);
  natsConnection_Destroy(nc);
  bridge->kill();
}

TEST_F(Mq9CommandTest, TheExampleClientRunsOnAJetStreamStore) {
  ASSERT_FALSE(test_support::NatsServer::binary().empty()) << test_support::NatsServer::kMissing;
  test_support::NatsServer nats(dir_ / "nats");
  ASSERT_TRUE(nats.ready()) << nats.log();
  std::unique_ptr<ChildProcess> bridge;
  const std::string url = start_bridge(bridge, "bridge.log", {"--store", nats.url()});
  ASSERT_FALSE(url.empty()) << "postal mq9 did not come up on the NATS store";
  ChildProcess client(MQ9_CLIENT, {url}, dir_ / "client.log");
  const int rc = client.wait_exit(std::chrono::seconds(60));
  std::string out;
  for (const std::string& l : log_lines(dir_ / "client.log")) out += l + "\n";
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("mq9_client: ok"), std::string::npos) << out;
}

// The NATS store keeps every priority in its file stream (nats_mail_store.h): all three come back
// after both the bridge and the server were killed.
TEST_F(Mq9CommandTest, M_PRIO_2_OnAJetStreamStoreEveryMessageSurvivesAKillOfBridgeAndServer) {
  ASSERT_FALSE(test_support::NatsServer::binary().empty()) << test_support::NatsServer::kMissing;
  test_support::NatsServer nats(dir_ / "nats");
  ASSERT_TRUE(nats.ready()) << nats.log();
  const std::vector<std::string> store = {"--store", nats.url(), "--nats-prefix", "MQ9"};
  std::unique_ptr<ChildProcess> bridge;
  std::string url = start_bridge(bridge, "first.log", store);
  ASSERT_FALSE(url.empty());
  natsConnection* nc = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, url.c_str()), NATS_OK);
  ASSERT_NE(request(nc, "$mq9.AI.MAILBOX.CREATE", R"({"public":true,"name":"alerts","ttl":600})"),
            "");
  const std::string base = "$mq9.AI.MAILBOX.MSG.alerts";
  ASSERT_NE(request(nc, base, "normal").find("msg_id"), std::string::npos);
  ASSERT_NE(request(nc, base + ".urgent", "urgent").find("msg_id"), std::string::npos);
  ASSERT_NE(request(nc, base + ".critical", "critical").find("msg_id"), std::string::npos);
  natsConnection_Destroy(nc);
  bridge->kill();
  ASSERT_TRUE(nats.restart()) << nats.log();

  url = start_bridge(bridge, "second.log", store);
  ASSERT_FALSE(url.empty());
  ASSERT_EQ(natsConnection_ConnectTo(&nc, url.c_str()), NATS_OK);
  natsSubscription* sub = nullptr;
  ASSERT_EQ(natsConnection_SubscribeSync(&sub, nc, (base + ".*").c_str()), NATS_OK);
  std::vector<std::string> got;
  for (natsMsg* m = nullptr;
       got.size() < 3 && natsSubscription_NextMsg(&m, sub, 10000) == NATS_OK;) {
    got.emplace_back(natsMsg_GetData(m), natsMsg_GetDataLength(m));
    natsMsg_Destroy(m);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"critical", "urgent", "normal"}));
  natsSubscription_Destroy(sub);
  natsConnection_Destroy(nc);
  bridge->kill();
}

}  // namespace
}  // namespace postal
