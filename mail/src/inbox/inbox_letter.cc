#include "postal/mail/inbox_letter.h"

#include "postal/mail/inbox_errors.h"

namespace postal::mail {

Letter to_letter(const InboxEvent& event) {
  Letter l = Letter::text(event.payload, event.event_id);
  l.headers.set(kInboxEventType, event.event_type);
  l.headers.set(kInboxSchemaVersion, event.schema_version);
  for (const auto& [k, v] : event.metadata) {
    l.headers.set_value(std::string(kInboxMetaPrefix) + k, wire::HeaderValue(v));
  }
  return l;
}

absl::StatusOr<InboxEvent> from_letter(const Letter& letter) {
  InboxEvent e;
  e.event_id = letter.id;
  std::optional<std::string> type = letter.headers.get(kInboxEventType);
  std::optional<int64_t> version = letter.headers.get(kInboxSchemaVersion);
  std::optional<std::string> body = letter.body.text();
  if (e.event_id.empty() || !type.has_value() || !version.has_value() || !body.has_value()) {
    return InvalidPayloadError(
        "the letter is not an inbox event: it needs an id, the headers inbox-event-type "
        "(string) and inbox-schema-version (int64), and a Text body holding JSON");
  }
  e.event_type = *std::move(type);
  e.schema_version = *version;
  e.payload = *std::move(body);
  for (const auto& [name, value] : letter.headers) {
    if (name.rfind(kInboxMetaPrefix, 0) == 0 && std::holds_alternative<std::string>(value)) {
      e.metadata[name.substr(kInboxMetaPrefix.size())] = std::get<std::string>(value);
    }
  }
  return e;
}

}  // namespace postal::mail
