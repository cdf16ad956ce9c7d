// `postal mail create|post|list|subscribe|delete` against a running topology whose MailboxHost
// serves a SQLite store: the real binary, as a subprocess (M-KIND-2, M-BOX-1, M-BOX-4).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/nats_server.h"
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

// M-RECV-4 across real processes: `subscribe --group` settles what it printed for the group in
// the host's store; the next member of the group gets only the rest, a plain subscription all.
TEST_F(MailCli, M_RECV_4_SubscribeWithAGroupSettlesWhatItPrintedForTheGroup) {
  const fs::path file = dir_ / "t.toml";
  std::ofstream(file) << "[topology]\nname = \"" << name_ << "\"\non_proc_exit = \"ignore\"\n"
                      << "[[proc]]\nname = \"mail\"\nlisten = \"ipc://@" << name_ << "-mail\"\n"
                      << "workers = 1\n"
                      << "[[actor]]\nproc = \"mail\"\nname = \"mailbox-host\"\n"
                      << "type = \"postal.MailboxHost\"\n"
                      << "params = { store = \"" << (dir_ / "mail.db").string() << "\" }\n";
  BackgroundPostal up({"up", file.string()}, dir_ / "up.txt");
  ASSERT_TRUE(up.wait_for_output("is up", seconds(30))) << up.output();
  const std::string box = "post:jobs@agents.test/queue";
  ASSERT_EQ(mail({"create", box}).exit_status, 0);
  for (const char* d : {"job-a", "job-b", "job-c"}) {
    ASSERT_EQ(mail({"post", box, "--data", d, "--priority", "urgent"}).exit_status, 0);
  }
  Outcome first = mail({"subscribe", box, "--group", "workers", "--count", "2"});
  ASSERT_EQ(first.exit_status, 0) << first.output;
  EXPECT_NE(first.output.find("job-a"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("job-b"), std::string::npos) << first.output;
  EXPECT_EQ(first.output.find("job-c"), std::string::npos) << first.output;
  Outcome second = mail({"subscribe", box, "--group", "workers", "--count", "1"});
  ASSERT_EQ(second.exit_status, 0) << second.output;
  EXPECT_NE(second.output.find("job-c"), std::string::npos) << second.output;
  EXPECT_EQ(second.output.find("job-a"), std::string::npos) << "settled for the group";
  Outcome plain = mail({"subscribe", box, "--count", "3"});
  ASSERT_EQ(plain.exit_status, 0) << plain.output;
  EXPECT_NE(plain.output.find("job-a"), std::string::npos) << plain.output;
  Outcome other = mail({"subscribe", box, "--group", "auditors", "--count", "3"});
  ASSERT_EQ(other.exit_status, 0) << other.output;
  EXPECT_NE(other.output.find("job-a"), std::string::npos) << "another group sees everything";
}

// M-STORE-1: export and import work on a store file offline, and refuse while a MailboxHost
// serves it; a round trip carries every letter.
TEST_F(MailCli, M_STORE_1_ExportAndImportAStoreFileOfflineButNeverBesideItsHost) {
  const fs::path file = dir_ / "t.toml";
  const fs::path db = dir_ / "mail.db";
  std::ofstream(file) << "[topology]\nname = \"" << name_ << "\"\non_proc_exit = \"ignore\"\n"
                      << "[[proc]]\nname = \"mail\"\nlisten = \"ipc://@" << name_ << "-mail\"\n"
                      << "workers = 1\n"
                      << "[[actor]]\nproc = \"mail\"\nname = \"mailbox-host\"\n"
                      << "type = \"postal.MailboxHost\"\n"
                      << "params = { store = \"" << db.string() << "\" }\n";
  const std::string box = "post:tasks@agents.test/queue";
  const fs::path exported = dir_ / "tasks.json";
  {
    BackgroundPostal up({"up", file.string()}, dir_ / "up.txt");
    ASSERT_TRUE(up.wait_for_output("is up", seconds(30))) << up.output();
    ASSERT_EQ(mail({"create", box, "--max-messages", "10"}).exit_status, 0);
    ASSERT_EQ(mail({"post", box, "--data", "first", "--priority", "urgent"}).exit_status, 0);
    ASSERT_EQ(mail({"post", box, "--data", "second", "--priority", "critical"}).exit_status, 0);
    Outcome served = mail({"export", box, exported.string(), "--store", db.string()});
    EXPECT_EQ(served.exit_status, 1) << served.output;
    EXPECT_NE(served.output.find("is open in another process"), std::string::npos) << served.output;
    EXPECT_FALSE(fs::exists(exported));
  }
  // The topology is down: the store is ours (its proc may take a moment to let go).
  Outcome out;
  ASSERT_TRUE(wait_for(
      [&] {
        out = mail({"export", box, exported.string(), "--store", db.string()});
        return out.exit_status == 0;
      },
      seconds(30)))
      << out.output;
  const std::string text = slurp(exported);
  EXPECT_NE(text.find("postal.mailbox-export"), std::string::npos) << text;
  const fs::path other = dir_ / "other.db";
  Outcome imported = mail({"import", exported.string(), "--store", other.string()});
  ASSERT_EQ(imported.exit_status, 0) << imported.output;
  EXPECT_NE(imported.output.find("imported 2 letter(s) into tasks@agents.test/queue (created)"),
            std::string::npos)
      << imported.output;
  const fs::path again = dir_ / "again.json";
  ASSERT_EQ(mail({"export", box, again.string(), "--store", other.string()}).exit_status, 0);
  // Same letters in the same order: compare the bodies (seqs and times are the new store's).
  auto bodies = [](const std::string& t) {
    std::vector<std::string> out;
    for (size_t at = t.find("\"body_base64\""); at != std::string::npos;
         at = t.find("\"body_base64\"", at + 1)) {
      out.push_back(t.substr(at, t.find('\n', at) - at));
    }
    return out;
  };
  EXPECT_EQ(bodies(slurp(again)), bodies(text));
  EXPECT_EQ(bodies(text).size(), 2u);
  // A malformed file is refused and imports nothing.
  const fs::path broken = dir_ / "broken.json";
  std::ofstream(broken) << text.substr(0, text.size() / 2);
  Outcome bad = mail({"import", broken.string(), "--store", (dir_ / "third.db").string()});
  EXPECT_EQ(bad.exit_status, 1) << bad.output;
  EXPECT_NE(bad.output.find("nothing was imported"), std::string::npos) << bad.output;
  Outcome no_store = mail({"import", exported.string()});
  EXPECT_NE(no_store.output.find("--store"), std::string::npos) << no_store.output;
}

// M-RETRY-6 from the command line: `postal mail policy ADDR` shows a mailbox's policy; its
// options change the fields given and leave the others; a bad policy is refused and changes
// nothing; --clear clears it.
TEST_F(MailCli, M_RETRY_6_PolicyShowsSetsAndClearsAMailboxsPolicy) {
  const fs::path file = dir_ / "t.toml";
  std::ofstream(file) << "[topology]\nname = \"" << name_ << "\"\non_proc_exit = \"ignore\"\n"
                      << "[[proc]]\nname = \"mail\"\nlisten = \"ipc://@" << name_ << "-mail\"\n"
                      << "workers = 1\n"
                      << "[[actor]]\nproc = \"mail\"\nname = \"mailbox-host\"\n"
                      << "type = \"postal.MailboxHost\"\n";
  BackgroundPostal up({"up", file.string()}, dir_ / "up.txt");
  ASSERT_TRUE(up.wait_for_output("is up", seconds(30))) << up.output();
  const std::string box = "post:orders@shop.test/inbox";
  Outcome none = mail({"policy", box});
  ASSERT_EQ(none.exit_status, 0) << none.output;
  EXPECT_NE(none.output.find("no policy"), std::string::npos) << none.output;
  Outcome set = mail({"policy", box, "--max-attempts", "5", "--base-delay-ms", "200", "--rounds",
                      "7", "--dead-letter", "on"});
  ASSERT_EQ(set.exit_status, 0) << set.output;
  EXPECT_NE(set.output.find("max_attempts 5, base_delay 200ms"), std::string::npos) << set.output;
  EXPECT_NE(set.output.find("rounds: 7"), std::string::npos) << set.output;
  EXPECT_NE(set.output.find("dead_letter: on"), std::string::npos) << set.output;
  // One field more; the others stay.
  Outcome more = mail({"policy", box, "--settle-timeout-ms", "1500"});
  ASSERT_EQ(more.exit_status, 0) << more.output;
  EXPECT_NE(more.output.find("settle_timeout: 1.5s"), std::string::npos) << more.output;
  EXPECT_NE(more.output.find("max_attempts 5"), std::string::npos) << more.output;
  // A bad policy (no attempt at all) is refused; the stored one is unchanged.
  Outcome bad = mail({"policy", box, "--max-attempts", "0"});
  EXPECT_EQ(bad.exit_status, 1) << bad.output;
  EXPECT_NE(mail({"policy", box}).output.find("max_attempts 5"), std::string::npos);
  Outcome cleared = mail({"policy", box, "--clear"});
  ASSERT_EQ(cleared.exit_status, 0) << cleared.output;
  EXPECT_NE(cleared.output.find("no policy"), std::string::npos) << cleared.output;
}

// A nats: address needs no topology: the verb runs through a nats provider on the server given.
TEST_F(MailCli, ANatsAddressPostsAndFetchesThroughTheServerGiven) {
  ASSERT_FALSE(NatsServer::binary().empty()) << NatsServer::kMissing;
  NatsServer server(dir_ / "nats");
  ASSERT_TRUE(server.ready()) << server.log();
  const std::string box = "nats:orders@shop.test/inbox";
  auto nats = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "mail");
    args.insert(args.end(), {"--nats", server.url(), "--nats-prefix", "CLI"});
    return run_postal(args, dir_ / "out.txt", seconds(30));
  };
  Outcome posted = nats({"post", box, "--data", "hello"});
  ASSERT_EQ(posted.exit_status, 0) << posted.output;
  EXPECT_NE(posted.output.find("queued for fetch"), std::string::npos) << posted.output;
  Outcome status = nats({"status", box});
  EXPECT_NE(status.output.find("\"unreadCount\":1"), std::string::npos) << status.output;
  Outcome fetched = nats({"fetch", box});
  ASSERT_EQ(fetched.exit_status, 0) << fetched.output;
  EXPECT_NE(fetched.output.find("hello"), std::string::npos) << fetched.output;
  Outcome empty = nats({"fetch", box});
  EXPECT_NE(empty.output.find("no message queued"), std::string::npos) << empty.output;
  // What JetStream cannot give is refused by name, not imitated.
  Outcome sub = nats({"subscribe", box, "--count", "1"});
  EXPECT_EQ(sub.exit_status, 1) << sub.output;
  EXPECT_NE(sub.output.find("does not declare"), std::string::npos) << sub.output;
  server.kill9();
  Outcome down = nats({"post", box, "--data", "x"});
  EXPECT_EQ(down.exit_status, 1) << down.output;
  EXPECT_NE(down.output.find(server.url()), std::string::npos) << down.output;
}

}  // namespace
}  // namespace postal::test_support
