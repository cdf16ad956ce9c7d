// message_id.h — the standard header carrying an envelope's stable message id.
//
// The sender sets it once, when it creates the message; every retransmit (a channel resending
// after a reconnect, a sender retrying its own send) keeps the envelope's headers and so keeps
// the id. A receiver that must produce one effect per message — an actor port fronted by an
// inbox (mail/include/postal/mail/inbox_actor_port.h, M-INBOX-1) — deduplicates by it. The
// runtime itself never reads or sets it. Unlike mail's `mbx-send-id` it names the message, not a
// copy: two sends of one logical message carry the same id.
#pragma once

#include <string>

#include "postal/wire/headers.h"

namespace postal::runtime {

inline constexpr wire::HeaderKey<std::string> kMessageIdHeader{"postal.message-id"};

}  // namespace postal::runtime
