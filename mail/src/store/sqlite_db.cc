#include "sqlite_db.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::store {

Stmt::~Stmt() { sqlite3_finalize(stmt_); }

Stmt& Stmt::bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

Stmt& Stmt::bind_text(int index, std::string_view value) {
  sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  return *this;
}

Stmt& Stmt::bind_blob(int index, std::string_view value) {
  // A zero-length blob must still be a blob, not NULL.
  sqlite3_bind_blob64(stmt_, index, value.empty() ? "" : value.data(), value.size(),
                      SQLITE_TRANSIENT);
  return *this;
}

absl::StatusOr<bool> Stmt::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  absl::Status s = db_->error(rc, sqlite3_sql(stmt_));
  sqlite3_reset(stmt_);
  return s;
}

absl::Status Stmt::run() {
  while (true) {
    absl::StatusOr<bool> row = step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

void Stmt::reset() { sqlite3_reset(stmt_); }

int64_t Stmt::int64(int column) const { return sqlite3_column_int64(stmt_, column); }

bool Stmt::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

Stmt& Stmt::bind_null(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

std::string Stmt::text(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  const int size = sqlite3_column_bytes(stmt_, column);
  return data == nullptr ? std::string() : std::string(static_cast<const char*>(data), size);
}

absl::StatusOr<std::unique_ptr<Db>> Db::open(const std::filesystem::path& path,
                                             const std::string& vfs) {
  sqlite3* handle = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &handle,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
      vfs.empty() ? nullptr : vfs.c_str());
  std::unique_ptr<Db> db(new Db(handle, path));
  if (rc != SQLITE_OK) return db->error(rc, "open");
  sqlite3_extended_result_codes(handle, 1);
  return db;
}

Db::~Db() {
  statements_.clear();
  sqlite3_close_v2(db_);
}

absl::Status Db::exec(std::string_view sql) {
  const int rc = sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? absl::OkStatus() : error(rc, sql);
}

absl::StatusOr<Stmt*> Db::prepare(std::string_view sql) {
  auto it = statements_.find(sql);
  if (it == statements_.end()) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                      SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return error(rc, sql);
    it = statements_.emplace(std::string(sql), std::unique_ptr<Stmt>(new Stmt(this, stmt))).first;
  }
  Stmt* s = it->second.get();
  sqlite3_reset(s->stmt_);
  sqlite3_clear_bindings(s->stmt_);
  return s;
}

absl::Status Db::error(int rc, std::string_view what) const {
  const char* message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  return IoFailedError(absl::StrCat("SQLite store '", path_.string(), "': ", sv(what),
                                    " failed: ", message, " (code ", rc, "); nothing was changed"));
}

absl::StatusOr<int64_t> Db::pragma(std::string_view name) {
  absl::StatusOr<Stmt*> s = prepare(absl::StrCat("PRAGMA ", sv(name)));
  if (!s.ok()) return s.status();
  absl::StatusOr<bool> row = (*s)->step();
  if (!row.ok()) return row.status();
  const int64_t value = *row ? (*s)->int64(0) : 0;
  (void)(*s)->run();
  return value;
}

int64_t Db::changes() const { return sqlite3_changes64(db_); }

}  // namespace postal::mail::store
