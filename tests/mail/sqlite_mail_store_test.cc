// SqliteMailStore's own contract: the file (M-STORE-1, M-STORE-2), WAL and the versioned schema,
// and admission contention with another connection (M-BOX-7).
#include "postal/mail/sqlite_mail_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "postal/mail/mail_errors.h"
#include "postal/mail/retained_mailboxes.h"
#include "support/scratch_dir.h"

namespace postal::mail::testing {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A raw SQLite connection to the store file, as another process would hold.
class RawConnection {
 public:
  explicit RawConnection(const std::filesystem::path& file) {
    EXPECT_EQ(sqlite3_open(file.c_str(), &db_), SQLITE_OK);
  }
  ~RawConnection() { sqlite3_close(db_); }
  int exec(const std::string& sql) {
    return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  }
  std::string text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr);
    std::string out;
    if (sqlite3_step(s) == SQLITE_ROW)
      out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

class SqliteMailStoreTest : public test_support::ScratchDirTest {
 protected:
  std::filesystem::path file() const { return dir_ / "mail.db"; }
};

TEST_F(SqliteMailStoreTest, UsesWalAndTheCurrentSchemaVersion) {
  ASSERT_TRUE(SqliteMailStore::open(file()).ok());
  RawConnection raw(file());
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.text("PRAGMA user_version"), std::to_string(SqliteMailStore::schema_version()));
}

// Under steady commits the WAL starts over (a catch-up checkpoint between transactions): a
// background checkpoint alone never caught up, and the WAL grew with every commit.
TEST_F(SqliteMailStoreTest, TheWalStartsOverUnderSteadyCommits) {
  auto store = SqliteMailStore::open(file(), {.checkpoint_pages = 20, .journal_size_limit = 64 << 10});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->create({.name = "steady"}).ok());
  constexpr int kAppends = 3000;  // ~2 WAL pages each: ~24 MiB if the WAL never starts over
  for (int i = 0; i < kAppends; ++i) {
    ASSERT_TRUE((*store)->append("steady", Priority::kUrgent, std::string(64, 'x')).ok());
  }
  std::filesystem::path wal = file();
  wal += "-wal";
  EXPECT_LT(std::filesystem::file_size(wal), uintmax_t{2} << 20)
      << "the WAL kept growing: it never started over";
  EXPECT_EQ(*(*store)->count("steady"), uint64_t{kAppends});
}

TEST_F(SqliteMailStoreTest, ReopeningKeepsTheSchemaAndData) {
  {
    auto store = SqliteMailStore::open(file());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->create({.name = "kept"}).ok());
  }
  auto store = SqliteMailStore::open(file());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->mailbox("kept").ok());
}

TEST_F(SqliteMailStoreTest, M_STORE_2_AStoreFromANewerSchemaIsRefusedUnchanged) {
  ASSERT_TRUE(SqliteMailStore::open(file()).ok());
  {
    RawConnection raw(file());
    ASSERT_EQ(raw.exec("PRAGMA user_version = 99"), SQLITE_OK);
  }
  auto store = SqliteMailStore::open(file());
  EXPECT_TRUE(IsIoFailed(store.status())) << store.status();
  EXPECT_NE(store.status().message().find("newer"), std::string_view::npos) << store.status();
  RawConnection raw(file());
  EXPECT_EQ(raw.text("PRAGMA user_version"), "99");
}

// M-RECV-4: schema 1 (before settlement marks) migrates to 2 on open: its mailboxes and
// messages are kept, and queue groups can settle (durably) in the migrated file.
TEST_F(SqliteMailStoreTest, M_RECV_4_ASchemaOneStoreMigratesToSettlementMarksKeepingItsMail) {
  {
    RawConnection raw(file());
    ASSERT_EQ(raw.exec(R"sql(
      CREATE TABLE mailbox (id TEXT PRIMARY KEY, is_public INTEGER NOT NULL,
        created_ms INTEGER NOT NULL, expires_ms INTEGER, max_messages INTEGER NOT NULL,
        max_message_bytes INTEGER NOT NULL, durable_all INTEGER NOT NULL);
      CREATE TABLE message (seq INTEGER PRIMARY KEY, mailbox TEXT NOT NULL,
        priority INTEGER NOT NULL, stored_ms INTEGER NOT NULL, body BLOB NOT NULL);
      CREATE INDEX message_lane ON message (mailbox, priority, seq);
      CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
      INSERT INTO meta (key, value) VALUES ('next_seq', 1);
      INSERT INTO mailbox VALUES ('jobs', 1, 0, NULL, 0, 0, 0);
      INSERT INTO message VALUES (1, 'jobs', 1, 0, 'a'), (2, 'jobs', 2, 0, 'b');
      PRAGMA user_version = 1;
    )sql"),
              SQLITE_OK);
  }
  {
    auto store = SqliteMailStore::open(file());
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<std::vector<StoredMessage>> all = (*store)->read_all("jobs");
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_EQ(all->size(), 2u);
    EXPECT_EQ((*all)[0].body, "b");  // critical first (M-PRIO-1)
    ASSERT_TRUE((*store)->settle("jobs", "workers", {1}).ok());
  }
  RawConnection raw(file());
  EXPECT_EQ(raw.text("PRAGMA user_version"), "2");
  EXPECT_EQ(raw.text("SELECT grp || ':' || seq FROM group_settled"), "workers:1");
  auto store = SqliteMailStore::open(file());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->settled("jobs", "workers"), std::vector<uint64_t>{1});
  EXPECT_EQ((*store)->read_unsettled("jobs", "workers")->size(), 1u);
}

// M-STORE-1: an exclusive open (an offline import or export) is the file's only user.
TEST_F(SqliteMailStoreTest, M_STORE_1_AnExclusiveOpenRefusesAndIsRefusedBesideAnotherUser) {
  {
    auto served = SqliteMailStore::open(file());
    ASSERT_TRUE(served.ok()) << served.status();
    auto beside = SqliteMailStore::open(file());  // sharing is fine (admission across processes)
    ASSERT_TRUE(beside.ok()) << beside.status();
    auto alone = SqliteMailStore::open(file(), {.exclusive = true});
    EXPECT_TRUE(IsIoFailed(alone.status())) << alone.status();
    EXPECT_NE(alone.status().message().find("open in another process"), std::string_view::npos)
        << alone.status();
  }
  auto alone = SqliteMailStore::open(file(), {.exclusive = true});
  ASSERT_TRUE(alone.ok()) << alone.status();
  auto other = SqliteMailStore::open(file());
  EXPECT_TRUE(IsIoFailed(other.status())) << other.status();
  EXPECT_NE(other.status().message().find("import or export"), std::string_view::npos)
      << other.status();
}

TEST_F(SqliteMailStoreTest, M_STORE_1_ASymlinkStoreFileIsRefused) {
  ASSERT_TRUE(SqliteMailStore::open(dir_ / "real.db").ok());
  std::filesystem::create_symlink(dir_ / "real.db", file());
  auto store = SqliteMailStore::open(file());
  EXPECT_TRUE(IsIoFailed(store.status())) << store.status();
  EXPECT_NE(store.status().message().find("symlink"), std::string_view::npos) << store.status();
}

TEST_F(SqliteMailStoreTest, M_STORE_1_ASymlinkedWalFileIsRefused) {
  std::ofstream(dir_ / "elsewhere").put('x');
  std::filesystem::create_symlink(dir_ / "elsewhere", dir_ / "mail.db-wal");
  auto store = SqliteMailStore::open(file());
  EXPECT_TRUE(IsIoFailed(store.status())) << store.status();
  EXPECT_FALSE(std::filesystem::exists(file())) << "nothing was created";
}

TEST_F(SqliteMailStoreTest, M_STORE_1_AFifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo(file().c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto store = SqliteMailStore::open(file());  // a blocking open would hang here: no writer
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(IsIoFailed(store.status())) << store.status();
  EXPECT_NE(store.status().message().find("FIFO"), std::string_view::npos) << store.status();
}

TEST_F(SqliteMailStoreTest, M_STORE_1_ADirectoryIsRefused) {
  std::filesystem::create_directories(file());
  auto store = SqliteMailStore::open(file());
  EXPECT_TRUE(IsIoFailed(store.status())) << store.status();
}

TEST_F(SqliteMailStoreTest, M_STORE_2_AFileThatIsNotADatabaseIsRefusedUnchanged) {
  const std::string garbage(8192, 'g');
  std::ofstream(file(), std::ios::binary) << garbage;
  auto store = SqliteMailStore::open(file());
  EXPECT_TRUE(IsIoFailed(store.status())) << store.status();
  EXPECT_EQ(read_file(file()), garbage);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "mail.db-wal"));
}

TEST_F(SqliteMailStoreTest, M_BOX_7_CreateFailsAtOnceWithIoFailedWhileAnotherWriterHoldsTheLock) {
  auto store = SqliteMailStore::open(file(), {.busy_timeout = absl::Seconds(30)});
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->create({.name = "before"}).ok());
  RawConnection other(file());
  ASSERT_EQ(other.exec("BEGIN IMMEDIATE"), SQLITE_OK);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<CreateResult> r = (*store)->create({.name = "during"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "it waited";
  EXPECT_TRUE(IsIoFailed(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("M-BOX-7"), std::string_view::npos) << r.status();
  ASSERT_EQ(other.exec("COMMIT"), SQLITE_OK);
  EXPECT_TRUE(IsMailboxNotFound((*store)->mailbox("during").status())) << "nothing was created";
  absl::StatusOr<CreateResult> retry = (*store)->create({.name = "during"});
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->created);
}

TEST_F(SqliteMailStoreTest, M_BOX_7_AppendsWaitForTheLockInsteadOfFailing) {
  auto store = SqliteMailStore::open(file(), {.busy_timeout = absl::Seconds(30)});
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->create({.name = "q"}).ok());
  RawConnection other(file());
  ASSERT_EQ(other.exec("BEGIN IMMEDIATE"), SQLITE_OK);
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the lock is held meanwhile
    other.exec("COMMIT");
  });
  absl::StatusOr<uint64_t> seq = (*store)->append("q", Priority::kUrgent, "waited");
  release.join();
  EXPECT_TRUE(seq.ok()) << seq.status();
}

TEST_F(SqliteMailStoreTest, M_BOX_2_CreatesFromTwoStoresOnOneFileAgreeOnTheMailbox) {
  auto a = SqliteMailStore::open(file());
  auto b = SqliteMailStore::open(file());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->create({.name = "shared", .ttl = absl::Hours(1), .max_messages = 4}).ok());
  absl::StatusOr<CreateResult> r =
      (*b)->create({.name = "shared", .ttl = absl::Hours(3), .max_messages = 4});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->created);
  EXPECT_TRUE(IsMailboxConflict((*b)->create({.name = "shared", .max_messages = 5}).status()));
  // b sees a's mailbox for appends too.
  EXPECT_TRUE((*b)->mailbox("shared").ok());
}

TEST_F(SqliteMailStoreTest, M_BOX_6_ReceiveLeavesAStoredMessageOverTheByteBoundUntouched) {
  {
    auto store = SqliteMailStore::open(file());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->create({.name = "bounded", .max_message_bytes = 4}).ok());
    ASSERT_TRUE((*store)->append("bounded", Priority::kUrgent, "ok").ok());
  }
  {
    // Written behind the store's back: a message its mailbox's bound would have refused.
    RawConnection raw(file());
    ASSERT_EQ(raw.exec("INSERT INTO message (seq, mailbox, priority, stored_ms, body) "
                       "VALUES (1000, 'bounded', 1, 0, CAST('too large' AS BLOB))"),
              SQLITE_OK);
  }
  absl::StatusOr<std::unique_ptr<MailStore>> opened = SqliteMailStore::open(file());
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::shared_ptr<MailStore> store = *std::move(opened);
  auto mail = RetainedMailboxes::create({.store = store, .sweep_interval = absl::ZeroDuration()});
  ASSERT_TRUE(mail.ok());
  absl::Mutex mu;
  std::vector<std::string> got;
  auto sub = (*mail)->subscribe("bounded", [&](const RetainedMessage& m) {
    absl::MutexLock lock(&mu);
    got.push_back(m.body);
  });
  ASSERT_TRUE(sub.ok()) << sub.status();
  ASSERT_TRUE((*mail)->wait_idle(absl::Seconds(30)));
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(got, std::vector<std::string>{"ok"});
  }
  EXPECT_EQ(*store->count("bounded"), 2u) << "the oversize message stays stored";
  EXPECT_EQ(store->read_all("bounded")->back().body, "too large");
}

}  // namespace
}  // namespace postal::mail::testing
