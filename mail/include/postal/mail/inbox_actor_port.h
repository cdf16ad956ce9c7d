// inbox_actor_port.h — an actor port fronted by an inbox (M-INBOX-1): envelopes that may arrive
// twice (a channel resending after a reconnect, a sender retrying) produce one accepted record.
//
// The sender stamps the message with a stable id once (`with_message_id`, the standard header
// `runtime::kMessageIdHeader`); the receiving actor's handler calls `accept_envelope`, which
// accepts the envelope being handled under that id and the binding's scope, source and consumer:
//
//   // sender
//   ref.send(cx, OrderCreated{7}, with_message_id("order-7-created"));
//   // receiver, in its handler for OrderCreated
//   absl::StatusOr<AcceptReceipt> r = accept_envelope(inbox, cx, binding, "order.created", 1,
//                                                     absl::StrCat(R"({"orderId":)", m.id, "}"));
//
// `accept_envelope` returns after the accept committed (accepted or duplicate, as
// `Inbox::accept`); an envelope without the header fails with InvalidPayload — a fresh id per
// delivery would defeat deduplication, so none is minted here. What the handler does with the
// answer (reply, ignore) is its own; the inbox's workers do the processing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "postal/actors/context.h"
#include "postal/mail/inbox.h"
#include "postal/mail/inbox_letter.h"
#include "postal/runtime/message_id.h"
#include "postal/wire/headers.h"

namespace postal::mail {

// Who the messages of one actor port are, for the inbox (the transport's trusted context).
struct InboxPortBinding {
  InboxScope scope{};
  std::string source{};
  std::string consumer{};
};

// Headers carrying `message_id` as the envelope's stable id (plus `headers`).
wire::Headers with_message_id(std::string message_id, wire::Headers headers = {});

// Accepts `event` under `binding` (its event id as the message id; InvalidPayload without one)
// and returns after the commit — what postal.InboxPort (inbox_port.h) does with each InboxPost.
absl::StatusOr<AcceptReceipt> accept_event(Inbox& inbox, const InboxPortBinding& binding,
                                           const InboxEvent& event);

absl::StatusOr<AcceptReceipt> accept_envelope(Inbox& inbox, const actors::Context& cx,
                                              const InboxPortBinding& binding,
                                              std::string_view event_type, int64_t schema_version,
                                              std::string_view payload_json,
                                              std::map<std::string, std::string> metadata = {});

}  // namespace postal::mail
