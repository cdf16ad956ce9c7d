// Outbox::emit and OutboxPublisher (M-INBOX-4).
#include "postal/mail/outbox.h"

#include "absl/strings/str_cat.h"
#include "inbox_rows.h"
#include "postal/mail/inbox_errors.h"
#include "postal/mail/inbox_letter.h"

namespace postal::mail {

using store::Db;
using store::Stmt;

absl::Status Outbox::emit(InboxTx& tx, const OutboxEvent& event, const JsonLimits& limits) {
  if (event.event_id.empty() || event.destination.empty() || event.event_type.empty()) {
    return InvalidPayloadError(
        "an outbox event needs an event id, a destination and an event type; nothing was emitted");
  }
  absl::StatusOr<std::string> payload = canonical_json(event.payload, limits);
  if (!payload.ok()) return payload.status();
  // Through the handler's transaction: the row commits or rolls back with its writes.
  return tx.execute(
      "INSERT INTO outbox (event_id, destination, event_type, schema_version, payload, metadata, "
      "created_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
      {event.event_id, event.destination, event.event_type, event.schema_version, *payload,
       inbox::encode_metadata(event.metadata), inbox::to_ms(tx.now())});
}

OutboxPublisher::OutboxPublisher(Inbox& inbox, PostOffice& office, std::unique_ptr<Db> db)
    : inbox_(inbox), office_(office), db_(std::move(db)) {}
OutboxPublisher::~OutboxPublisher() = default;

absl::StatusOr<std::unique_ptr<OutboxPublisher>> OutboxPublisher::create(Inbox& inbox,
                                                                         PostOffice& office) {
  absl::StatusOr<std::unique_ptr<Db>> db = inbox.connect();
  if (!db.ok()) return db.status();
  return std::unique_ptr<OutboxPublisher>(new OutboxPublisher(inbox, office, *std::move(db)));
}

absl::StatusOr<PublishResult> OutboxPublisher::publish_once(int64_t limit) {
  struct Row {
    int64_t id;
    std::string destination;
    InboxEvent event;
  };
  std::vector<Row> rows;
  {
    absl::StatusOr<Stmt*> q = db_->prepare(
        "SELECT id, event_id, destination, event_type, schema_version, payload, metadata "
        "FROM outbox WHERE published_ms IS NULL ORDER BY id LIMIT ?");
    if (!q.ok()) return q.status();
    (*q)->bind(1, limit);
    while (true) {
      absl::StatusOr<bool> row = (*q)->step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      Stmt& r = **q;
      rows.push_back({r.int64(0), r.text(2),
                      InboxEvent{r.text(1), r.text(3), r.int64(4), r.text(5),
                                 inbox::decode_metadata(r.text(6))}});
    }
  }
  PublishResult result;
  for (const Row& row : rows) {
    absl::StatusOr<PostReceipt> posted = office_.post(row.destination, to_letter(row.event));
    const int64_t now = inbox::to_ms(inbox_.clock().now());
    absl::StatusOr<Stmt*> u = db_->prepare(
        "UPDATE outbox SET attempts = attempts + 1, published_ms = ?, last_error = ? WHERE id = ?");
    if (!u.ok()) return u.status();
    if (posted.ok()) {
      (*u)->bind(1, now).bind_null(2);
      ++result.sent;
    } else {
      (*u)->bind_null(1).bind_text(2, posted.status().ToString());
      ++result.failed;
    }
    (*u)->bind(3, row.id);
    // A failed mark leaves the row unsent: it is sent again (at least once).
    if (absl::Status s = (*u)->run(); !s.ok()) return s;
  }
  return result;
}

}  // namespace postal::mail
