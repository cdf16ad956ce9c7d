#include "postal/mail/inbox_actor_port.h"

#include "postal/mail/inbox_errors.h"
#include "postal/runtime/message_envelope.h"

namespace postal::mail {

wire::Headers with_message_id(std::string message_id, wire::Headers headers) {
  headers.set(runtime::kMessageIdHeader, std::move(message_id));
  return headers;
}

absl::StatusOr<AcceptReceipt> accept_envelope(Inbox& inbox, const actors::Context& cx,
                                              const InboxPortBinding& binding,
                                              std::string_view event_type, int64_t schema_version,
                                              std::string_view payload_json,
                                              std::map<std::string, std::string> metadata) {
  const runtime::MessageEnvelope* env = cx.envelope();
  std::optional<std::string> id =
      env == nullptr ? std::nullopt : env->headers().get(runtime::kMessageIdHeader);
  if (!id.has_value() || id->empty()) {
    return InvalidPayloadError(
        "the envelope carries no stable message id (header postal.message-id); the sender must "
        "set one with with_message_id() and keep it on every resend; nothing was stored");
  }
  InboxEvent e;
  e.event_id = *std::move(id);
  e.event_type = std::string(event_type);
  e.schema_version = schema_version;
  e.payload = std::string(payload_json);
  e.metadata = std::move(metadata);
  return accept_event(inbox, binding, e);
}

absl::StatusOr<AcceptReceipt> accept_event(Inbox& inbox, const InboxPortBinding& binding,
                                           const InboxEvent& event) {
  if (event.event_id.empty()) {
    return InvalidPayloadError(
        "the inbox event carries no event id; the sender must give it a stable one and keep it "
        "on every resend; nothing was stored");
  }
  InboxMessage m;
  m.scope = binding.scope;
  m.source = binding.source;
  m.consumer = binding.consumer;
  m.message_id = event.event_id;
  m.event_type = event.event_type;
  m.schema_version = event.schema_version;
  m.payload = event.payload;
  m.metadata = event.metadata;
  return inbox.accept(m);
}

}  // namespace postal::mail
