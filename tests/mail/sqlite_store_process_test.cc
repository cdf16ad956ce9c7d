// SqliteMailStore with real processes (mail_store_child): admission across two processes on one
// store file (M-BOX-2, M-BOX-7) and crash safety (kill -9 mid-burst, at both tiers).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "postal/mail/sqlite_mail_store.h"
#include "support/scratch_dir.h"

namespace postal::mail::testing {
namespace {

// mail_store_child ARGS with stdout and stderr to `log`; SIGKILLed when destroyed.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::filesystem::path& log) {
    std::vector<std::string> all{MAIL_STORE_CHILD};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Child() { kill(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Its exit status, or -1 when it did not exit within `deadline` (then it is killed).
  int wait_exit(std::chrono::milliseconds deadline) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > until) return kill(), -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
};

// The complete lines of `log` (a line still being written is left out).
std::vector<std::string> lines_of(const std::filesystem::path& log) {
  std::ifstream in(log);
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

size_t count_prefix(const std::vector<std::string>& lines, const std::string& prefix) {
  size_t n = 0;
  for (const std::string& l : lines) n += l.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

class SqliteStoreProcessTest : public test_support::ScratchDirTest {
 protected:
  // Waits (with a deadline) until `log` has `n` lines starting with `prefix`.
  bool wait_lines(const std::filesystem::path& log, const std::string& prefix, size_t n) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (count_prefix(lines_of(log), prefix) < n) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
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
