// inbox_rows.h — what inbox.cc, inbox_worker.cc and outbox.cc share about rows: the time unit
// (milliseconds since the epoch, as the mail store), the metadata encoding, the store checks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "../store/sqlite_db.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/inbox.h"
#include "postal/mail/sqlite_mail_store.h"

namespace postal::mail::inbox {

inline int64_t to_ms(absl::Time t) { return absl::ToUnixMillis(t); }
inline absl::Time from_ms(int64_t ms) { return absl::FromUnixMillis(ms); }

// Metadata as a JSON object of strings (not fingerprinted; kept for handlers and operators).
std::string encode_metadata(const std::map<std::string, std::string>& metadata);
std::map<std::string, std::string> decode_metadata(const std::string& json);

// The columns `read_record` reads, in its order.
inline constexpr std::string_view kRecordColumns =
    "id, scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, payload, "
    "fingerprint, metadata, status, attempts, accepted_ms, next_attempt_ms, "
    "coalesce(last_error, '')";
InboxRecord read_record(const store::Stmt& row);

// Runs one statement without rows through the connection's statement cache.
inline absl::Status run_cached(store::Db& db, std::string_view sql) {
  absl::StatusOr<store::Stmt*> s = db.prepare(sql);
  return s.ok() ? (*s)->run() : s.status();
}

// store::in_transaction with BEGIN IMMEDIATE and COMMIT as cached prepared statements, so a
// transaction does not parse its control statements each time (accept runs one per message).
template <class Body>
absl::Status in_write_transaction(store::Db& db, Body&& body) {
  if (absl::Status s = run_cached(db, "BEGIN IMMEDIATE"); !s.ok()) return s;
  absl::Status s = body();
  if (s.ok()) s = run_cached(db, "COMMIT");
  if (!s.ok()) (void)db.exec("ROLLBACK");
  return s;
}

// One connection with the pragmas of a tier: busy timeout, synchronous, WAL.
absl::StatusOr<std::unique_ptr<store::Db>> connect(const std::filesystem::path& path,
                                                   Durability durability,
                                                   absl::Duration busy_timeout,
                                                   const std::string& vfs);

}  // namespace postal::mail::inbox
