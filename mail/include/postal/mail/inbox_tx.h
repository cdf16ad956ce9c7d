// inbox_tx.h — `InboxTx`: the SQLite transaction a handler writes in (`context.tx`, M-INBOX-3).
//
// The handler's tables live in the inbox's file. Everything written through `tx` commits
// together with the record's completion — or rolls back with it, when the handler fails, the
// claim went stale or the deadline passed. The transaction belongs to the worker: a handler must
// not COMMIT, ROLLBACK or RELEASE it (the worker checks, and fails the batch if one did), and
// writes through another connection, another database or the network are not part of it.
//
// Parameters bind by position (`?`): integers, doubles, text, or null.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

struct sqlite3;

namespace postal::mail {

namespace inbox {
class TxStatements;  // the worker's cache of handler statements (inbox_tx.cc)
}

using SqlValue = std::variant<std::nullptr_t, int64_t, double, std::string>;
using SqlRow = std::vector<SqlValue>;

class InboxTx {
 public:
  // `statements` (may be null): where prepared statements are kept between records, so a
  // handler's statement is prepared once per worker, not once per call.
  InboxTx(sqlite3* db, absl::Time now, inbox::TxStatements* statements = nullptr)
      : db_(db), now_(now), statements_(statements) {}

  // Runs one statement (no rows wanted).
  absl::Status execute(std::string_view sql, const std::vector<SqlValue>& params = {});
  // Runs one statement and returns its rows.
  absl::StatusOr<std::vector<SqlRow>> query(std::string_view sql,
                                            const std::vector<SqlValue>& params = {});
  // The connection, for code that wants SQLite's own API. Same rules as above.
  sqlite3* sqlite() const { return db_; }
  // The worker's clock reading when the transaction's record started.
  absl::Time now() const { return now_; }

 private:
  sqlite3* db_;
  absl::Time now_;
  inbox::TxStatements* statements_;
};

}  // namespace postal::mail
