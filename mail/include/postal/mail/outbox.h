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
// `OutboxPublisher::publish_once` sends committed, unsent rows, oldest first, and marks each sent
// after its destination took it. A destination is either
//   - a mail address (`mem:…`, `post:…`, any provider): posted through a PostOffice as a
//     `to_letter` letter (inbox_letter.h) whose id is the event id; taken = the post returned; or
//   - `actor:<actor address>` (e.g. `actor:projection.orders@ipc:///run/orders.sock`): an
//     InboxPost request (inbox_port.h) to that actor's InboxPost port, with the event id as its
//     stable message id; taken = the receiver replied that its inbox committed it (new or
//     duplicate) within `OutboxTargets::actor_timeout`.
// A crash between the send and the mark sends the event again: at least once, never silently
// lost; the receiving inbox deduplicates by the id. A failed send is counted, its error kept in
// the row (`last_error`), and retried next time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "postal/mail/canonical_json.h"
#include "postal/mail/inbox.h"
#include "postal/mail/inbox_letter.h"
#include "postal/mail/inbox_tx.h"
#include "postal/mail/post_office.h"
#include "postal/runtime/send_context.h"

namespace postal::mail {

struct OutboxEvent {
  std::string event_id{};     // stable: derive it from what caused the event, never random
  std::string destination{};  // a mail address, or `actor:<actor address>` (see above)
  std::string event_type{};
  int64_t schema_version = 1;
  std::string payload = "{}";  // JSON; stored canonical (InvalidPayload otherwise)
  std::map<std::string, std::string> metadata{};
};

class Outbox {
 public:
  static absl::Status emit(InboxTx& tx, const OutboxEvent& event, const JsonLimits& limits = {});
};

// Where a publisher sends: mail addresses through `office`, `actor:` destinations as requests
// from `actors` (a Client, or any context that outlives the publisher). A destination whose
// target is null fails its send (counted, retried) with FailedPrecondition.
struct OutboxTargets {
  PostOffice* office = nullptr;
  runtime::SendContext* actors = nullptr;
  absl::Duration actor_timeout = absl::Seconds(10);
};

inline constexpr std::string_view kOutboxActorScheme = "actor:";

struct PublishResult {
  int64_t sent = 0;
  int64_t failed = 0;  // posts that failed; retried by the next publish_once
};

class OutboxPublisher {
 public:
  static absl::StatusOr<std::unique_ptr<OutboxPublisher>> create(Inbox& inbox, PostOffice& office);
  static absl::StatusOr<std::unique_ptr<OutboxPublisher>> create(Inbox& inbox,
                                                                 OutboxTargets targets);
  ~OutboxPublisher();
  OutboxPublisher(const OutboxPublisher&) = delete;
  OutboxPublisher& operator=(const OutboxPublisher&) = delete;

  // Sends up to `limit` unsent events. One thread at a time.
  absl::StatusOr<PublishResult> publish_once(int64_t limit = 100);

 private:
  OutboxPublisher(Inbox& inbox, OutboxTargets targets, std::unique_ptr<store::Db> db);
  absl::Status send(const std::string& destination, const InboxEvent& event);
  Inbox& inbox_;
  const OutboxTargets targets_;
  std::unique_ptr<store::Db> db_;
};

}  // namespace postal::mail
