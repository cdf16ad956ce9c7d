// Outbox::emit and OutboxPublisher (M-INBOX-4).
#include "postal/mail/outbox.h"

#include "absl/strings/str_cat.h"
#include "inbox_rows.h"
#include "postal/mail/inbox_errors.h"
#include "postal/mail/inbox_letter.h"
#include "postal/mail/inbox_port.h"
#include "postal/mail/mail_address.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {

using store::Db;
using store::Stmt;

namespace {

// The actor address of an `actor:` destination; nullopt for a mail address.
std::optional<absl::StatusOr<runtime::ActorAddr>> actor_destination(std::string_view dest) {
  if (!dest.starts_with(kOutboxActorScheme)) return std::nullopt;
  return runtime::ActorAddr::parse(dest.substr(kOutboxActorScheme.size()));
}

// Refused at emit, so a row that can never be sent is never written.
absl::Status check_destination(std::string_view dest) {
  if (auto actor = actor_destination(dest)) {
    if (!actor->ok()) {
      return InvalidPayloadError(absl::StrCat("outbox destination \"", sv(dest), "\": ",
                                              actor->status().message(), "; nothing was emitted"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<MailAddress> mail = MailAddress::parse(dest);
  if (!mail.ok()) {
    return InvalidPayloadError(absl::StrCat(
        "outbox destination \"", sv(dest),
        "\" is neither a mail address nor `actor:<actor address>`: ", mail.status().message(),
        "; nothing was emitted"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Outbox::emit(InboxTx& tx, const OutboxEvent& event, const JsonLimits& limits) {
  if (event.event_id.empty() || event.destination.empty() || event.event_type.empty()) {
    return InvalidPayloadError(
        "an outbox event needs an event id, a destination and an event type; nothing was emitted");
  }
  if (absl::Status d = check_destination(event.destination); !d.ok()) return d;
  absl::StatusOr<std::string> payload = canonical_json(event.payload, limits);
  if (!payload.ok()) return payload.status();
  // Through the handler's transaction: the row commits or rolls back with its writes.
  return tx.execute(
      "INSERT INTO outbox (event_id, destination, event_type, schema_version, payload, metadata, "
      "created_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
      {event.event_id, event.destination, event.event_type, event.schema_version, *payload,
       inbox::encode_metadata(event.metadata), inbox::to_ms(tx.now())});
}

OutboxPublisher::OutboxPublisher(Inbox& inbox, OutboxTargets targets, std::unique_ptr<Db> db)
    : inbox_(inbox), targets_(targets), db_(std::move(db)) {}
OutboxPublisher::~OutboxPublisher() = default;

absl::StatusOr<std::unique_ptr<OutboxPublisher>> OutboxPublisher::create(Inbox& inbox,
                                                                         PostOffice& office) {
  return create(inbox, OutboxTargets{.office = &office});
}

absl::StatusOr<std::unique_ptr<OutboxPublisher>> OutboxPublisher::create(Inbox& inbox,
                                                                         OutboxTargets targets) {
  absl::StatusOr<std::unique_ptr<Db>> db = inbox.connect();
  if (!db.ok()) return db.status();
  return std::unique_ptr<OutboxPublisher>(new OutboxPublisher(inbox, targets, *std::move(db)));
}

absl::Status OutboxPublisher::send(const std::string& destination, const InboxEvent& event) {
  if (auto actor = actor_destination(destination)) {
    if (!actor->ok()) return actor->status();
    if (targets_.actors == nullptr) {
      return absl::FailedPreconditionError(
          "an actor destination needs OutboxTargets::actors (a Client to send from)");
    }
    const runtime::PortRef<InboxPost> to(
        (*actor)->port(runtime::Port::handler(wire::type_hash<InboxPost>())));
    absl::StatusOr<InboxPostReply> reply =
        runtime::request(*targets_.actors, to, InboxPost{.event = event}, targets_.actor_timeout,
                         with_message_id(event.event_id));
    return reply.ok() ? reply->to_status() : reply.status();
  }
  if (targets_.office == nullptr) {
    return absl::FailedPreconditionError(
        "a mail destination needs OutboxTargets::office (a PostOffice)");
  }
  return targets_.office->post(destination, to_letter(event)).status();
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
    const absl::Status posted = send(row.destination, row.event);
    const int64_t now = inbox::to_ms(inbox_.clock().now());
    absl::StatusOr<Stmt*> u = db_->prepare(
        "UPDATE outbox SET attempts = attempts + 1, published_ms = ?, last_error = ? WHERE id = ?");
    if (!u.ok()) return u.status();
    if (posted.ok()) {
      (*u)->bind(1, now).bind_null(2);
      ++result.sent;
    } else {
      (*u)->bind_null(1).bind_text(2, posted.ToString());
      ++result.failed;
    }
    (*u)->bind(3, row.id);
    // A failed mark leaves the row unsent: it is sent again (at least once).
    if (absl::Status s = (*u)->run(); !s.ok()) return s;
  }
  return result;
}

}  // namespace postal::mail
