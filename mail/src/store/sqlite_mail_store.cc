#include "postal/mail/sqlite_mail_store.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <string>

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "mem_lanes.h"
#include "settle_marks.h"
#include "postal/mail/mail_errors.h"
#include "sqlite_db.h"
#include "sqlite_mailbox_rows.h"
#include "sqlite_schema.h"
#include "sqlite_writer.h"
#include "store_admission.h"
#include "store_file.h"

namespace postal::mail {

std::string_view to_string(Durability durability) {
  return durability == Durability::kDisk ? "disk" : "os";
}

int SqliteMailStore::schema_version() { return store::kSchemaVersion; }

namespace {

using store::Db;

int ms(absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); }

class SqliteStore final : public MailStore {
 public:
  SqliteStore(store::StoreLock lock, SqliteStoreOptions options, std::unique_ptr<Db> reader)
      : lock_(std::move(lock)),
        options_(std::move(options)),
        clock_(options_.clock ? options_.clock : std::make_shared<SystemClock>()),
        reader_(std::move(reader)) {}

  // Loads the mailboxes and the sequence mark, then starts the writer.
  absl::Status start(std::unique_ptr<Db> writer, std::unique_ptr<Db> checkpointer) {
    absl::StatusOr<uint64_t> high = store::select_high_water(*reader_);
    if (!high.ok()) return high.status();
    last_seq_.store(*high);
    absl::StatusOr<std::vector<MailboxInfo>> all =
        store::select_mailboxes(*reader_, false, clock_->now());
    if (!all.ok()) return all.status();
    for (MailboxInfo& info : *all) {
      absl::StatusOr<uint64_t> n = store::count_messages(*reader_, info.id);
      if (!n.ok()) return n.status();
      std::string id = info.id;
      mailboxes_.emplace(std::move(id), Entry{std::move(info), *n});
    }
    writer_ = std::make_unique<store::SqliteWriter>(std::move(writer), std::move(checkpointer),
                                                    &last_seq_, options_.checkpoint_pages);
    return absl::OkStatus();
  }

  std::string_view kind() const override { return "sqlite"; }
  bool persistent() const override { return true; }

  absl::StatusOr<CreateResult> create(const MailboxSpec& spec) override;
  absl::StatusOr<MailboxInfo> mailbox(std::string_view id) override {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Entry*> e = find_locked(id);
    if (!e.ok()) return e.status();
    return (*e)->info;
  }
  absl::StatusOr<std::vector<MailboxInfo>> list_public() override {
    const absl::Time now = clock_->now();
    absl::MutexLock lock(&read_mu_);
    return store::select_mailboxes(*reader_, true, now);
  }
  absl::Status remove(std::string_view id) override;
  absl::StatusOr<std::vector<MailboxInfo>> expire(absl::Time now) override;

  absl::StatusOr<uint64_t> append(std::string_view id, Priority priority,
                                  std::string body) override;
  void append_async(std::string_view id, Priority priority, std::string body, AppendDone done,
                    AppendAsync how) override;
  absl::StatusOr<std::vector<uint64_t>> append_all(std::string_view id,
                                                   std::vector<NewMessage> batch) override;
  absl::StatusOr<std::vector<StoredMessage>> read(std::string_view id,
                                                  const LaneRange& range) override;
  absl::StatusOr<bool> erase(std::string_view id, uint64_t seq) override;
  absl::StatusOr<uint64_t> consume_through(std::string_view id, Priority priority,
                                           uint64_t seq) override;
  absl::StatusOr<uint64_t> count(std::string_view id) override {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Entry*> e = find_locked(id);
    if (!e.ok()) return e.status();
    return (*e)->count;
  }
  uint64_t last_seq() const override { return last_seq_.load(); }
  absl::Status settle(std::string_view id, std::string_view group,
                      const std::vector<uint64_t>& seqs) override;
  absl::StatusOr<std::vector<uint64_t>> settled(std::string_view id,
                                                std::string_view group) override;

 private:
  struct Entry {
    MailboxInfo info;
    uint64_t count = 0;  // durable and in-memory messages, including appends being committed
  };
  // An append with its place reserved: the sequence number, and the writer's ticket when the
  // message is durable (null: it is stored in memory already).
  struct Submitted {
    uint64_t seq = 0;
    std::shared_ptr<store::SqliteWriter::Ticket> ticket;
    bool claimed = false;  // the caller commits it (SqliteWriter::commit_claimed)
  };
  absl::StatusOr<Submitted> submit_append(std::string_view id, Priority priority, std::string body,
                                          bool claim_if_idle);
  // Gives back the place of an append whose commit failed.
  void unreserve(std::string_view id);

  // The mailbox, from the cache or (created by another process) the file; NotFound when it
  // does not exist or its TTL ended.
  absl::StatusOr<Entry*> find_locked(std::string_view id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time now_ms() const { return absl::FromUnixMillis(store::to_ms(clock_->now())); }
  // Runs `change` (a write of removed messages) on the writer, then takes `n` off the count.
  // `marks_sql` deletes the settlement marks of what `sql` removes, first, with the same binds.
  absl::StatusOr<uint64_t> remove_durable(std::string_view id, std::string_view marks_sql,
                                          std::string_view sql, Priority priority, uint64_t seq);
  absl::StatusOr<CreateResult> create_in_txn(Db& db, const MailboxSpec& spec, const std::string& id,
                                             absl::Time now);

  store::StoreLock lock_;  // first: released after every connection closed
  const SqliteStoreOptions options_;
  const std::shared_ptr<Clock> clock_;
  std::atomic<uint64_t> last_seq_{0};

  absl::Mutex read_mu_;  // taken after mu_ when both are held
  std::unique_ptr<Db> reader_ ABSL_PT_GUARDED_BY(read_mu_);

  // Serializes create, remove and expire in this process: each runs check-then-change.
  absl::Mutex admin_mu_;
  absl::Mutex mu_;
  std::map<std::string, Entry, std::less<>> mailboxes_ ABSL_GUARDED_BY(mu_);
  store::MemLanes volatile_ ABSL_GUARDED_BY(mu_);  // normal messages kept in memory (M-PRIO-2)
  // Settlement marks of the messages in `volatile_` (M-RECV-4): in memory with them; the marks
  // of durable messages are rows of `group_settled`.
  store::SettleMarks volatile_marks_ ABSL_GUARDED_BY(mu_);

  std::unique_ptr<store::SqliteWriter> writer_;  // destroyed first: it drains its queue
};

absl::StatusOr<SqliteStore::Entry*> SqliteStore::find_locked(std::string_view id) {
  auto it = mailboxes_.find(id);
  if (it == mailboxes_.end()) {
    absl::MutexLock lock(&read_mu_);
    absl::StatusOr<std::optional<MailboxInfo>> row = store::select_mailbox(*reader_, id);
    if (!row.ok()) return row.status();
    if (!row->has_value()) return MailboxNotFoundError(id, "the SQLite store");
    absl::StatusOr<uint64_t> n = store::count_messages(*reader_, id);
    if (!n.ok()) return n.status();
    it = mailboxes_.emplace(std::string(id), Entry{**std::move(row), *n}).first;
  }
  if (it->second.info.expired(clock_->now())) return MailboxNotFoundError(id, "the SQLite store");
  return &it->second;
}

absl::StatusOr<CreateResult> SqliteStore::create(const MailboxSpec& spec) {
  absl::StatusOr<std::string> made = store::mailbox_id(spec);
  if (!made.ok()) return made.status();
  const std::string& id = *made;
  const absl::Time now = now_ms();
  absl::MutexLock admin(&admin_mu_);
  absl::StatusOr<CreateResult> result = absl::InternalError("create did not run");
  absl::Status ran = writer_->run([&](Db& db) -> absl::Status {
    result = create_in_txn(db, spec, id, now);
    return result.status();
  });
  if (!ran.ok()) return ran;
  absl::MutexLock lock(&mu_);
  if (result->created) {
    volatile_.drop(id);  // an expired predecessor's in-memory messages
    volatile_marks_.drop(id);
    mailboxes_.insert_or_assign(id, Entry{result->mailbox, 0});
  }
  return result;
}

// M-BOX-7: creation custody is a BEGIN IMMEDIATE that never waits for another writer.
absl::StatusOr<CreateResult> SqliteStore::create_in_txn(Db& db, const MailboxSpec& spec,
                                                        const std::string& id, absl::Time now) {
  sqlite3_busy_timeout(db.handle(), 0);
  const absl::Status begun = db.exec("BEGIN IMMEDIATE");
  sqlite3_busy_timeout(db.handle(), ms(options_.busy_timeout));
  if (!begun.ok()) {
    return IoFailedError(absl::StrCat(
        "mailbox admission: another writer holds the creation lock on '", db.path().string(), "' (",
        begun.message(), "); nothing was created. Try again (M-BOX-7)"));
  }
  CreateResult result;
  absl::Status s = [&]() -> absl::Status {
    absl::StatusOr<std::optional<MailboxInfo>> existing = store::select_mailbox(db, id);
    if (!existing.ok()) return existing.status();
    if (existing->has_value() && !(*existing)->expired(now)) {
      if (absl::Status c = store::check_same_bounds(**existing, spec); !c.ok()) return c;
      result = CreateResult{.mailbox = **existing, .created = false};
      return absl::OkStatus();
    }
    if (existing->has_value()) {  // its TTL ended and no sweep removed it yet
      if (absl::Status d = store::delete_mailbox(db, id); !d.ok()) return d;
    }
    absl::StatusOr<uint64_t> live = store::count_live_mailboxes(db, now);
    if (!live.ok()) return live.status();
    if (absl::Status c = store::check_mailbox_cap(*live, options_.limits.max_mailboxes); !c.ok()) {
      return c;
    }
    result = CreateResult{.mailbox = store::new_mailbox(spec, id, now), .created = true};
    return store::insert_mailbox(db, result.mailbox);
  }();
  if (s.ok()) s = db.exec("COMMIT");
  if (!s.ok()) {
    (void)db.exec("ROLLBACK");
    return s;
  }
  return result;
}

absl::Status SqliteStore::remove(std::string_view id) {
  absl::MutexLock admin(&admin_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (absl::StatusOr<Entry*> e = find_locked(id); !e.ok()) return e.status();
  }
  const std::string key(id);
  absl::Status s = writer_->run([&](Db& db) {
    return store::in_transaction(db, "BEGIN", [&] { return store::delete_mailbox(db, key); });
  });
  if (!s.ok()) return s;
  absl::MutexLock lock(&mu_);
  volatile_.drop(id);
  volatile_marks_.drop(id);
  if (auto it = mailboxes_.find(id); it != mailboxes_.end()) mailboxes_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<MailboxInfo>> SqliteStore::expire(absl::Time now) {
  absl::MutexLock admin(&admin_mu_);
  std::vector<MailboxInfo> gone;
  absl::Status s = writer_->run([&](Db& db) {
    return store::in_transaction(db, "BEGIN IMMEDIATE", [&]() -> absl::Status {
      absl::StatusOr<std::vector<MailboxInfo>> expired = store::select_expired(db, now);
      if (!expired.ok()) return expired.status();
      for (const MailboxInfo& info : *expired) {
        if (absl::Status d = store::delete_mailbox(db, info.id); !d.ok()) return d;
      }
      gone = *std::move(expired);
      return absl::OkStatus();
    });
  });
  if (!s.ok()) return s;
  absl::MutexLock lock(&mu_);
  for (const MailboxInfo& info : gone) {
    volatile_.drop(info.id);
    volatile_marks_.drop(info.id);
    if (auto it = mailboxes_.find(info.id); it != mailboxes_.end()) mailboxes_.erase(it);
  }
  return gone;
}

absl::StatusOr<SqliteStore::Submitted> SqliteStore::submit_append(std::string_view id,
                                                                  Priority priority,
                                                                  std::string body,
                                                                  bool claim_if_idle) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> e = find_locked(id);
  if (!e.ok()) return e.status();
  if (absl::Status s = store::check_message_fits((*e)->info, (*e)->count, body.size()); !s.ok()) {
    return s;
  }
  ++(*e)->count;  // reserved now, so concurrent appends cannot pass maxMessages (M-BOX-6)
  const uint64_t seq = last_seq_.fetch_add(1) + 1;
  const int64_t stored_ms = store::to_ms(clock_->now());
  if (!store::is_durable((*e)->info, priority)) {
    volatile_.append(id, StoredMessage{.seq = seq,
                                       .priority = priority,
                                       .stored_at = absl::FromUnixMillis(stored_ms),
                                       .body = std::move(body)});
    return Submitted{seq, nullptr};
  }
  // Submitted under mu_, so the writer's queue is in sequence order (a claimed append is
  // committed before anything submitted after it: the writer waits while it is committing).
  Submitted sub{seq, nullptr, false};
  sub.ticket = writer_->submit({.mailbox = std::string(id),
                                .priority = priority,
                                .seq = seq,
                                .stored_ms = stored_ms,
                                .body = std::move(body)},
                               claim_if_idle, &sub.claimed);
  return sub;
}

void SqliteStore::unreserve(std::string_view id) {
  absl::MutexLock lock(&mu_);
  if (auto it = mailboxes_.find(id); it != mailboxes_.end()) --it->second.count;
}

absl::StatusOr<uint64_t> SqliteStore::append(std::string_view id, Priority priority,
                                             std::string body) {
  // The caller waits anyway: it commits itself when the writer is idle (sqlite_writer.h).
  absl::StatusOr<Submitted> sub = submit_append(id, priority, std::move(body), true);
  if (!sub.ok()) return sub.status();
  if (sub->ticket == nullptr) return sub->seq;
  if (sub->claimed) writer_->commit_claimed();
  if (absl::Status s = sub->ticket->wait(); !s.ok()) {
    unreserve(id);
    return s;
  }
  return sub->seq;
}

void SqliteStore::append_async(std::string_view id, Priority priority, std::string body,
                               AppendDone done, AppendAsync how) {
  // Only `os` commits here: an fsync (`disk`) would hold the caller's thread for milliseconds.
  const bool claim = how.commit_here_if_idle && options_.durability == Durability::kOs;
  absl::StatusOr<Submitted> sub = submit_append(id, priority, std::move(body), claim);
  if (!sub.ok()) return std::move(done)(sub.status());
  if (sub->ticket == nullptr) return std::move(done)(sub->seq);
  // The writer completes every ticket before the store goes away (~SqliteWriter), so `this`
  // outlives the continuation.
  sub->ticket->then(
      [this, id = std::string(id), seq = sub->seq, done = std::move(done)](absl::Status s) mutable {
        if (!s.ok()) {
          unreserve(id);
          return std::move(done)(std::move(s));
        }
        std::move(done)(seq);
      });
  if (sub->claimed) writer_->commit_claimed();
}

// All or nothing: places and sequence numbers are reserved for the whole batch under mu_ (so no
// append interleaves), the in-memory ones stored at once, the durable ones inserted by one
// transaction on the writer; when it fails, the in-memory ones are taken back out.
absl::StatusOr<std::vector<uint64_t>> SqliteStore::append_all(std::string_view id,
                                                              std::vector<NewMessage> batch) {
  std::vector<uint64_t> seqs;
  std::vector<uint64_t> in_memory;
  std::vector<store::SqliteWriter::Append> rows;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Entry*> e = find_locked(id);
    if (!e.ok()) return e.status();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (absl::Status s =
              store::check_message_fits((*e)->info, (*e)->count + i, batch[i].body.size());
          !s.ok()) {
        return s;
      }
    }
    (*e)->count += batch.size();
    const int64_t stored_ms = store::to_ms(clock_->now());
    for (NewMessage& m : batch) {
      const uint64_t seq = last_seq_.fetch_add(1) + 1;
      seqs.push_back(seq);
      if (!store::is_durable((*e)->info, m.priority)) {
        in_memory.push_back(seq);
        volatile_.append(id, StoredMessage{.seq = seq,
                                           .priority = m.priority,
                                           .stored_at = absl::FromUnixMillis(stored_ms),
                                           .body = std::move(m.body)});
      } else {
        rows.push_back({.mailbox = std::string(id),
                        .priority = m.priority,
                        .seq = seq,
                        .stored_ms = stored_ms,
                        .body = std::move(m.body)});
      }
    }
  }
  if (rows.empty()) return seqs;
  const uint64_t high = seqs.back();
  absl::Status s = writer_->run([&](Db& db) {
    return store::in_transaction(db, "BEGIN", [&]() -> absl::Status {
      for (const store::SqliteWriter::Append& row : rows) {
        // The cached statement, reset for each row.
        absl::StatusOr<store::Stmt*> insert = db.prepare(
            "INSERT INTO message (seq, mailbox, priority, stored_ms, body) VALUES (?, ?, ?, ?, ?)");
        if (!insert.ok()) return insert.status();
        if (absl::Status r = (*insert)
                                 ->bind(1, static_cast<int64_t>(row.seq))
                                 .bind_text(2, row.mailbox)
                                 .bind(3, static_cast<int64_t>(row.priority))
                                 .bind(4, row.stored_ms)
                                 .bind_blob(5, row.body)
                                 .run();
            !r.ok()) {
          return r;
        }
      }
      return store::keep_high_water(db, high + 1);  // in-memory ones may hold the top seqs
    });
  });
  if (s.ok()) return seqs;
  absl::MutexLock lock(&mu_);
  for (uint64_t seq : in_memory) volatile_.erase(id, seq);
  if (auto it = mailboxes_.find(id); it != mailboxes_.end()) it->second.count -= batch.size();
  return s;
}

absl::StatusOr<std::vector<StoredMessage>> SqliteStore::read(std::string_view id,
                                                             const LaneRange& range) {
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Entry*> e = find_locked(id);
    if (!e.ok()) return e.status();
    if (!store::is_durable((*e)->info, range.priority)) return volatile_.read(id, range);
  }
  absl::MutexLock lock(&read_mu_);
  return store::select_lane(*reader_, id, range);
}

absl::StatusOr<bool> SqliteStore::erase(std::string_view id, uint64_t seq) {
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Entry*> e = find_locked(id);
    if (!e.ok()) return e.status();
    if (volatile_.erase(id, seq)) {
      volatile_marks_.forget(id, seq);
      --(*e)->count;
      return true;
    }
  }
  absl::StatusOr<uint64_t> n = remove_durable(
      id,
      "DELETE FROM group_settled WHERE mailbox = ?1 AND seq IN (SELECT seq FROM message WHERE "
      "mailbox = ?1 AND seq = ?2 AND priority >= ?3)",
      "DELETE FROM message WHERE mailbox = ?1 AND seq = ?2 AND priority >= ?3", Priority::kNormal,
      seq);
  if (!n.ok()) return n.status();
  return *n == 1;
}

absl::StatusOr<uint64_t> SqliteStore::consume_through(std::string_view id, Priority priority,
                                                      uint64_t seq) {
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Entry*> e = find_locked(id);
    if (!e.ok()) return e.status();
    if (!store::is_durable((*e)->info, priority)) {
      std::vector<uint64_t> removed;
      const uint64_t n = volatile_.consume_through(id, priority, seq, &removed);
      for (uint64_t s : removed) volatile_marks_.forget(id, s);
      (*e)->count -= n;
      return n;
    }
  }
  // A range delete over the lane index, not one DELETE per message.
  return remove_durable(
      id,
      "DELETE FROM group_settled WHERE mailbox = ?1 AND seq IN (SELECT seq FROM message WHERE "
      "mailbox = ?1 AND seq <= ?2 AND priority = ?3)",
      "DELETE FROM message WHERE mailbox = ?1 AND seq <= ?2 AND priority = ?3", priority, seq);
}

// M-RECV-4: marks of durable messages are rows, written on the writer in one transaction; marks
// of messages kept in memory stay in memory. The group cap counts both.
absl::Status SqliteStore::settle(std::string_view id, std::string_view group,
                                 const std::vector<uint64_t>& seqs) {
  if (absl::Status s = check_queue_group(group); !s.ok()) return s;
  std::vector<uint64_t> in_memory;
  std::vector<uint64_t> on_disk;
  std::set<std::string, std::less<>> memory_groups;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Entry*> e = find_locked(id);
    if (!e.ok()) return e.status();
    for (uint64_t seq : seqs) (volatile_.contains(id, seq) ? in_memory : on_disk).push_back(seq);
    memory_groups = volatile_marks_.groups(id);
  }
  const size_t max_groups = options_.limits.max_settling_groups;
  const std::string key(id);
  const std::string name(group);
  auto may_settle = [&](Db& db) -> absl::Status {
    absl::StatusOr<bool> known = store::group_has_marks(db, key, name);
    if (!known.ok()) return known.status();
    if (*known || memory_groups.contains(name)) return absl::OkStatus();
    absl::StatusOr<std::set<std::string, std::less<>>> groups =
        store::select_settling_groups(db, key);
    if (!groups.ok()) return groups.status();
    groups->insert(memory_groups.begin(), memory_groups.end());
    if (groups->size() >= max_groups) return store::settling_groups_exhausted(key, name, max_groups);
    return absl::OkStatus();
  };
  if (on_disk.empty()) {  // nothing to write: the check reads only
    absl::MutexLock lock(&read_mu_);
    if (absl::Status c = may_settle(*reader_); !c.ok()) return c;
  }
  absl::Status s =
      on_disk.empty()
          ? absl::OkStatus()
          : writer_->run([&](Db& db) {
              return store::in_transaction(db, "BEGIN", [&]() -> absl::Status {
                if (absl::Status c = may_settle(db); !c.ok()) return c;
                return store::insert_marks(db, key, name, on_disk).status();
              });
            });
  if (!s.ok() || in_memory.empty()) return s;
  absl::MutexLock lock(&mu_);
  return volatile_marks_.settle(id, group, in_memory, std::numeric_limits<size_t>::max(),
                                [&](uint64_t seq) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                  return volatile_.contains(id, seq);
                                });
}

absl::StatusOr<std::vector<uint64_t>> SqliteStore::settled(std::string_view id,
                                                           std::string_view group) {
  std::vector<uint64_t> in_memory;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Entry*> e = find_locked(id);
    if (!e.ok()) return e.status();
    in_memory = volatile_marks_.settled(id, group);
  }
  absl::StatusOr<std::vector<uint64_t>> on_disk = [&] {
    absl::MutexLock lock(&read_mu_);
    return store::select_marks(*reader_, id, group);
  }();
  if (!on_disk.ok() || in_memory.empty()) return on_disk;
  std::vector<uint64_t> all;
  std::merge(on_disk->begin(), on_disk->end(), in_memory.begin(), in_memory.end(),
             std::back_inserter(all));
  return all;
}

absl::StatusOr<uint64_t> SqliteStore::remove_durable(std::string_view id,
                                                     std::string_view marks_sql,
                                                     std::string_view sql, Priority priority,
                                                     uint64_t seq) {
  uint64_t removed = 0;
  const std::string key(id);
  absl::Status s = writer_->run([&](Db& db) {
    return store::in_transaction(db, "BEGIN", [&]() -> absl::Status {
      absl::StatusOr<store::Stmt*> marks = db.prepare(marks_sql);
      if (!marks.ok()) return marks.status();
      if (absl::Status m = (*marks)
                               ->bind_text(1, key)
                               .bind(2, static_cast<int64_t>(seq))
                               .bind(3, static_cast<int64_t>(priority))
                               .run();
          !m.ok()) {
        return m;
      }
      absl::StatusOr<store::Stmt*> del = db.prepare(sql);
      if (!del.ok()) return del.status();
      absl::Status r = (*del)
                           ->bind_text(1, key)
                           .bind(2, static_cast<int64_t>(seq))
                           .bind(3, static_cast<int64_t>(priority))
                           .run();
      removed = static_cast<uint64_t>(db.changes());
      if (!r.ok()) return r;
      return store::keep_high_water(db, seq + 1);
    });
  });
  if (!s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (auto it = mailboxes_.find(id); it != mailboxes_.end()) it->second.count -= removed;
  return removed;
}

// Opens one connection to `path` with the store's pragmas.
absl::StatusOr<std::unique_ptr<Db>> connect(const std::filesystem::path& path,
                                            const SqliteStoreOptions& options) {
  absl::StatusOr<std::unique_ptr<Db>> db = Db::open(path, options.vfs);
  if (!db.ok()) return db.status();
  sqlite3_busy_timeout((*db)->handle(), ms(options.busy_timeout));
  const std::string pragmas = absl::StrCat(
      "PRAGMA synchronous = ", options.durability == Durability::kDisk ? "FULL" : "NORMAL",
      "; PRAGMA journal_size_limit = ", options.journal_size_limit, ";");
  if (absl::Status s = (*db)->exec(pragmas); !s.ok()) return s;
  return db;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MailStore>> SqliteMailStore::open(const std::filesystem::path& path,
                                                                 SqliteStoreOptions options) {
  // M-STORE-1: refuse what is not a regular file before SQLite opens (or creates) anything.
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::path p = path;
    p += suffix;
    if (absl::Status s = store::check_store_file(p); !s.ok()) return s;
  }
  // Taken before any connection exists and released after the last one closed (StoreLock).
  absl::StatusOr<store::StoreLock> lock = store::StoreLock::take(path, options.exclusive);
  if (!lock.ok()) return lock.status();
  absl::StatusOr<std::unique_ptr<Db>> writer = connect(path, options);
  if (!writer.ok()) return writer.status();
  // Read before anything is written: a file that is not a database is refused unchanged.
  if (absl::Status s = (*writer)->exec("SELECT count(*) FROM sqlite_master"); !s.ok()) return s;
  if (absl::Status s = (*writer)->exec("PRAGMA journal_mode = WAL"); !s.ok()) return s;
  if (absl::Status s = store::migrate(**writer); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Db>> reader = connect(path, options);
  if (!reader.ok()) return reader.status();
  absl::StatusOr<std::unique_ptr<Db>> checkpointer = connect(path, options);
  if (!checkpointer.ok()) return checkpointer.status();
  auto s = std::make_unique<SqliteStore>(*std::move(lock), std::move(options), *std::move(reader));
  if (absl::Status started = s->start(*std::move(writer), *std::move(checkpointer));
      !started.ok()) {
    return started;
  }
  return s;
}

}  // namespace postal::mail
