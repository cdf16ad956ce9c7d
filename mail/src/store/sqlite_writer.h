// sqlite_writer.h — `SqliteWriter`: the one thread that writes a SQLite store, group-committing.
//
// Appends are queued; the writer thread drains every append waiting when it wakes into one
// transaction, commits it (at the connection's `synchronous` level: with `disk` the WAL is
// fsynced by the commit) and only then completes each append's `Ticket`. Other writes
// (`run`) execute on the same thread, in queue order, each as its own transaction, so the store
// has exactly one writing connection in this process and nothing contends for it here.
//
// Inline commits: a caller that would only wait (a synchronous append, `run`) or that asks for it
// (an append from a handler with nothing queued behind it) commits on its own thread when the
// writer has nothing queued or running — the store's writer and the caller's wake-up are what a
// lone publish spends most of its time on. While it commits, later submissions queue for the
// writer thread, which starts once it is done, so commits stay in sequence order.
//
// After a commit the WAL hook counts the WAL's pages; past `checkpoint_pages` (and again each
// half of it further) the checkpointer thread runs a passive checkpoint on a connection of its
// own, off the commit path. Such a checkpoint chases the writes: under steady commits it never
// catches up with the WAL's end, and SQLite starts the WAL over only when a write begins on a
// fully checkpointed WAL — so past twice `checkpoint_pages` the committing thread runs one
// passive checkpoint itself between two transactions (nothing is written meanwhile: it catches
// up), and the next commit starts the WAL over. Without that the WAL grew without end and every
// commit asked for a checkpoint (two fsyncs each, on `os` too). The catch-up first asks for a
// background pass and waits for it to end (without holding up commits), so it copies only what
// was committed since — it held commits ~9 ms when it copied the whole WAL, ~5 ms now — unless
// the WAL reached four times `checkpoint_pages`. The two checkpoints never run at once: the
// catch-up waits out a background one rather than failing busy and trying again.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <variant>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "postal/mail/priority.h"
#include "sqlite_db.h"

namespace postal::mail::store {

class SqliteWriter {
 public:
  struct Append {
    std::string mailbox;
    Priority priority;
    uint64_t seq;
    int64_t stored_ms;
    std::string body;
  };

  // Completed once the append's transaction committed (or failed).
  class Ticket {
   public:
    absl::Status wait();
    // Runs `fn` with the status once the ticket completes: on the writer thread, or at once on
    // the caller's when it has completed already. At most one continuation per ticket.
    void then(absl::AnyInvocable<void(absl::Status) &&> fn);

   private:
    friend class SqliteWriter;
    void complete(absl::Status status);
    absl::Mutex mu_;
    bool done_ ABSL_GUARDED_BY(mu_) = false;
    absl::Status status_ ABSL_GUARDED_BY(mu_);
    absl::AnyInvocable<void(absl::Status) &&> then_ ABSL_GUARDED_BY(mu_);
  };

  // `db` is the writer connection; `checkpointer` a second connection to the same file.
  // `high_water` is the store's highest sequence number; a commit persists it when it is above
  // the seqs the commit inserts (in-memory messages took the ones between).
  SqliteWriter(std::unique_ptr<Db> db, std::unique_ptr<Db> checkpointer,
               const std::atomic<uint64_t>* high_water, int checkpoint_pages);
  // Completes what is queued, then stops both threads.
  ~SqliteWriter();
  SqliteWriter(const SqliteWriter&) = delete;
  SqliteWriter& operator=(const SqliteWriter&) = delete;

  // Queues `append`. With `claim_if_idle`, when nothing is queued or committing the append is
  // claimed for the caller instead (`*claimed` is set): the caller must then call
  // commit_claimed() — outside its own locks — which commits it on the calling thread.
  std::shared_ptr<Ticket> submit(Append append, bool claim_if_idle = false,
                                 bool* claimed = nullptr);
  // Commits the append submit() claimed, on this thread; its ticket completes here.
  void commit_claimed();
  // Runs `txn` and waits for its status: on this thread when the writer is idle, else on the
  // writer thread in queue order. `txn` opens its own transaction.
  absl::Status run(absl::AnyInvocable<absl::Status(Db&) &&> txn);

  // Commits so far (tests and benchmarks read it to see group commit at work).
  uint64_t commits() const { return commits_.load(std::memory_order_relaxed); }

 private:
  struct Job {
    std::variant<Append, absl::AnyInvocable<absl::Status(Db&) &&>> work;
    std::shared_ptr<Ticket> ticket;
  };
  void write_loop();
  // Executes `jobs` in order (runs of appends commit together). Needs busy_ set by the caller.
  void process(std::deque<Job>& jobs);
  // Past twice checkpoint_pages: a checkpoint on the writer connection, between transactions,
  // so the next commit restarts the WAL. Called by the committing thread (busy_ held).
  void catch_up_checkpoint();
  void checkpoint_loop();
  // Commits `jobs[begin, end)` (all appends) in one transaction; completes their tickets.
  void commit_appends(std::deque<Job>& jobs, size_t begin, size_t end);
  absl::Status insert_appends(std::deque<Job>& jobs, size_t begin, size_t end);
  static int on_wal_commit(void* self, struct sqlite3* db, const char* name, int pages);

  std::unique_ptr<Db> db_;
  std::unique_ptr<Db> checkpointer_;
  const std::atomic<uint64_t>* high_water_;
  const int checkpoint_pages_;
  std::atomic<uint64_t> commits_{0};
  // Touched only by the committing thread (whoever holds busy_).
  int asked_at_pages_ = 0;     // the WAL's size when a background checkpoint was last asked for
  bool catch_up_wanted_ = false;
  int wal_pages_ = 0;  // the WAL's size at the last commit
  // A background checkpoint ran since the catch-up was wanted (catch_up_checkpoint).
  std::atomic<bool> primed_{false};
  // One checkpoint at a time: the catch-up waits out a background checkpoint in progress rather
  // than failing busy on its lock (under load a preempted background checkpoint held it through
  // many commits, and the WAL grew past every bound).
  absl::Mutex checkpoint_mu_;

  absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // a thread (the writer or a caller) is committing
  std::deque<Job> claimed_ ABSL_GUARDED_BY(mu_);  // the append a caller claimed
  bool checkpoint_wanted_ ABSL_GUARDED_BY(mu_) = false;

  std::thread writer_;
  std::thread checkpoint_thread_;
};

}  // namespace postal::mail::store
