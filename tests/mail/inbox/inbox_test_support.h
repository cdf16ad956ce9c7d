// What the inbox tests share: a message builder and an inbox on a scratch file.
#pragma once

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "postal/mail/inbox.h"
#include "support/scratch_dir.h"

namespace postal::mail::testing {

inline InboxMessage message(std::string id, std::string payload = R"({"orderId":7})",
                            std::string consumer = "orders.projection.v1") {
  InboxMessage m;  // assigned field by field: GCC 12 misreads designated initializers here
  m.scope = InboxScope::tenant("t1");
  m.source = "orders-service";
  m.consumer = std::move(consumer);
  m.message_id = std::move(id);
  m.event_type = "order.created";
  m.payload = std::move(payload);
  return m;
}

class InboxTest : public test_support::ScratchDirTest {
 protected:
  std::unique_ptr<Inbox> open_inbox(InboxOptions options = {}) {
    if (!options.clock) options.clock = clock_;
    absl::StatusOr<std::unique_ptr<Inbox>> inbox = Inbox::open(dir_ / "inbox.db", options);
    EXPECT_TRUE(inbox.ok()) << inbox.status();
    return inbox.ok() ? *std::move(inbox) : nullptr;
  }
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
};

}  // namespace postal::mail::testing

#include <sqlite3.h>

namespace postal::mail::testing {

// Runs `sql` on its own connection to `file` (the tests' application tables).
inline void exec_sql(const std::filesystem::path& file, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << err;
  sqlite3_free(err);
  sqlite3_close(db);
}

// The single integer `sql` yields, on its own connection (-1 on error).
inline int64_t query_int(const std::filesystem::path& file, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open(file.c_str(), &db) != SQLITE_OK) return -1;
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* stmt = nullptr;
  int64_t out = -1;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    out = sqlite3_column_int64(stmt, 0);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

}  // namespace postal::mail::testing
