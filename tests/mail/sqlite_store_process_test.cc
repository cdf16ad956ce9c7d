// SqliteMailStore with real processes (mail_store_child): admission across two processes on one
// store file (M-BOX-2, M-BOX-7) and crash safety (kill -9 mid-burst, at both tiers).
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "postal/mail/sqlite_mail_store.h"
#include "support/child_process.h"
#include "support/scratch_dir.h"

namespace postal::mail::testing {
namespace {

using test_support::count_prefix;
using test_support::log_lines;

// mail_store_child ARGS, a real process (SIGKILLed when destroyed).
class Child : public test_support::ChildProcess {
 public:
  Child(const std::vector<std::string>& args, const std::filesystem::path& log)
      : ChildProcess(MAIL_STORE_CHILD, args, log) {}
};

const auto lines_of = log_lines;

class SqliteStoreProcessTest : public test_support::ScratchDirTest {
 protected:
  bool wait_lines(const std::filesystem::path& log, const std::string& prefix, size_t n) {
    return test_support::wait_log_lines(log, prefix, n);
  }

  // kill -9 of a process appending from 4 threads, then reopen: every acknowledged message is
  // there, and nothing stored is half-written.
  void crash_mid_burst(const std::string& tier) {
    const std::filesystem::path file = dir_ / "mail.db";
    const std::filesystem::path log = dir_ / "burst.log";
    {
      Child child({"burst", file.string(), tier, "burst", "4"}, log);
      ASSERT_TRUE(wait_lines(log, "acked ", 1500)) << "the child acked too little";
      child.kill();  // SIGKILL, mid-burst: its writer thread is committing
    }
    std::map<uint64_t, std::string> acked;
    for (const std::string& l : lines_of(log)) {
      if (l.rfind("acked ", 0) != 0) continue;
      std::istringstream in(l.substr(6));
      uint64_t seq = 0;
      std::string body;
      in >> seq >> body;
      acked[seq] = body;
    }
    absl::StatusOr<std::unique_ptr<MailStore>> store = SqliteMailStore::open(file);
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<std::vector<StoredMessage>> all = (*store)->read_all("burst");
    ASSERT_TRUE(all.ok()) << all.status();
    std::map<uint64_t, std::string> stored;
    for (const StoredMessage& m : *all) {
      EXPECT_NE(m.body.find(':'), std::string::npos) << "a half-written body: " << m.body;
      stored[m.seq] = m.body;
    }
    size_t missing = 0;
    for (const auto& [seq, body] : acked) {
      auto it = stored.find(seq);
      if (it == stored.end() || it->second != body) ++missing;
    }
    EXPECT_EQ(missing, 0u) << "of " << acked.size() << " acked, " << stored.size() << " stored";
    EXPECT_GE(stored.size(), acked.size());
  }
};

TEST_F(SqliteStoreProcessTest, M_BOX_2_ConcurrentCreatesAcrossTwoProcessesYieldExactlyOneCreated) {
  const std::filesystem::path file = dir_ / "mail.db";
  // Make the file first, so both children start on an existing store.
  ASSERT_TRUE(SqliteMailStore::open(file).ok());
  constexpr int kNames = 150;
  Child a({"create", file.string(), "race.", std::to_string(kNames)}, dir_ / "a.log");
  Child b({"create", file.string(), "race.", std::to_string(kNames)}, dir_ / "b.log");
  ASSERT_EQ(a.wait_exit(std::chrono::seconds(60)), 0) << lines_of(dir_ / "a.log").back();
  ASSERT_EQ(b.wait_exit(std::chrono::seconds(60)), 0) << lines_of(dir_ / "b.log").back();
  std::map<std::string, int> created;
  size_t answers = 0;
  for (const char* log : {"a.log", "b.log"}) {
    for (const std::string& l : lines_of(dir_ / log)) {
      if (l.rfind("created ", 0) == 0) ++created[l.substr(8)];
      if (l.rfind("created ", 0) == 0 || l.rfind("existing ", 0) == 0) ++answers;
    }
  }
  EXPECT_EQ(answers, size_t{2 * kNames});
  EXPECT_EQ(created.size(), size_t{kNames});
  for (const auto& [name, n] : created) EXPECT_EQ(n, 1) << name << " was created " << n << " times";
}

TEST_F(SqliteStoreProcessTest, CrashMidBurstLosesNoAcknowledgedMessageAtTierOs) {
  crash_mid_burst("os");
}

TEST_F(SqliteStoreProcessTest, CrashMidBurstLosesNoAcknowledgedMessageAtTierDisk) {
  crash_mid_burst("disk");
}

}  // namespace
}  // namespace postal::mail::testing
