#include "sqlite_writer.h"

#include <sqlite3.h>

#include <algorithm>

#include "postal/runtime/logger.h"
#include "postal/runtime/thread_name.h"
#include "sqlite_mailbox_rows.h"

namespace postal::mail::store {

absl::Status SqliteWriter::Ticket::wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
  return status_;
}

void SqliteWriter::Ticket::then(absl::AnyInvocable<void(absl::Status) &&> fn) {
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (!done_) {
      then_ = std::move(fn);
      return;
    }
    status = status_;
  }
  std::move(fn)(std::move(status));
}

void SqliteWriter::Ticket::complete(absl::Status status) {
  absl::AnyInvocable<void(absl::Status) &&> then;
  {
    absl::MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
    then = std::move(then_);
  }
  if (then) std::move(then)(std::move(status));  // outside mu_: it may take other locks
}

SqliteWriter::SqliteWriter(std::unique_ptr<Db> db, std::unique_ptr<Db> checkpointer,
                           const std::atomic<uint64_t>* high_water, int checkpoint_pages)
    : db_(std::move(db)),
      checkpointer_(std::move(checkpointer)),
      high_water_(high_water),
      checkpoint_pages_(checkpoint_pages) {
  // Replaces SQLite's own auto-checkpoint, which would run on the commit path.
  sqlite3_wal_hook(db_->handle(), &SqliteWriter::on_wal_commit, this);
  writer_ = std::thread([this] {
    runtime::name_this_thread("postal-sqlwrite");
    write_loop();
  });
  checkpoint_thread_ = std::thread([this] {
    runtime::name_this_thread("postal-sqlckpt");
    checkpoint_loop();
  });
}

SqliteWriter::~SqliteWriter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  writer_.join();
  checkpoint_thread_.join();
  sqlite3_wal_hook(db_->handle(), nullptr, nullptr);
}

std::shared_ptr<SqliteWriter::Ticket> SqliteWriter::submit(Append append, bool claim_if_idle,
                                                           bool* claimed) {
  Job job{.work = std::move(append), .ticket = std::make_shared<Ticket>()};
  std::shared_ptr<Ticket> ticket = job.ticket;
  absl::MutexLock lock(&mu_);
  if (claim_if_idle && !busy_ && queue_.empty() && !stopping_) {
    busy_ = true;
    claimed_.push_back(std::move(job));
    *claimed = true;
  } else {
    queue_.push_back(std::move(job));
  }
  return ticket;
}

void SqliteWriter::commit_claimed() {
  std::deque<Job> jobs;
  {
    absl::MutexLock lock(&mu_);
    jobs.swap(claimed_);
  }
  process(jobs);
  catch_up_checkpoint();
  absl::MutexLock lock(&mu_);
  busy_ = false;  // the writer thread takes what queued meanwhile
}

absl::Status SqliteWriter::run(absl::AnyInvocable<absl::Status(Db&) &&> txn) {
  std::shared_ptr<Ticket> ticket;
  {
    absl::MutexLock lock(&mu_);
    if (busy_ || !queue_.empty() || stopping_) {
      ticket = std::make_shared<Ticket>();
      queue_.push_back(Job{.work = std::move(txn), .ticket = ticket});
    } else {
      busy_ = true;  // idle: run it here, the caller would only wait
    }
  }
  if (ticket) return ticket->wait();
  absl::Status s = std::move(txn)(*db_);
  catch_up_checkpoint();
  absl::MutexLock lock(&mu_);
  busy_ = false;
  return s;
}

void SqliteWriter::write_loop() {
  while (true) {
    std::deque<Job> jobs;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](SqliteWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return !w->busy_ && (w->stopping_ || !w->queue_.empty());
          },
          this));
      if (queue_.empty()) return;  // stopping, and everything queued was written
      jobs.swap(queue_);
      busy_ = true;
    }
    process(jobs);
    catch_up_checkpoint();
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

void SqliteWriter::process(std::deque<Job>& jobs) {
  // Runs of consecutive appends commit together; other writes keep their place in the order.
  size_t i = 0;
  while (i < jobs.size()) {
    if (std::holds_alternative<Append>(jobs[i].work)) {
      size_t end = i;
      while (end < jobs.size() && std::holds_alternative<Append>(jobs[end].work)) ++end;
      commit_appends(jobs, i, end);
      i = end;
    } else {
      auto& txn = std::get<1>(jobs[i].work);
      jobs[i].ticket->complete(std::move(txn)(*db_));
      ++i;
    }
  }
}

absl::Status SqliteWriter::insert_appends(std::deque<Job>& jobs, size_t begin, size_t end) {
  uint64_t highest = 0;
  for (size_t i = begin; i < end; ++i) {
    const Append& a = std::get<Append>(jobs[i].work);
    absl::StatusOr<Stmt*> insert = db_->prepare(
        "INSERT INTO message (seq, mailbox, priority, stored_ms, body) VALUES (?, ?, ?, ?, ?)");
    if (!insert.ok()) return insert.status();
    absl::Status s = (*insert)
                         ->bind(1, static_cast<int64_t>(a.seq))
                         .bind_text(2, a.mailbox)
                         .bind(3, static_cast<int64_t>(a.priority))
                         .bind(4, a.stored_ms)
                         .bind_blob(5, a.body)
                         .run();
    if (!s.ok()) return s;
    highest = std::max(highest, a.seq);
  }
  // The rows record the store's high water themselves (and every delete records what it
  // deletes, sqlite_mailbox_rows.h); only seqs handed out above them — to in-memory messages —
  // need the meta row, which would otherwise cost every commit one more page.
  const uint64_t high = high_water_->load();
  if (high <= highest) return absl::OkStatus();
  return keep_high_water(*db_, high + 1);
}

void SqliteWriter::commit_appends(std::deque<Job>& jobs, size_t begin, size_t end) {
  const absl::Status s =
      in_transaction(*db_, "BEGIN", [&] { return insert_appends(jobs, begin, end); });
  if (s.ok()) commits_.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = begin; i < end; ++i) jobs[i].ticket->complete(s);
}

int SqliteWriter::on_wal_commit(void* self, struct sqlite3*, const char*, int pages) {
  auto* w = static_cast<SqliteWriter*>(self);
  if (pages < w->asked_at_pages_) w->asked_at_pages_ = 0;  // the WAL started over
  if (pages >= w->checkpoint_pages_ &&
      pages >= w->asked_at_pages_ + std::max(1, w->checkpoint_pages_ / 2)) {
    w->asked_at_pages_ = pages;
    absl::MutexLock lock(&w->mu_);
    w->checkpoint_wanted_ = true;
  }
  w->wal_pages_ = pages;
  if (pages >= 2 * w->checkpoint_pages_ && !w->catch_up_wanted_) {
    // The background checkpointer first copies and syncs what is there (catch_up_checkpoint).
    w->catch_up_wanted_ = true;
    w->primed_.store(false);
    absl::MutexLock lock(&w->mu_);
    w->checkpoint_wanted_ = true;
  }
  return SQLITE_OK;
}

void SqliteWriter::catch_up_checkpoint() {
  if (!catch_up_wanted_) return;
  // Copying a WAL of 2 × checkpoint_pages here held this thread, and every commit waiting for
  // it, ~9 ms (a post batch's answer waited ~1 ms on average). So a background pass goes first
  // — it copies the bulk off the commit path — and this catch-up copies only the commits made
  // since (~5 ms: the database file's sync is most of it). Past 4 × checkpoint_pages it does not
  // wait for the background any longer.
  if (!primed_.load() && wal_pages_ < 4 * checkpoint_pages_) return;
  int log = 0;
  int done = 0;
  absl::MutexLock one_at_a_time(&checkpoint_mu_);
  const int rc = sqlite3_wal_checkpoint_v2(db_->handle(), nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                           &log, &done);
  // A reader held it back (or another process checkpoints): again after the next commit, and
  // after the background checkpointer's next pass.
  catch_up_wanted_ = rc != SQLITE_OK || done < log;
  if (catch_up_wanted_) {
    primed_.store(false);
    absl::MutexLock lock(&mu_);
    checkpoint_wanted_ = true;
  }
  if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
    runtime::Logger::mail().warn(db_->error(rc, "catch-up checkpoint").ToString());
  }
}

void SqliteWriter::checkpoint_loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](SqliteWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return w->stopping_ || w->checkpoint_wanted_;
          },
          this));
      if (stopping_) return;
      checkpoint_wanted_ = false;
    }
    int log = 0;
    int done = 0;
    absl::MutexLock one_at_a_time(&checkpoint_mu_);
    const int rc = sqlite3_wal_checkpoint_v2(checkpointer_->handle(), nullptr,
                                             SQLITE_CHECKPOINT_PASSIVE, &log, &done);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
      runtime::Logger::mail().warn(checkpointer_->error(rc, "passive checkpoint").ToString());
    }
    primed_.store(true);
  }
}

}  // namespace postal::mail::store
