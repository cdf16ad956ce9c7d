// sqlite_mail_store.h — `SqliteMailStore`: a `MailStore` in one SQLite file.
//
// One file per store, in WAL mode, with a versioned schema (`PRAGMA user_version`) migrated
// forward on open; a file written by a newer schema is refused. The process that opens the store
// serves it: it owns the one writer connection, driven by one writer thread that group-commits —
// it drains every append waiting for it into one transaction and acknowledges them after the
// commit. Checkpoints are passive and run on a checkpointer thread with a connection of its own,
// off the commit path; `journal_size_limit` bounds the WAL file left behind.
//
// Durability tiers (named so they cannot be confused with priorities):
//   `os`   — `synchronous=NORMAL`: an acknowledged message survives a crash of the process (the
//            write was handed to the OS, like JetStream's sync-ack) but the last commits may be
//            lost when the machine loses power.
//   `disk` — `synchronous=FULL`: the WAL is fsynced before the acknowledgement; an acknowledged
//            message survives power loss.
//
// Layout: messages live in a rowid table keyed by a store-wide sequence number, so appends go to
// the end of the b-tree; an index on (mailbox, priority, seq) makes each (mailbox, priority) an
// append-ordered lane, read in order and consumed by range deletes. Normal-priority messages of
// a mailbox not created `durable_all` stay in memory (M-PRIO-2) and are gone after a restart.
//
// Admission (M-BOX-5…7): creating a mailbox is a `BEGIN IMMEDIATE` transaction on the store file
// that does not wait: when another connection (another process) holds the write lock, create
// fails at once with `IoFailed`. Appends do wait for the lock (up to `busy_timeout`).
//
// Store safety (M-STORE-1, M-STORE-2): the store file and its `-wal`/`-shm` companions must be
// regular files or absent; a symlink, FIFO, socket or directory is refused before SQLite touches
// it, without blocking (`O_NOFOLLOW | O_NONBLOCK`, then `fstat`). A file that is not a SQLite
// database is refused unchanged. Every failed operation leaves the store as it was.
//
// One process serves a store's messages: other processes may create mailboxes on the same file
// (admission is safe across processes) but appends, reads and removals are only coherent through
// the serving process.
#pragma once

#include <filesystem>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/clock.h"
#include "postal/mail/mail_store.h"

namespace postal::mail {

enum class Durability { kOs, kDisk };

std::string_view to_string(Durability durability);  // "os" | "disk"

struct SqliteStoreOptions {
  Durability durability = Durability::kOs;
  std::shared_ptr<Clock> clock{};  // null: a SystemClock
  StoreLimits limits{};
  // How long an append waits for another connection's write lock (never used by create).
  absl::Duration busy_timeout = absl::Seconds(5);
  // A background passive checkpoint is requested once the WAL holds this many pages (and again
  // each half of it further); past twice this the committing thread catches up itself, so the
  // WAL starts over.
  int checkpoint_pages = 1000;
  // The WAL file is truncated to at most this size after a checkpoint reset it.
  int64_t journal_size_limit = 64 << 20;
  // The SQLite VFS to open the file with; empty: the default (tests pass a crash simulator).
  std::string vfs{};
  // Be the file's only user (an offline import or export): open fails with IoFailed when
  // another process has the store open, and other opens fail while this one lives. Otherwise
  // the store shares the file with other processes' stores (admission across processes).
  bool exclusive = false;
};

class SqliteMailStore {
 public:
  // Opens (or creates) the store at `path`; the folder must exist.
  static absl::StatusOr<std::unique_ptr<MailStore>> open(const std::filesystem::path& path,
                                                         SqliteStoreOptions options = {});
  // The schema version this build writes.
  static int schema_version();
};

}  // namespace postal::mail
