// sqlite_db.h — a thin RAII layer over one SQLite connection (`Db`) and its prepared statements
// (`Stmt`), with SQLite errors turned into `IoFailed` statuses that name the store file.
//
// A `Db` is used by one thread at a time (its owner locks or owns a thread); statements are
// prepared once and cached per connection.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace postal::mail::store {

class Db;

// A cached prepared statement, reset and unbound whenever it is handed out by `Db::prepare`.
class Stmt {
 public:
  ~Stmt();  // finalizes: a connection with live statements is never really closed
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& bind(int index, int64_t value);
  Stmt& bind_text(int index, std::string_view value);
  Stmt& bind_blob(int index, std::string_view value);
  // True when a row is ready, false when done; an error otherwise.
  absl::StatusOr<bool> step();
  // Steps to completion (a statement that returns no rows).
  absl::Status run();
  // Ends the statement early (a row was read, no more are wanted), releasing its snapshot.
  void reset();
  int64_t int64(int column) const;
  bool is_null(int column) const;
  Stmt& bind_null(int index);
  std::string text(int column) const;

 private:
  friend class Db;
  Stmt(Db* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Db* db_;
  sqlite3_stmt* stmt_;
};

class Db {
 public:
  // Opens `path` read-write (creating it), refusing a final symlink (SQLITE_OPEN_NOFOLLOW).
  // `vfs` empty: SQLite's default VFS.
  static absl::StatusOr<std::unique_ptr<Db>> open(const std::filesystem::path& path,
                                                  const std::string& vfs = {});
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  absl::Status exec(std::string_view sql);
  absl::StatusOr<Stmt*> prepare(std::string_view sql);
  // An `IoFailed` naming the store, the operation and SQLite's message for `rc`.
  absl::Status error(int rc, std::string_view what) const;
  // An integer pragma's value (e.g. "user_version").
  absl::StatusOr<int64_t> pragma(std::string_view name);
  int64_t changes() const;

  sqlite3* handle() const { return db_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  Db(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::filesystem::path path_;
  std::map<std::string, std::unique_ptr<Stmt>, std::less<>> statements_;
};

// Runs `body` between BEGIN (`begin` is the statement to use) and COMMIT, rolling back when it
// fails, so a failure leaves the store unchanged (M-STORE-2).
template <class Body>
absl::Status in_transaction(Db& db, std::string_view begin, Body&& body) {
  if (absl::Status s = db.exec(begin); !s.ok()) return s;
  absl::Status s = body();
  if (s.ok()) s = db.exec("COMMIT");
  if (!s.ok()) (void)db.exec("ROLLBACK");
  return s;
}

}  // namespace postal::mail::store
