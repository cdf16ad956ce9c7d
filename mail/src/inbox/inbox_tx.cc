#include "postal/mail/inbox_tx.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"
#include "tx_statements.h"

namespace postal::mail {
namespace {

// A statement for one call: the worker's cached one (reset when the call ends) or, without a
// cache or room in it, its own (finalized when the call ends).
class Statement {
 public:
  explicit Statement(inbox::TxStatements* cache) : cache_(cache) {}
  ~Statement() {
    if (owned_) {
      sqlite3_finalize(stmt_);
    } else if (stmt_ != nullptr) {
      sqlite3_reset(stmt_);  // no statement of a handler stays active between records
      sqlite3_clear_bindings(stmt_);
    }
  }
  absl::Status prepare(sqlite3* db, std::string_view sql, const std::vector<SqlValue>& params) {
    db_ = db;
    int rc = SQLITE_OK;
    if (cache_ != nullptr) stmt_ = cache_->find_or_prepare(db, sql, &rc);
    if (rc != SQLITE_OK) return error(rc, sql);
    if (stmt_ == nullptr) {
      owned_ = true;
      rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
      if (rc != SQLITE_OK) return error(rc, sql);
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const int at = static_cast<int>(i + 1);
      const SqlValue& p = params[i];
      if (std::holds_alternative<int64_t>(p))
        sqlite3_bind_int64(stmt_, at, std::get<int64_t>(p));
      else if (std::holds_alternative<double>(p))
        sqlite3_bind_double(stmt_, at, std::get<double>(p));
      else if (std::holds_alternative<std::string>(p)) {
        const std::string& s = std::get<std::string>(p);
        sqlite3_bind_text64(stmt_, at, s.data(), s.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
      } else {
        sqlite3_bind_null(stmt_, at);
      }
    }
    return absl::OkStatus();
  }
  absl::Status run(std::vector<SqlRow>* rows) {
    while (true) {
      const int rc = sqlite3_step(stmt_);
      if (rc == SQLITE_DONE) return absl::OkStatus();
      if (rc != SQLITE_ROW) return error(rc, sqlite3_sql(stmt_));
      if (rows == nullptr) continue;
      SqlRow row;
      for (int c = 0; c < sqlite3_column_count(stmt_); ++c) {
        switch (sqlite3_column_type(stmt_, c)) {
          case SQLITE_INTEGER:
            row.emplace_back(int64_t{sqlite3_column_int64(stmt_, c)});
            break;
          case SQLITE_FLOAT:
            row.emplace_back(sqlite3_column_double(stmt_, c));
            break;
          case SQLITE_NULL:
            row.emplace_back(nullptr);
            break;
          default: {
            const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, c));
            row.emplace_back(p == nullptr ? std::string()
                                          : std::string(p, sqlite3_column_bytes(stmt_, c)));
          }
        }
      }
      rows->push_back(std::move(row));
    }
  }

 private:
  absl::Status error(int rc, std::string_view sql) const {
    // Unavailable: a handler error the worker retries (M-INBOX-3); the record is not lost.
    return IoFailedError(absl::StrCat("inbox handler transaction: '", sv(sql),
                                      "' failed: ", sqlite3_errmsg(db_), " (code ", rc, ")"));
  }
  inbox::TxStatements* cache_;
  bool owned_ = false;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace

absl::Status InboxTx::execute(std::string_view sql, const std::vector<SqlValue>& params) {
  Statement s(statements_);
  if (absl::Status p = s.prepare(db_, sql, params); !p.ok()) return p;
  return s.run(nullptr);
}

absl::StatusOr<std::vector<SqlRow>> InboxTx::query(std::string_view sql,
                                                   const std::vector<SqlValue>& params) {
  Statement s(statements_);
  if (absl::Status p = s.prepare(db_, sql, params); !p.ok()) return p;
  std::vector<SqlRow> rows;
  if (absl::Status r = s.run(&rows); !r.ok()) return r;
  return rows;
}

}  // namespace postal::mail
