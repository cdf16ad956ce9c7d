// Inbox: open, accept (M-INBOX-1, M-INBOX-2), and the operator queries.
#include "postal/mail/inbox.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "../store/store_file.h"
#include "absl/strings/str_cat.h"
#include "inbox_rows.h"
#include "inbox_schema.h"
#include "postal/mail/inbox_errors.h"
#include "postal/mail/inbox_fingerprint.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {

using store::Db;
using store::Stmt;

std::string to_string(const InboxScope& scope) {
  return scope.kind == InboxScope::Kind::kGlobal ? std::string("global")
                                                 : absl::StrCat("tenant:", scope.id);
}

std::string_view to_string(InboxStatus status) {
  switch (status) {
    case InboxStatus::kPending:
      return "PENDING";
    case InboxStatus::kProcessing:
      return "PROCESSING";
    case InboxStatus::kCompleted:
      return "COMPLETED";
    case InboxStatus::kRetryable:
      return "RETRYABLE";
    case InboxStatus::kDead:
      return "DEAD";
  }
  return "?";
}

std::optional<InboxStatus> parse_inbox_status(std::string_view name) {
  for (InboxStatus s : {InboxStatus::kPending, InboxStatus::kProcessing, InboxStatus::kCompleted,
                        InboxStatus::kRetryable, InboxStatus::kDead}) {
    if (to_string(s) == name) return s;
  }
  return std::nullopt;
}

namespace inbox {

std::string encode_metadata(const std::map<std::string, std::string>& metadata) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : metadata) j[k] = v;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::map<std::string, std::string> decode_metadata(const std::string& json) {
  std::map<std::string, std::string> out;
  if (json == "{}") return out;  // the common case, read with every claimed record
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object()) return out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it->is_string()) out[it.key()] = it->get<std::string>();
  }
  return out;
}

namespace {

// Waiting for the write lock: SQLite's own busy handler sleeps 1, 2, 5, 10 … 100 ms, far longer
// than the few hundred µs an inbox transaction holds the lock, so contending workers slept
// through most of it. This one sleeps 20 µs, doubling to 1 ms, until the busy timeout (its
// milliseconds are the handler's argument) is spent.
int wait_for_lock(void* timeout_ms, int attempt) {
  constexpr int64_t kFirstUs = 20, kMaxUs = 1000;
  const int64_t budget_us = reinterpret_cast<intptr_t>(timeout_ms) * 1000;
  int64_t slept_us = 0, next_us = kFirstUs;
  for (int i = 0; i < attempt; ++i) {  // what the earlier attempts slept
    slept_us += next_us;
    next_us = std::min(next_us * 2, kMaxUs);
    if (slept_us >= budget_us) return 0;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(next_us));
  return 1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Db>> connect(const std::filesystem::path& path,
                                            Durability durability, absl::Duration busy_timeout,
                                            const std::string& vfs) {
  absl::StatusOr<std::unique_ptr<Db>> db = Db::open(path, vfs);
  if (!db.ok()) return db.status();
  sqlite3_busy_handler((*db)->handle(), wait_for_lock,
                       reinterpret_cast<void*>(static_cast<intptr_t>(
                           std::max<int64_t>(absl::ToInt64Milliseconds(busy_timeout), 0))));
  if (absl::Status s = (*db)->exec(absl::StrCat(
          "PRAGMA synchronous = ", durability == Durability::kDisk ? "FULL" : "NORMAL", ";"));
      !s.ok()) {
    return s;
  }
  return db;
}

InboxRecord read_record(const Stmt& r) {
  InboxRecord out;
  out.id = r.int64(0);
  out.message.scope = r.text(1) == "global" ? InboxScope::global() : InboxScope::tenant(r.text(2));
  out.message.source = r.text(3);
  out.message.consumer = r.text(4);
  out.message.message_id = r.text(5);
  out.message.event_type = r.text(6);
  out.message.schema_version = r.int64(7);
  out.message.payload = r.text(8);
  out.fingerprint = r.text(9);
  out.message.metadata = decode_metadata(r.text(10));
  out.status = parse_inbox_status(r.text(11)).value_or(InboxStatus::kPending);
  out.attempts = r.int64(12);
  out.accepted_at = from_ms(r.int64(13));
  out.next_attempt_at = from_ms(r.int64(14));
  out.last_error = r.text(15);
  return out;
}

}  // namespace inbox

namespace {

std::string_view scope_kind(const InboxScope& s) {
  return s.kind == InboxScope::Kind::kGlobal ? "global" : "tenant";
}

absl::Status check_message(const InboxMessage& m) {
  auto missing = [](std::string_view field) {
    return InvalidPayloadError(absl::StrCat("the message's ", sv(field),
                                            " is empty; every identity field and the event type "
                                            "must be set, nothing was stored"));
  };
  if (m.scope.kind == InboxScope::Kind::kTenant && m.scope.id.empty()) return missing("tenant id");
  if (m.scope.kind == InboxScope::Kind::kGlobal && !m.scope.id.empty()) {
    return InvalidPayloadError("a global scope carries no id; use InboxScope::tenant(id)");
  }
  if (m.source.empty()) return missing("source");
  if (m.consumer.empty()) return missing("consumer");
  if (m.message_id.empty()) return missing("message id");
  if (m.event_type.empty()) return missing("event type");
  return absl::OkStatus();
}

}  // namespace

Inbox::Inbox(std::filesystem::path path, InboxOptions options)
    : path_(std::move(path)),
      options_(std::move(options)),
      clock_(options_.clock ? options_.clock : std::make_shared<SystemClock>()) {}

Inbox::~Inbox() = default;

int Inbox::schema_version() { return inbox::kInboxSchemaVersion; }

absl::StatusOr<std::unique_ptr<Db>> Inbox::connect() const {
  return inbox::connect(path_, options_.durability, options_.busy_timeout, options_.vfs);
}

bool Inbox::declares(std::string_view consumer) const {
  return options_.consumers.empty() ||
         std::find(options_.consumers.begin(), options_.consumers.end(), consumer) !=
             options_.consumers.end();
}

absl::StatusOr<std::unique_ptr<Inbox>> Inbox::open(const std::filesystem::path& path,
                                                   InboxOptions options) {
  // M-STORE-1: refuse what is not a regular file before SQLite opens (or creates) anything.
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::path p = path;
    p += suffix;
    if (absl::Status s = store::check_store_file(p); !s.ok()) return s;
  }
  std::unique_ptr<Inbox> inbox(new Inbox(path, std::move(options)));
  absl::StatusOr<std::unique_ptr<Db>> db = inbox->connect();
  if (!db.ok()) return db.status();
  // Read before anything is written: a file that is not a database is refused unchanged.
  if (absl::Status s = (*db)->exec("SELECT count(*) FROM sqlite_master"); !s.ok()) return s;
  if (absl::Status s = (*db)->exec("PRAGMA journal_mode = WAL"); !s.ok()) return s;
  if (absl::Status s = inbox::migrate_inbox(**db); !s.ok()) return s;
  inbox->db_ = *std::move(db);
  return inbox;
}

absl::StatusOr<AcceptReceipt> Inbox::accept(const InboxMessage& m) {
  if (absl::Status s = check_message(m); !s.ok()) return s;
  if (!declares(m.consumer)) {
    return InvalidPayloadError(absl::StrCat("consumer '", m.consumer,
                                            "' is not declared by this inbox; declare it in "
                                            "InboxOptions::consumers, nothing was stored"));
  }
  absl::StatusOr<std::string> payload = canonical_json(m.payload, options_.limits);
  if (!payload.ok()) return payload.status();
  const std::string fingerprint = fingerprint_canonical(m.event_type, m.schema_version, *payload);
  const std::string metadata = inbox::encode_metadata(m.metadata);
  const int64_t now = inbox::to_ms(clock_->now());

  absl::MutexLock lock(&mu_);
  Db& db = *db_;
  AcceptReceipt receipt;
  // One write transaction: the insert, or the existing record's check. BEGIN IMMEDIATE takes the
  // write lock first, so two processes cannot both see "absent" (M-INBOX-1).
  absl::Status s = inbox::in_write_transaction(db, [&]() -> absl::Status {
    absl::StatusOr<Stmt*> insert = db.prepare(
        "INSERT INTO inbox (scope_kind, scope_id, source, consumer, message_id, event_type, "
        "schema_version, payload, fingerprint, metadata, status, accepted_ms, next_attempt_ms) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'PENDING', ?, ?) "
        "ON CONFLICT (scope_kind, scope_id, source, consumer, message_id) DO NOTHING");
    if (!insert.ok()) return insert.status();
    (*insert)
        ->bind_text(1, scope_kind(m.scope))
        .bind_text(2, m.scope.id)
        .bind_text(3, m.source)
        .bind_text(4, m.consumer)
        .bind_text(5, m.message_id)
        .bind_text(6, m.event_type)
        .bind(7, m.schema_version)
        .bind_text(8, *payload)
        .bind_text(9, fingerprint)
        .bind_text(10, metadata)
        .bind(11, now)
        .bind(12, now);
    if (absl::Status r = (*insert)->run(); !r.ok()) return r;
    if (db.changes() == 1) {
      receipt = {AcceptReceipt::Kind::kAccepted, sqlite3_last_insert_rowid(db.handle()),
                 InboxStatus::kPending};
      return absl::OkStatus();
    }
    absl::StatusOr<Stmt*> existing = db.prepare(
        "SELECT id, fingerprint, status FROM inbox WHERE scope_kind = ? AND scope_id = ? AND "
        "source = ? AND consumer = ? AND message_id = ?");
    if (!existing.ok()) return existing.status();
    (*existing)
        ->bind_text(1, scope_kind(m.scope))
        .bind_text(2, m.scope.id)
        .bind_text(3, m.source)
        .bind_text(4, m.consumer)
        .bind_text(5, m.message_id);
    absl::StatusOr<bool> row = (*existing)->step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::InternalError("inbox: a conflicting record vanished inside a write");
    const int64_t id = (*existing)->int64(0);
    const std::string stored_fingerprint = (*existing)->text(1);
    const std::optional<InboxStatus> status = parse_inbox_status((*existing)->text(2));
    (*existing)->reset();
    // M-INBOX-2: same identity, other content → conflict; the record stays as it is.
    if (stored_fingerprint != fingerprint) {
      return IdentityConflictError(absl::StrCat(
          "message '", m.message_id, "' from '", m.source, "' for consumer '", m.consumer,
          "' in scope ", to_string(m.scope), " was accepted before (record ", id,
          ") with other content (event type, schema version or payload); the retained record is "
          "unchanged. Give a new event a new message id"));
    }
    receipt = {AcceptReceipt::Kind::kDuplicate, id, status.value_or(InboxStatus::kPending)};
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return receipt;
}

absl::StatusOr<std::optional<InboxRecord>> Inbox::record(int64_t id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Stmt*> q =
      db_->prepare(absl::StrCat("SELECT ", sv(inbox::kRecordColumns), " FROM inbox WHERE id = ?"));
  if (!q.ok()) return q.status();
  (*q)->bind(1, id);
  absl::StatusOr<bool> row = (*q)->step();
  if (!row.ok()) return row.status();
  if (!*row) return std::nullopt;
  InboxRecord out = inbox::read_record(**q);
  (*q)->reset();
  return out;
}

absl::StatusOr<InboxStatusReport> Inbox::status() {
  absl::MutexLock lock(&mu_);
  InboxStatusReport report;
  absl::StatusOr<Stmt*> q =
      db_->prepare("SELECT consumer, status, count(*) FROM inbox GROUP BY consumer, status");
  if (!q.ok()) return q.status();
  while (true) {
    absl::StatusOr<bool> row = (*q)->step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    if (std::optional<InboxStatus> s = parse_inbox_status((*q)->text(1))) {
      report.counts[(*q)->text(0)][*s] = (*q)->int64(2);
    }
  }
  absl::StatusOr<Stmt*> oldest =
      db_->prepare("SELECT min(accepted_ms) FROM inbox WHERE status IN ('PENDING', 'RETRYABLE')");
  if (!oldest.ok()) return oldest.status();
  absl::StatusOr<bool> row = (*oldest)->step();
  if (!row.ok()) return row.status();
  if (*row && !(*oldest)->is_null(0)) report.oldest_pending = inbox::from_ms((*oldest)->int64(0));
  (*oldest)->reset();
  return report;
}

absl::StatusOr<int64_t> Inbox::retry_dead(std::string_view consumer) {
  const int64_t now = inbox::to_ms(clock_->now());
  absl::MutexLock lock(&mu_);
  int64_t moved = 0;
  absl::Status s = inbox::in_write_transaction(*db_, [&]() -> absl::Status {
    absl::StatusOr<Stmt*> u = db_->prepare(
        "UPDATE inbox SET status = 'PENDING', attempts = 0, next_attempt_ms = ?, "
        "claim_token = NULL WHERE status = 'DEAD' AND (? = '' OR consumer = ?)");
    if (!u.ok()) return u.status();
    (*u)->bind(1, now).bind_text(2, consumer).bind_text(3, consumer);
    if (absl::Status r = (*u)->run(); !r.ok()) return r;
    moved = db_->changes();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return moved;
}

}  // namespace postal::mail
