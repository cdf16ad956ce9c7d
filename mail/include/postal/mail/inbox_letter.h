// inbox_letter.h — an inbox event as a mail-layer `Letter`: what the outbox publisher sends
// (M-INBOX-4) and the inbox mail consumer reads (inbox_mail_consumer.h).
//
//   Letter::id                    the event id: stable, the same on every resend, so the next
//                                 consumer's inbox deduplicates by it (its message id)
//   header inbox-event-type       string
//   header inbox-schema-version   int64
//   headers inbox-meta-<name>     string, one per metadata entry (not fingerprinted)
//   body                          Text: the payload, canonical JSON
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "postal/mail/letter.h"

namespace postal::mail {

inline constexpr wire::HeaderKey<std::string> kInboxEventType{"inbox-event-type"};
inline constexpr wire::HeaderKey<int64_t> kInboxSchemaVersion{"inbox-schema-version"};
inline constexpr std::string_view kInboxMetaPrefix = "inbox-meta-";

struct InboxEvent {
  std::string event_id{};
  std::string event_type{};
  int64_t schema_version = 1;
  std::string payload = "{}";
  std::map<std::string, std::string> metadata{};
};

Letter to_letter(const InboxEvent& event);
// InvalidPayload when the letter is not an inbox event (no id, no event type, no Text body).
absl::StatusOr<InboxEvent> from_letter(const Letter& letter);

}  // namespace postal::mail
