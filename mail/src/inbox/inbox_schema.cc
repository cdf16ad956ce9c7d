#include "inbox_schema.h"

#include <array>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"

namespace postal::mail::inbox {
namespace {

// Migration i moves the schema from version i to i+1. Append; never edit a shipped one.
constexpr std::array<std::string_view, kInboxSchemaVersion> kMigrations = {
    // 0 → 1: the inbox records (M-INBOX-1…3) and the outbox (M-INBOX-4).
    R"sql(
      CREATE TABLE inbox (
        id              INTEGER PRIMARY KEY,
        scope_kind      TEXT NOT NULL,          -- 'global' | 'tenant'
        scope_id        TEXT NOT NULL,          -- '' for global
        source          TEXT NOT NULL,
        consumer        TEXT NOT NULL,
        message_id      TEXT NOT NULL,
        event_type      TEXT NOT NULL,
        schema_version  INTEGER NOT NULL,
        payload         TEXT NOT NULL,          -- canonical JSON
        fingerprint     TEXT NOT NULL,          -- SHA-256, hex
        metadata        TEXT NOT NULL,          -- a JSON object of strings
        status          TEXT NOT NULL,
        attempts        INTEGER NOT NULL DEFAULT 0,
        accepted_ms     INTEGER NOT NULL,
        next_attempt_ms INTEGER NOT NULL,       -- PROCESSING: the lease's end
        claim_token     TEXT,                   -- set while PROCESSING
        completed_ms    INTEGER,
        last_error      TEXT,
        UNIQUE (scope_kind, scope_id, source, consumer, message_id)
      );
      CREATE INDEX inbox_ready ON inbox (consumer, status, next_attempt_ms);
      CREATE TABLE outbox (
        id             INTEGER PRIMARY KEY,
        event_id       TEXT NOT NULL UNIQUE,
        destination    TEXT NOT NULL,           -- a mail address
        event_type     TEXT NOT NULL,
        schema_version INTEGER NOT NULL,
        payload        TEXT NOT NULL,           -- canonical JSON
        metadata       TEXT NOT NULL,
        created_ms     INTEGER NOT NULL,
        published_ms   INTEGER,                 -- NULL: not yet sent
        attempts       INTEGER NOT NULL DEFAULT 0,
        last_error     TEXT
      );
      CREATE INDEX outbox_unpublished ON outbox (published_ms, id);
    )sql",
};

}  // namespace

absl::Status migrate_inbox(store::Db& db) {
  absl::StatusOr<int64_t> app = db.pragma("application_id");
  if (!app.ok()) return app.status();
  absl::StatusOr<int64_t> version = db.pragma("user_version");
  if (!version.ok()) return version.status();
  if ((*app != 0 && *app != kApplicationId) || (*app == 0 && *version != 0)) {
    return IoFailedError(absl::StrCat(
        "'", db.path().string(), "' is a SQLite database of another kind (application_id ", *app,
        ", user_version ", *version, "), not an inbox; open an inbox file; nothing was changed"));
  }
  if (*version > kInboxSchemaVersion) {
    return IoFailedError(absl::StrCat(
        "inbox '", db.path().string(), "' has schema version ", *version,
        ", newer than this build's ", kInboxSchemaVersion,
        "; it was written by a newer postal. Open it with that version; nothing was changed"));
  }
  for (int64_t v = *version; v < kInboxSchemaVersion; ++v) {
    absl::Status s = store::in_transaction(db, "BEGIN IMMEDIATE", [&]() -> absl::Status {
      absl::StatusOr<int64_t> now = db.pragma("user_version");  // another process may have won
      if (!now.ok()) return now.status();
      if (*now != v) return absl::OkStatus();
      if (absl::Status m = db.exec(kMigrations[v]); !m.ok()) return m;
      if (absl::Status m = db.exec(absl::StrCat("PRAGMA application_id = ", kApplicationId));
          !m.ok()) {
        return m;
      }
      return db.exec(absl::StrCat("PRAGMA user_version = ", v + 1));
    });
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace postal::mail::inbox
