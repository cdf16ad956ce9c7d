// InboxWorker: the claim transaction and the group transaction with one savepoint per record
// (M-INBOX-3; the design is in inbox_worker.h).
#include "postal/mail/inbox_worker.h"

#include <algorithm>
#include <exception>
#include <map>
#include <set>

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "inbox_rows.h"
#include "postal/mail/inbox_errors.h"
#include "postal/mail/system_headers.h"
#include "postal/wire/absl_compat.h"
#include "tx_statements.h"

namespace postal::mail {

using store::Db;
using store::Stmt;

struct InboxWorker::Impl {
  Inbox& inbox;
  InboxWorkerOptions options;
  std::map<std::string, HandlerRegistration, std::less<>> handlers;  // by consumer, owned only
  std::unique_ptr<Db> db;
  std::unique_ptr<inbox::TxStatements> statements;  // the handlers' (before db closes)
  std::string claim_sql;                            // claims one lane's ready records (see create)
  size_t next_consumer = 0;  // the consumer a claim starts with, in turn (no consumer starves)

  absl::Status write_outcome(const InboxClaim& c, std::string_view status, int64_t next_ms,
                             std::string_view error, int64_t now_ms, bool* applied);
  absl::Status process_one(const InboxClaim& c, const std::atomic<bool>& cancel,
                           ProcessResult& result);
};

InboxWorker::InboxWorker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  for (const auto& [consumer, _] : impl_->handlers) owned_.push_back(consumer);
}
InboxWorker::~InboxWorker() = default;

absl::StatusOr<std::unique_ptr<InboxWorker>> InboxWorker::create(
    Inbox& inbox, std::vector<HandlerRegistration> handlers, InboxWorkerOptions options) {
  auto startup = [](std::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat("inbox worker startup: ", sv(why)));
  };
  std::map<std::string, HandlerRegistration, std::less<>> by_consumer;
  for (HandlerRegistration& h : handlers) {
    if (!h.handler) return startup(absl::StrCat("the handler for '", h.consumer, "' is empty"));
    const std::string consumer = h.consumer;
    if (!by_consumer.emplace(consumer, std::move(h)).second) {
      return startup(absl::StrCat("two handlers are registered for consumer '", consumer,
                                  "'; register one handler per consumer"));
    }
  }
  std::vector<std::string> owned = options.consumers;
  if (owned.empty()) {
    for (const auto& [c, _] : by_consumer) owned.push_back(c);
  }
  if (owned.empty()) return startup("no consumer is owned and no handler is registered");
  std::map<std::string, HandlerRegistration, std::less<>> kept;
  for (const std::string& c : owned) {
    auto it = by_consumer.find(c);
    if (it == by_consumer.end()) {
      return startup(absl::StrCat("consumer '", c,
                                  "' is owned by this worker but has no handler; register one "
                                  "or leave it out of InboxWorkerOptions::consumers"));
    }
    if (!inbox.declares(c)) {
      return startup(absl::StrCat("consumer '", c, "' is not declared by the inbox"));
    }
    kept.insert(by_consumer.extract(it));
  }
  if (options.batch < 1 || options.max_attempts < 1 || options.lease <= absl::ZeroDuration()) {
    return startup("batch, max_attempts and lease must be positive");
  }
  auto impl = std::make_unique<Impl>(Impl{inbox,
                                          std::move(options),
                                          std::move(kept),
                                          nullptr,
                                          std::make_unique<inbox::TxStatements>(),
                                          {}});
  absl::StatusOr<std::unique_ptr<Db>> db = inbox.connect();
  if (!db.ok()) return db.status();
  impl->db = *std::move(db);
  // One (consumer, status) lane per statement, claimed and read at once: the `inbox_ready`
  // index (consumer, status, next_attempt_ms, rowid) hands the lane's rows oldest first and the
  // LIMIT stops the scan. (A query over every owned consumer and status at once sorted all ready
  // rows on each claim.)
  impl->claim_sql = absl::StrCat(
      "UPDATE inbox SET status = 'PROCESSING', claim_token = ?, next_attempt_ms = ?, "
      "attempts = attempts + 1 WHERE id IN (SELECT id FROM inbox WHERE consumer = ? AND "
      "status = ? AND next_attempt_ms <= ? ORDER BY next_attempt_ms, id LIMIT ?) RETURNING ",
      sv(inbox::kRecordColumns));
  return std::unique_ptr<InboxWorker>(new InboxWorker(std::move(impl)));
}

absl::StatusOr<std::vector<InboxClaim>> InboxWorker::claim() {
  Impl& w = *impl_;
  const absl::Time now = w.inbox.clock().now();
  const int64_t now_ms = inbox::to_ms(now);
  const absl::Time lease_until = now + w.options.lease;
  // One token for the batch: the completion guard is (id, token, lease), so a token need only
  // tell this claim from every other worker's and from this record's earlier claims.
  const std::string token = mint_send_id();
  std::vector<InboxClaim> claims;
  absl::Status s = inbox::in_write_transaction(*w.db, [&]() -> absl::Status {
    claims.clear();
    const size_t consumers = w.handlers.size();
    const size_t first = w.next_consumer++ % consumers;
    for (size_t k = 0; k < consumers; ++k) {
      const std::string& consumer =
          std::next(w.handlers.begin(), static_cast<std::ptrdiff_t>((first + k) % consumers))
              ->first;
      // A lease that ended with the budget spent: its worker died on every attempt.
      absl::StatusOr<Stmt*> dead = w.db->prepare(
          "UPDATE inbox SET status = 'DEAD', claim_token = NULL, last_error = ? "
          "WHERE consumer = ? AND status = 'PROCESSING' AND next_attempt_ms <= ? AND attempts >= "
          "?");
      if (!dead.ok()) return dead.status();
      (*dead)
          ->bind_text(1, absl::StrCat("attempt budget (", w.options.max_attempts,
                                      ") spent: the last lease ended without an outcome"))
          .bind_text(2, consumer)
          .bind(3, now_ms)
          .bind(4, w.options.max_attempts);
      if (absl::Status d = (*dead)->run(); !d.ok()) return d;
      // Redeliveries before new work: a crashed worker's records, then due retries, then PENDING.
      for (std::string_view lane : {"PROCESSING", "RETRYABLE", "PENDING"}) {
        const int64_t room = w.options.batch - static_cast<int64_t>(claims.size());
        if (room <= 0) break;
        absl::StatusOr<Stmt*> q = w.db->prepare(w.claim_sql);
        if (!q.ok()) return q.status();
        (*q)->bind_text(1, token)
            .bind(2, inbox::to_ms(lease_until))
            .bind_text(3, consumer)
            .bind_text(4, lane)
            .bind(5, now_ms)
            .bind(6, room);
        while (true) {
          absl::StatusOr<bool> row = (*q)->step();
          if (!row.ok()) return row.status();
          if (!*row) break;
          claims.push_back(InboxClaim{inbox::read_record(**q), token, lease_until});
        }
      }
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  // RETURNING gives rows in no particular order: handle the batch in acceptance order.
  std::sort(claims.begin(), claims.end(),
            [](const InboxClaim& a, const InboxClaim& b) { return a.record.id < b.record.id; });
  return claims;
}

// The RETRYABLE/DEAD/COMPLETED write of one claim, guarded by its token and its lease, so a
// claim that is no longer ours writes nothing (`*applied` false).
absl::Status InboxWorker::Impl::write_outcome(const InboxClaim& c, std::string_view status,
                                              int64_t next_ms, std::string_view error,
                                              int64_t now_ms, bool* applied) {
  absl::StatusOr<Stmt*> u = db->prepare(
      "UPDATE inbox SET status = ?, next_attempt_ms = ?, last_error = ?, claim_token = NULL, "
      "completed_ms = CASE WHEN ? = 'COMPLETED' THEN ? ELSE completed_ms END "
      "WHERE id = ? AND claim_token = ? AND status = 'PROCESSING' AND next_attempt_ms >= ?");
  if (!u.ok()) return u.status();
  (*u)->bind_text(1, status).bind(2, next_ms);
  if (error.empty())
    (*u)->bind_null(3);
  else
    (*u)->bind_text(3, error);
  (*u)->bind_text(4, status)
      .bind(5, now_ms)
      .bind(6, c.record.id)
      .bind_text(7, c.token)
      .bind(8, now_ms);
  if (absl::Status s = (*u)->run(); !s.ok()) return s;
  *applied = db->changes() == 1;
  return absl::OkStatus();
}

absl::Status InboxWorker::Impl::process_one(const InboxClaim& c, const std::atomic<bool>& cancel,
                                            ProcessResult& result) {
  Clock& clock = inbox.clock();
  const absl::Time started = clock.now();
  HandlerRegistration& reg = handlers.find(c.record.message.consumer)->second;
  const EventSchema schema{c.record.message.event_type, c.record.message.schema_version};
  bool applied = false;
  if (std::find(reg.supports.begin(), reg.supports.end(), schema) == reg.supports.end()) {
    // M-INBOX-3: an event the consumer's handler does not understand will never succeed.
    const std::string why =
        absl::StrCat("unsupported event type '", schema.event_type, "' schema version ",
                     schema.schema_version, " for consumer '", reg.consumer, "'");
    const int64_t now_ms = inbox::to_ms(started);
    if (absl::Status s = write_outcome(c, "DEAD", now_ms, why, now_ms, &applied); !s.ok()) return s;
    ++(applied ? result.dead : result.stale);
    return absl::OkStatus();
  }
  if (absl::Status s = inbox::run_cached(*db, "SAVEPOINT inbox_record"); !s.ok()) return s;
  InboxTx tx(db->handle(), started, statements.get());
  HandlerContext context{tx, c.record, c.record.attempts,
                         std::min(c.lease_until, started + options.handler_timeout), &cancel};
  absl::Status outcome;
  try {
    outcome = reg.handler(c.record.message.payload, context);
  } catch (const std::exception& e) {
    outcome = absl::UnknownError(absl::StrCat("the handler threw: ", e.what()));
  } catch (...) {
    outcome = absl::UnknownError("the handler threw a non-standard exception");
  }
  if (sqlite3_get_autocommit(db->handle()) != 0) {
    return absl::InternalError(
        "inbox handler ended the worker's transaction (COMMIT, ROLLBACK or RELEASE inside a "
        "handler); the batch's outcomes are lost and its records come back when their leases end");
  }
  const absl::Time now = clock.now();
  const int64_t now_ms = inbox::to_ms(now);
  const bool was_cancelled = cancel.load();
  if (outcome.ok() && was_cancelled) outcome = absl::CancelledError("the worker was cancelled");
  if (outcome.ok() && now > context.deadline) {
    outcome = absl::DeadlineExceededError(absl::StrCat("the handler returned after its deadline (",
                                                       absl::FormatDuration(now - context.deadline),
                                                       " late); its commit was refused"));
  }
  if (outcome.ok()) {
    if (absl::Status s = write_outcome(c, "COMPLETED", now_ms, "", now_ms, &applied); !s.ok()) {
      return s;
    }
    if (applied) {
      ++result.completed;
      return inbox::run_cached(*db, "RELEASE inbox_record");
    }
    // Stale: the handler's writes roll back with the refused completion.
    ++result.stale;
    if (absl::Status s = inbox::run_cached(*db, "ROLLBACK TO inbox_record"); !s.ok()) return s;
    return inbox::run_cached(*db, "RELEASE inbox_record");
  }
  if (absl::Status s = inbox::run_cached(*db, "ROLLBACK TO inbox_record"); !s.ok()) return s;
  if (absl::Status s = inbox::run_cached(*db, "RELEASE inbox_record"); !s.ok()) return s;
  const bool dead =
      IsInboxPermanent(outcome) || (c.record.attempts >= options.max_attempts && !was_cancelled);
  absl::Duration backoff = options.backoff_base;
  for (int64_t i = 1; i < c.record.attempts && backoff < options.backoff_max; ++i) backoff *= 2;
  backoff = was_cancelled ? absl::ZeroDuration() : std::min(backoff, options.backoff_max);
  const std::string error(outcome.message().substr(0, 500));
  if (absl::Status s = write_outcome(c, dead ? "DEAD" : "RETRYABLE", inbox::to_ms(now + backoff),
                                     error, now_ms, &applied);
      !s.ok()) {
    return s;
  }
  if (!applied)
    ++result.stale;
  else if (was_cancelled)
    ++result.cancelled;
  else
    ++(dead ? result.dead : result.retryable);
  return absl::OkStatus();
}

absl::StatusOr<ProcessResult> InboxWorker::process(std::vector<InboxClaim> claims) {
  ProcessResult result;
  if (claims.empty()) return result;
  Impl& w = *impl_;
  // The group transaction: SQLite's one write lock is taken once for the batch (inbox_worker.h).
  absl::Status s = inbox::in_write_transaction(*w.db, [&]() -> absl::Status {
    result = ProcessResult{};
    for (const InboxClaim& c : claims) {
      if (cancelled_.load()) {
        ++result.cancelled;  // not started: its lease brings it back
        continue;
      }
      if (absl::Status p = w.process_one(c, cancelled_, result); !p.ok()) return p;
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return result;
}

absl::StatusOr<ProcessResult> InboxWorker::run_once() {
  absl::StatusOr<std::vector<InboxClaim>> claims = claim();
  if (!claims.ok()) return claims.status();
  return process(*std::move(claims));
}

}  // namespace postal::mail
