#include "sqlite_schema.h"

#include <array>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"

namespace postal::mail::store {
namespace {

// Migration i moves the schema from version i to i+1. Append; never edit a shipped one.
constexpr std::array<std::string_view, kSchemaVersion> kMigrations = {
    // 0 → 1: mailboxes, messages in append-ordered lanes, and the store's sequence high-water
    // mark (sequence numbers are never reused, also for messages kept only in memory).
    R"sql(
      CREATE TABLE mailbox (
        id                TEXT PRIMARY KEY,
        is_public         INTEGER NOT NULL,
        created_ms        INTEGER NOT NULL,
        expires_ms        INTEGER,            -- NULL: never
        max_messages      INTEGER NOT NULL,
        max_message_bytes INTEGER NOT NULL,
        durable_all       INTEGER NOT NULL
      );
      CREATE TABLE message (
        seq       INTEGER PRIMARY KEY,        -- the rowid: appends go to the end of the b-tree
        mailbox   TEXT NOT NULL,
        priority  INTEGER NOT NULL,
        stored_ms INTEGER NOT NULL,
        body      BLOB NOT NULL
      );
      CREATE INDEX message_lane ON message (mailbox, priority, seq);
      CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
      INSERT INTO meta (key, value) VALUES ('next_seq', 1);
    )sql",
    // 1 → 2: queue-group settlement marks (M-RECV-4), one row per (mailbox, group, message) a
    // group settled, deleted with the message. Marks of messages kept only in memory stay in
    // memory with them.
    R"sql(
      CREATE TABLE group_settled (
        mailbox TEXT NOT NULL,
        grp     TEXT NOT NULL,
        seq     INTEGER NOT NULL,
        PRIMARY KEY (mailbox, grp, seq)
      ) WITHOUT ROWID;
      CREATE INDEX group_settled_seq ON group_settled (mailbox, seq);
    )sql",
};

}  // namespace

absl::Status migrate(Db& db) {
  absl::StatusOr<int64_t> version = db.pragma("user_version");
  if (!version.ok()) return version.status();
  if (*version > kSchemaVersion) {
    return IoFailedError(absl::StrCat(
        "store '", db.path().string(), "' has schema version ", *version,
        ", newer than this build's ", kSchemaVersion,
        "; it was written by a newer postal. Open it with that version; nothing was changed"));
  }
  for (int64_t v = *version; v < kSchemaVersion; ++v) {
    absl::Status s = in_transaction(db, "BEGIN IMMEDIATE", [&]() -> absl::Status {
      // Another process may have migrated while we waited for the lock.
      absl::StatusOr<int64_t> now = db.pragma("user_version");
      if (!now.ok()) return now.status();
      if (*now != v) return absl::OkStatus();
      if (absl::Status m = db.exec(kMigrations[v]); !m.ok()) return m;
      return db.exec(absl::StrCat("PRAGMA user_version = ", v + 1));
    });
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace postal::mail::store
