// inbox_port.h — inbox events over actor ports (M-INBOX-1, M-INBOX-4): the request an outbox
// publisher (or any sender) makes to an actor fronted by an inbox, its reply, and
// `postal.InboxPort`, the ready-made actor that accepts every such event into its inbox file.
//
//   // sender (what OutboxPublisher does for an `actor:` destination)
//   PortRef<InboxPost> to(addr.port(Port::handler(wire::type_hash<InboxPost>())));
//   absl::StatusOr<InboxPostReply> r = runtime::request(cx, to, InboxPost{.event = e}, timeout,
//                                                       with_message_id(e.event_id));
//   // r->accepted(): committed in the receiver's inbox (new or a duplicate of an earlier send)
//
// The event id is the inbox's message id: the sender sets it once and keeps it on every resend,
// so a post that arrives twice (its reply lost with a killed proc, a channel that returned it
// "possibly delivered", a publisher that crashed before marking it sent) is one record. The
// reply is sent only after the accept committed: a sender that got `accepted()` may forget the
// event; one that got nothing sends it again.
//
// `postal.InboxPort` spawn parameters (topology files, Host::spawn):
//   file        string  the inbox's SQLite file (required; created when missing)
//   consumer    string  the consumer every accepted record is for (required)
//   source      string  the records' source (default "actor-port"; not the sender's address,
//                       which a restarted sender may not keep — the identity must not change
//                       between a send and its resend)
//   tenant      string  the tenant scope; absent: global
//   durability  string  "os" (default) or "disk"
// The accept runs on the actor's worker and waits for its commit (a few hundred µs at `os`, an
// fdatasync at `disk`): give the port its own proc or worker when that matters.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cereal/types/map.hpp"
#include "cereal/types/string.hpp"
#include "postal/actors/actor.h"
#include "postal/actors/actor_registry.h"
#include "postal/mail/inbox.h"
#include "postal/mail/inbox_actor_port.h"
#include "postal/mail/inbox_letter.h"
#include "postal/runtime/port.h"
#include "postal/wire/type_registry.h"

namespace postal::mail {

inline constexpr std::string_view kInboxPortType = "postal.InboxPort";
inline constexpr std::string_view kInboxPortDefaultSource = "actor-port";

// The answer to an InboxPost: the receiving inbox's AcceptReceipt, or why it refused.
struct InboxPostReply {
  int32_t code = 0;          // absl::StatusCode; 0: accepted (new or duplicate)
  std::string error{};       // the refusal's message when code != 0
  bool duplicate = false;    // the event id was already accepted (M-INBOX-1)
  int64_t record_id = 0;     // the record in the receiver's inbox
  std::string status{};      // its status, as stored ("PENDING", …)
  std::string error_name{};  // the inbox error's name (inbox_errors.h), "" for others

  bool accepted() const { return code == 0; }
  absl::Status to_status() const;
  static InboxPostReply of(const absl::StatusOr<AcceptReceipt>& receipt);

  template <class A>
  void serialize(A& a) {
    a(code, error, duplicate, record_id, status, error_name);
  }
};

struct InboxPost {
  using Reply = InboxPostReply;
  InboxEvent event{};
  runtime::OncePortRef<InboxPostReply> reply_to{};
  template <class A>
  void serialize(A& a) {
    a(event.event_id, event.event_type, event.schema_version, event.payload, event.metadata,
      reply_to);
  }
};

}  // namespace postal::mail

POSTAL_MESSAGE(postal::mail::InboxPostReply, "postal.mail.InboxPostReply");
POSTAL_MESSAGE(postal::mail::InboxPost, "postal.mail.InboxPost");

namespace postal::mail {

// postal.InboxPort (see the top of this file).
class InboxPortActor final : public actors::Actor, public actors::Handles<InboxPost> {
 public:
  InboxPortActor(std::unique_ptr<Inbox> inbox, InboxPortBinding binding);
  ~InboxPortActor() override;
  static absl::StatusOr<std::unique_ptr<InboxPortActor>> create(const actors::SpawnParams& params);

  absl::Status handle(actors::Context& cx, InboxPost m) override;

 private:
  std::unique_ptr<Inbox> inbox_;
  InboxPortBinding binding_;
};

}  // namespace postal::mail
