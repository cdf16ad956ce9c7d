// outbox.h — the outbox (M-INBOX-4): events a handler emits in its own transaction, sent after
// the commit, at least once, with a stable event id.
//
//   // inside a handler:
//   absl::Status s = Outbox::emit(context.tx, {.event_id = "projected:" + message_id,
//                                               .destination = "mem:svc@example.com/audit",
//                                               .event_type = "order.projected", ...});
//
// `emit` writes one row into the inbox file's `outbox` table through `tx`, so the row, the
// handler's other writes and the record's completion commit or roll back together: an outbox row
// exists exactly when the handler's writes do. Event ids are unique in the outbox; emitting an id
// twice fails the handler.
//
// `OutboxPublisher::publish_once` sends committed, unsent rows, oldest first, to their
// destination mail addresses through a PostOffice (any provider), as `to_letter` letters
// (inbox_letter.h) whose id is the event id, and marks each sent after the post returned. A crash
// between the post and the mark sends the event again: at least once, never silently lost; the
// receiving inbox deduplicates by the id. A failed post is counted and retried next time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "postal/mail/canonical_json.h"
#include "postal/mail/inbox.h"
#include "postal/mail/inbox_tx.h"
#include "postal/mail/post_office.h"

namespace postal::mail {

struct OutboxEvent {
  std::string event_id{};     // stable: derive it from what caused the event, never random
  std::string destination{};  // a mail address
  std::string event_type{};
  int64_t schema_version = 1;
  std::string payload = "{}";  // JSON; stored canonical (InvalidPayload otherwise)
  std::map<std::string, std::string> metadata{};
};

class Outbox {
 public:
  static absl::Status emit(InboxTx& tx, const OutboxEvent& event, const JsonLimits& limits = {});
};

struct PublishResult {
  int64_t sent = 0;
  int64_t failed = 0;  // posts that failed; retried by the next publish_once
};

class OutboxPublisher {
 public:
  static absl::StatusOr<std::unique_ptr<OutboxPublisher>> create(Inbox& inbox, PostOffice& office);
  ~OutboxPublisher();
  OutboxPublisher(const OutboxPublisher&) = delete;
  OutboxPublisher& operator=(const OutboxPublisher&) = delete;

  // Sends up to `limit` unsent events. One thread at a time.
  absl::StatusOr<PublishResult> publish_once(int64_t limit = 100);

 private:
  OutboxPublisher(Inbox& inbox, PostOffice& office, std::unique_ptr<store::Db> db);
  Inbox& inbox_;
  PostOffice& office_;
  std::unique_ptr<store::Db> db_;
};

}  // namespace postal::mail
