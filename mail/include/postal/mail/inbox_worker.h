// inbox_worker.h — `InboxWorker`: claims inbox records and runs their handlers, each handler's
// writes committing with the record's completion (M-INBOX-3).
//
// Statuses: PENDING → PROCESSING → COMPLETED; a failed attempt → RETRYABLE (after a backoff)
// or DEAD (permanent error, attempt budget spent, or an event type / schema version the
// consumer's handler does not support). An operator moves DEAD back (`Inbox::retry_dead`).
//
// One `run_once()` is two transactions:
//   1. claim — BEGIN IMMEDIATE, short: up to `batch` ready records of the owned consumers
//      become PROCESSING with a fresh random claim token (one per claim), a lease ending at
//      now + `lease`, and one more attempt. Ready, in the order they are taken: PROCESSING whose
//      lease ended (a crashed worker's), RETRYABLE whose backoff ended, then PENDING — oldest
//      first within each, one UPDATE … RETURNING per (consumer, status) on the `inbox_ready`
//      index; with several consumers, each claim starts with the next one in turn. A
//      lease-expired record whose budget is spent goes DEAD here instead. The batch is handled
//      in acceptance (id) order.
//   2. process — BEGIN IMMEDIATE, one group transaction: per claimed record a SAVEPOINT, the
//      handler (it writes through `context.tx`), then the completion UPDATE guarded by the claim
//      token and the lease (`claim_token = ? AND next_attempt_ms >= now`). When the guard
//      matches no row — the lease ended, or another worker took the record over — the savepoint
//      is rolled back: the handler's writes go with it (StaleClaim). A failed handler's writes
//      are rolled back too, then its RETRYABLE/DEAD outcome is written under the same guard.
//      COMMIT makes every record's writes and outcome durable at once; a crash before it (kill
//      -9 inside a handler) leaves neither writes nor completion, and the lease brings the record
//      back.
// SQLite has one write lock per file, so handlers writing in `context.tx` serialize across
// workers and processes whatever is done; the group transaction pays for the lock, the commit
// and the fsync (`disk`) once per batch instead of once per record. Keep `batch` × handler time
// well inside `lease`, or the later records of a batch go stale.
//
// Deadline and cancellation: C++ cannot be preempted, so both are cooperative and enforced at
// the commit. `context.deadline` is the earlier of the lease's end and start + `handler_timeout`;
// a handler returning after it has its commit refused (rolled back, RETRYABLE). `cancel()` sets
// `context.cancelled()`; a handler returning while it is set is rolled back and RETRYABLE, and no
// further record of the batch starts.
//
// Ownership: the worker owns `options.consumers` (empty: every consumer it has a handler for).
// `create` fails when an owned consumer has no handler, when two registrations name one
// consumer, or when the inbox declares consumers and an owned one is not among them. Claims,
// lease recovery and exhausted-budget handling touch owned consumers only.
//
// Handler errors: OK completes; `InboxPermanentError` (inbox_errors.h) goes DEAD at once; any
// other error (including a thrown exception) is retried while attempts remain.
//
// Thread-safety: one worker is driven by one thread at a time; run several workers (each has its
// own connection) for parallelism. `cancel()` may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/inbox.h"
#include "postal/mail/inbox_tx.h"

namespace postal::mail {

struct HandlerContext {
  InboxTx& tx;
  const InboxRecord& record;  // identity, event type, schema version, metadata, attempts
  int64_t attempt = 1;        // 1 on the first attempt
  absl::Time deadline;        // past it the commit is refused
  const std::atomic<bool>* cancel_flag = nullptr;
  bool cancelled() const { return cancel_flag != nullptr && cancel_flag->load(); }
};

// `payload` is the canonical JSON the inbox stored.
using InboxHandler = absl::AnyInvocable<absl::Status(std::string_view payload, HandlerContext&)>;

struct EventSchema {
  std::string event_type{};
  int64_t schema_version = 1;
  bool operator==(const EventSchema&) const = default;
};

struct HandlerRegistration {
  std::string consumer{};
  std::vector<EventSchema> supports{};  // what the handler understands; anything else goes DEAD
  InboxHandler handler{};
};

struct InboxWorkerOptions {
  std::vector<std::string> consumers{};  // owned; empty: every registered handler's consumer
  int batch = 16;
  absl::Duration lease = absl::Seconds(30);
  absl::Duration handler_timeout = absl::Seconds(10);
  int64_t max_attempts = 5;
  absl::Duration backoff_base = absl::Seconds(1);  // attempt n waits base × 2^(n-1) …
  absl::Duration backoff_max = absl::Minutes(5);   // … at most this
};

// One claimed record: what `claim` hands to `process`.
struct InboxClaim {
  InboxRecord record{};
  std::string token{};
  absl::Time lease_until{};
};

struct ProcessResult {
  int64_t completed = 0;
  int64_t retryable = 0;
  int64_t dead = 0;
  int64_t stale = 0;      // commit refused: the claim was no longer ours (StaleClaim)
  int64_t cancelled = 0;  // claims left unstarted or rolled back because of cancel()
};

class InboxWorker {
 public:
  static absl::StatusOr<std::unique_ptr<InboxWorker>> create(
      Inbox& inbox, std::vector<HandlerRegistration> handlers, InboxWorkerOptions options = {});
  ~InboxWorker();
  InboxWorker(const InboxWorker&) = delete;
  InboxWorker& operator=(const InboxWorker&) = delete;

  // Transaction 1: claims up to `batch` ready records (possibly none).
  absl::StatusOr<std::vector<InboxClaim>> claim();
  // Transaction 2: runs the handlers of `claims` and commits their outcomes together.
  absl::StatusOr<ProcessResult> process(std::vector<InboxClaim> claims);
  // claim() then process(); an empty result when nothing was ready.
  absl::StatusOr<ProcessResult> run_once();

  // Cooperative cancellation (see above). Sticky until `resume()`.
  void cancel() { cancelled_.store(true); }
  void resume() { cancelled_.store(false); }

  const std::vector<std::string>& consumers() const { return owned_; }

 private:
  struct Impl;
  explicit InboxWorker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::vector<std::string> owned_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace postal::mail
