#include "postal/mail/inbox_mail_consumer.h"

#include "postal/mail/inbox_errors.h"
#include "postal/mail/inbox_letter.h"

namespace postal::mail {

absl::StatusOr<std::optional<MailAcceptOutcome>> InboxMailConsumer::poll_once() {
  absl::StatusOr<std::optional<Delivery>> fetched =
      office_.fetch(options_.address, {.ack = AckMode::kManual, .ack_timeout = options_.lease});
  if (!fetched.ok()) return fetched.status();
  if (!fetched->has_value()) return std::optional<MailAcceptOutcome>();
  Delivery& delivery = **fetched;
  MailAcceptOutcome outcome{.receipt = absl::UnknownError("not accepted")};
  absl::StatusOr<InboxEvent> event = from_letter(delivery.letter());
  if (!event.ok()) {
    outcome.receipt = event.status();
  } else {
    InboxMessage m;
    m.scope = options_.scope;
    m.source = options_.source;
    m.consumer = options_.consumer;
    m.message_id = event->event_id;
    m.event_type = event->event_type;
    m.schema_version = event->schema_version;
    m.payload = std::move(event->payload);
    m.metadata = std::move(event->metadata);
    outcome.receipt = inbox_.accept(m);  // committed before the settlement below
  }
  const absl::Status& s = outcome.receipt.status();
  if (s.ok()) {
    outcome.settled = Disposition::kHandled;
  } else if (IsIdentityConflict(s) || IsInvalidPayload(s)) {
    outcome.settled = Disposition::kDiscard;
  } else {
    outcome.settled = Disposition::kUnhandled;
  }
  outcome.settlement_took_effect = delivery.ack(outcome.settled);
  return std::optional<MailAcceptOutcome>(std::move(outcome));
}

}  // namespace postal::mail
