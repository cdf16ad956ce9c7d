// TxStatements (internal): the prepared statements of one worker's handlers, kept between
// records so `context.tx.execute(sql, …)` prepares `sql` once per worker instead of once per
// call. Bounded: past `kMaxStatements` distinct texts (a handler formatting values into its SQL)
// a statement is prepared for its call and finalized after it, as without a cache.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include <sqlite3.h>

namespace postal::mail::inbox {

class TxStatements {
 public:
  static constexpr size_t kMaxStatements = 64;

  TxStatements() = default;
  ~TxStatements() {
    for (auto& [_, stmt] : cache_) sqlite3_finalize(stmt);
  }
  TxStatements(const TxStatements&) = delete;
  TxStatements& operator=(const TxStatements&) = delete;

  // The cached statement for `sql` on `db`, prepared now if new and there is room; null when it
  // is not cached (the caller prepares its own). Reset and unbound.
  sqlite3_stmt* find_or_prepare(sqlite3* db, std::string_view sql, int* rc) {
    *rc = SQLITE_OK;
    auto it = cache_.find(sql);
    if (it != cache_.end()) {
      sqlite3_reset(it->second);
      sqlite3_clear_bindings(it->second);
      return it->second;
    }
    if (cache_.size() >= kMaxStatements) return nullptr;
    sqlite3_stmt* stmt = nullptr;
    *rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                             SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (*rc != SQLITE_OK) return nullptr;
    cache_.emplace(std::string(sql), stmt);
    return stmt;
  }

 private:
  std::map<std::string, sqlite3_stmt*, std::less<>> cache_;
};

}  // namespace postal::mail::inbox
