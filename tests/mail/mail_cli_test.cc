// `postal mail create|post|list|subscribe|delete` against a running topology whose MailboxHost
// serves a SQLite store: the real binary, as a subprocess (M-KIND-2, M-BOX-1, M-BOX-4).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "support/postal_process.h"

namespace postal::test_support {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class MailCli : public ScratchDirTest {
 protected:
  Outcome mail(std::vector<std::string> args) {
    args.insert(args.begin(), "mail");
    args.push_back("--topology");
    args.push_back(name_);
    return run_postal(args, dir_ / "out.txt", seconds(30));
  }
  const std::string name_ = "mail-cli-" + std::to_string(::getpid());
};

TEST_F(MailCli, M_KIND_2_CreatePostListSubscribeAndDeleteARetainedMailbox) {
  const fs::path file = dir_ / "t.toml";
  std::ofstream(file) << "[topology]\nname = \"" << name_ << "\"\non_proc_exit = \"ignore\"\n"
                      << "[[proc]]\nname = \"mail\"\nlisten = \"ipc://@" << name_ << "-mail\"\n"
                      << "workers = 1\n"
                      << "[[actor]]\nproc = \"mail\"\nname = \"mailbox-host\"\n"
                      << "type = \"postal.MailboxHost\"\n"
                      << "params = { store = \"" << (dir_ / "mail.db").string()
                      << "\", durability = \"disk\" }\n";
  BackgroundPostal up({"up", file.string()}, dir_ / "up.txt");
  ASSERT_TRUE(up.wait_for_output("is up", seconds(30))) << up.output();

  const std::string box = "post:tasks@agents.test/queue";
  Outcome created = mail({"create", box, "--ttl", "3600"});
  ASSERT_EQ(created.exit_status, 0) << created.output;
  EXPECT_NE(created.output.find("created " + box), std::string::npos) << created.output;
  Outcome again = mail({"create", box, "--ttl", "60"});
  EXPECT_NE(again.output.find("existing " + box), std::string::npos) << again.output;

  ASSERT_EQ(mail({"post", box, "--data", "first", "--priority", "normal"}).exit_status, 0);
  ASSERT_EQ(mail({"post", box, "--data", "second", "--priority", "urgent"}).exit_status, 0);
  Outcome bad = mail({"post", box, "--data", "x", "--priority", "highest"});
  EXPECT_EQ(bad.exit_status, 1) << bad.output;

  Outcome listed = mail({"list"});
  ASSERT_EQ(listed.exit_status, 0) << listed.output;
  EXPECT_NE(listed.output.find("post://tasks@agents.test/queue"), std::string::npos)
      << listed.output;

  // The replay: urgent before normal (M-PRIO-1), then --count ends it.
  Outcome tail = mail({"subscribe", box, "--count", "2"});
  ASSERT_EQ(tail.exit_status, 0) << tail.output;
  const size_t urgent = tail.output.find("second");
  const size_t normal = tail.output.find("first");
  ASSERT_NE(urgent, std::string::npos) << tail.output;
  ASSERT_NE(normal, std::string::npos) << tail.output;
  EXPECT_LT(urgent, normal) << tail.output;
  EXPECT_NE(tail.output.find("mbx-seq"), std::string::npos) << tail.output;
  // --deliver last: only the one stored last ("second"), M-KIND-3.
  Outcome last = mail({"subscribe", box, "--deliver", "last", "--count", "1"});
  ASSERT_EQ(last.exit_status, 0) << last.output;
  EXPECT_NE(last.output.find("second"), std::string::npos) << last.output;
  EXPECT_EQ(last.output.find("first"), std::string::npos) << last.output;
  EXPECT_NE(mail({"subscribe", box, "--deliver", "oldest"}).exit_status, 0);

  // A private mailbox (M-BOX-4): the printed address is the only way to reach it.
  Outcome secret = mail({"create", "--private", "--ttl", "60"});
  ASSERT_EQ(secret.exit_status, 0) << secret.output;
  const size_t at = secret.output.find("post://");
  ASSERT_NE(at, std::string::npos) << secret.output;
  const std::string secret_box = secret.output.substr(at, secret.output.find('\n', at) - at);
  EXPECT_NE(secret_box.find("@private"), std::string::npos) << secret_box;
  EXPECT_EQ(mail({"post", secret_box, "--data", "hush", "--priority", "urgent"}).exit_status, 0);
  EXPECT_EQ(mail({"list"}).output.find("@private"), std::string::npos) << "never listed";
  EXPECT_NE(mail({"create", box, "--private"}).exit_status, 0) << "an address with --private";

  // Batches from a queue mailbox (M-RECV-6, M-ACK-6): three back unhandled, then taken.
  const std::string queue = "post:jobs@agents.test/q";
  for (const char* d : {"j1", "j2", "j3"}) ASSERT_EQ(mail({"post", queue, "--data", d}).exit_status, 0);
  Outcome peeked = mail({"fetch", queue, "--batch", "5", "--ack", "unhandled"});
  ASSERT_EQ(peeked.exit_status, 0) << peeked.output;
  EXPECT_NE(peeked.output.find("j3"), std::string::npos) << peeked.output;
  Outcome taken = mail({"fetch", queue, "--batch", "5"});
  ASSERT_EQ(taken.exit_status, 0) << taken.output;
  EXPECT_LT(taken.output.find("j1"), taken.output.find("j3")) << taken.output;
  Outcome empty_wait = mail({"fetch", queue, "--wait", "1"});
  EXPECT_NE(empty_wait.output.find("no message queued"), std::string::npos) << empty_wait.output;

  Outcome deleted = mail({"delete", box});
  EXPECT_EQ(deleted.exit_status, 0) << deleted.output;
  Outcome empty = mail({"list"});
  EXPECT_EQ(empty.output.find("post://tasks"), std::string::npos) << empty.output;
}

}  // namespace
}  // namespace postal::test_support
