#include "sqlite_mailbox_rows.h"

#include <algorithm>
#include <limits>
#include <set>

namespace postal::mail::store {
namespace {

constexpr std::string_view kColumns =
    "id, is_public, created_ms, expires_ms, max_messages, max_message_bytes, durable_all";

MailboxInfo row_to_info(const Stmt& s) {
  return MailboxInfo{
      .id = s.text(0),
      .is_public = s.int64(1) != 0,
      .created_at = absl::FromUnixMillis(s.int64(2)),
      .expires_at = s.is_null(3) ? absl::InfiniteFuture() : absl::FromUnixMillis(s.int64(3)),
      .max_messages = static_cast<uint64_t>(s.int64(4)),
      .max_message_bytes = static_cast<uint64_t>(s.int64(5)),
      .durable_all = s.int64(6) != 0,
  };
}

int64_t as_int64(uint64_t v) {
  return static_cast<int64_t>(std::min<uint64_t>(v, std::numeric_limits<int64_t>::max()));
}

absl::StatusOr<std::vector<MailboxInfo>> collect(Stmt* s) {
  std::vector<MailboxInfo> out;
  while (true) {
    absl::StatusOr<bool> row = s->step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    out.push_back(row_to_info(*s));
  }
}

absl::StatusOr<uint64_t> single_count(Stmt* s) {
  absl::StatusOr<bool> row = s->step();
  if (!row.ok()) return row.status();
  const uint64_t n = *row ? static_cast<uint64_t>(s->int64(0)) : 0;
  s->reset();
  return n;
}

}  // namespace

absl::StatusOr<std::optional<MailboxInfo>> select_mailbox(Db& db, std::string_view id) {
  absl::StatusOr<Stmt*> s =
      db.prepare(std::string("SELECT ") + std::string(kColumns) + " FROM mailbox WHERE id = ?");
  if (!s.ok()) return s.status();
  (*s)->bind_text(1, id);
  absl::StatusOr<std::vector<MailboxInfo>> rows = collect(*s);
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return std::nullopt;
  return std::move(rows->front());
}

absl::Status insert_mailbox(Db& db, const MailboxInfo& info) {
  absl::StatusOr<Stmt*> s = db.prepare(std::string("INSERT INTO mailbox (") +
                                       std::string(kColumns) + ") VALUES (?, ?, ?, ?, ?, ?, ?)");
  if (!s.ok()) return s.status();
  (*s)->bind_text(1, info.id)
      .bind(2, info.is_public ? 1 : 0)
      .bind(3, to_ms(info.created_at))
      .bind(5, as_int64(info.max_messages))
      .bind(6, as_int64(info.max_message_bytes))
      .bind(7, info.durable_all ? 1 : 0);
  if (info.expires_at == absl::InfiniteFuture()) {
    (*s)->bind_null(4);
  } else {
    (*s)->bind(4, to_ms(info.expires_at));
  }
  return (*s)->run();
}

absl::Status keep_high_water(Db& db, uint64_t next) {
  absl::StatusOr<Stmt*> s = db.prepare("UPDATE meta SET value = max(value, ?) WHERE key = 'next_seq'");
  if (!s.ok()) return s.status();
  return (*s)->bind(1, as_int64(next)).run();
}

absl::Status delete_mailbox(Db& db, std::string_view id) {
  absl::StatusOr<Stmt*> high = db.prepare("SELECT coalesce(max(seq), 0) FROM message WHERE mailbox = ?");
  if (!high.ok()) return high.status();
  (*high)->bind_text(1, id);
  absl::StatusOr<uint64_t> max_seq = single_count(*high);
  if (!max_seq.ok()) return max_seq.status();
  if (absl::Status s = keep_high_water(db, *max_seq + 1); !s.ok()) return s;
  absl::StatusOr<Stmt*> marks = db.prepare("DELETE FROM group_settled WHERE mailbox = ?");
  if (!marks.ok()) return marks.status();
  if (absl::Status s = (*marks)->bind_text(1, id).run(); !s.ok()) return s;
  // A range delete over the lane index, then the row.
  absl::StatusOr<Stmt*> messages = db.prepare("DELETE FROM message WHERE mailbox = ?");
  if (!messages.ok()) return messages.status();
  if (absl::Status s = (*messages)->bind_text(1, id).run(); !s.ok()) return s;
  absl::StatusOr<Stmt*> row = db.prepare("DELETE FROM mailbox WHERE id = ?");
  if (!row.ok()) return row.status();
  return (*row)->bind_text(1, id).run();
}

absl::StatusOr<uint64_t> count_live_mailboxes(Db& db, absl::Time now) {
  absl::StatusOr<Stmt*> s =
      db.prepare("SELECT count(*) FROM mailbox WHERE expires_ms IS NULL OR expires_ms > ?");
  if (!s.ok()) return s.status();
  return single_count(&(*s)->bind(1, to_ms(now)));
}

absl::StatusOr<std::vector<MailboxInfo>> select_mailboxes(Db& db, bool live_public_only,
                                                          absl::Time now) {
  absl::StatusOr<Stmt*> s =
      live_public_only ? db.prepare(std::string("SELECT ") + std::string(kColumns) +
                                    " FROM mailbox WHERE is_public = 1 AND (expires_ms IS NULL OR "
                                    "expires_ms > ?) ORDER BY id")
                       : db.prepare(std::string("SELECT ") + std::string(kColumns) +
                                    " FROM mailbox WHERE ? IS NOT NULL ORDER BY id");
  if (!s.ok()) return s.status();
  return collect(&(*s)->bind(1, to_ms(now)));
}

absl::StatusOr<std::vector<MailboxInfo>> select_expired(Db& db, absl::Time now) {
  absl::StatusOr<Stmt*> s =
      db.prepare(std::string("SELECT ") + std::string(kColumns) +
                 " FROM mailbox WHERE expires_ms IS NOT NULL AND expires_ms <= ? ORDER BY id");
  if (!s.ok()) return s.status();
  return collect(&(*s)->bind(1, to_ms(now)));
}

absl::StatusOr<uint64_t> count_messages(Db& db, std::string_view mailbox) {
  absl::StatusOr<Stmt*> s = db.prepare("SELECT count(*) FROM message WHERE mailbox = ?");
  if (!s.ok()) return s.status();
  return single_count(&(*s)->bind_text(1, mailbox));
}

absl::StatusOr<std::vector<StoredMessage>> select_lane(Db& db, std::string_view mailbox,
                                                       const LaneRange& range) {
  absl::StatusOr<Stmt*> s = db.prepare(
      "SELECT seq, stored_ms, body FROM message WHERE mailbox = ? AND priority = ? AND seq > ? "
      "AND seq <= ? ORDER BY seq LIMIT ?");
  if (!s.ok()) return s.status();
  (*s)->bind_text(1, mailbox)
      .bind(2, static_cast<int64_t>(range.priority))
      .bind(3, as_int64(range.after))
      .bind(4, as_int64(range.through))
      .bind(5, as_int64(range.limit));
  std::vector<StoredMessage> out;
  while (true) {
    absl::StatusOr<bool> row = (*s)->step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    out.push_back(StoredMessage{.seq = static_cast<uint64_t>((*s)->int64(0)),
                                .priority = range.priority,
                                .stored_at = absl::FromUnixMillis((*s)->int64(1)),
                                .body = (*s)->text(2)});
  }
}

absl::StatusOr<bool> group_has_marks(Db& db, std::string_view mailbox, std::string_view group) {
  absl::StatusOr<Stmt*> s =
      db.prepare("SELECT count(*) FROM (SELECT 1 FROM group_settled WHERE mailbox = ? AND grp = ? "
                 "LIMIT 1)");
  if (!s.ok()) return s.status();
  absl::StatusOr<uint64_t> n = single_count(&(*s)->bind_text(1, mailbox).bind_text(2, group));
  if (!n.ok()) return n.status();
  return *n > 0;
}

absl::StatusOr<std::set<std::string, std::less<>>> select_settling_groups(Db& db,
                                                                         std::string_view mailbox) {
  absl::StatusOr<Stmt*> s =
      db.prepare("SELECT DISTINCT grp FROM group_settled WHERE mailbox = ?");
  if (!s.ok()) return s.status();
  (*s)->bind_text(1, mailbox);
  std::set<std::string, std::less<>> out;
  while (true) {
    absl::StatusOr<bool> row = (*s)->step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    out.insert((*s)->text(0));
  }
}

absl::StatusOr<uint64_t> insert_marks(Db& db, std::string_view mailbox, std::string_view group,
                                      const std::vector<uint64_t>& seqs) {
  uint64_t n = 0;
  for (uint64_t seq : seqs) {
    // Only a message the mailbox holds gets a mark. (prepare hands the cached statement out
    // reset, once per row.)
    absl::StatusOr<Stmt*> s = db.prepare(
        "INSERT OR IGNORE INTO group_settled (mailbox, grp, seq) SELECT mailbox, ?2, seq FROM "
        "message WHERE seq = ?3 AND mailbox = ?1");
    if (!s.ok()) return s.status();
    if (absl::Status r =
            (*s)->bind_text(1, mailbox).bind_text(2, group).bind(3, as_int64(seq)).run();
        !r.ok()) {
      return r;
    }
    n += static_cast<uint64_t>(db.changes());
  }
  return n;
}

absl::StatusOr<std::vector<uint64_t>> select_marks(Db& db, std::string_view mailbox,
                                                   std::string_view group) {
  absl::StatusOr<Stmt*> s = db.prepare(
      "SELECT seq FROM group_settled WHERE mailbox = ? AND grp = ? ORDER BY seq");
  if (!s.ok()) return s.status();
  (*s)->bind_text(1, mailbox).bind_text(2, group);
  std::vector<uint64_t> out;
  while (true) {
    absl::StatusOr<bool> row = (*s)->step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    out.push_back(static_cast<uint64_t>((*s)->int64(0)));
  }
}

absl::StatusOr<uint64_t> select_high_water(Db& db) {
  absl::StatusOr<Stmt*> s = db.prepare(
      "SELECT max(coalesce((SELECT max(seq) FROM message), 0), "
      "(SELECT value FROM meta WHERE key = 'next_seq') - 1)");
  if (!s.ok()) return s.status();
  return single_count(*s);
}

}  // namespace postal::mail::store
