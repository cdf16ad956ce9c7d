// MailboxSender: everything that moves envelopes (R-ROUTE-1).
//
// Mailboxes, the proc muxer, routers, gateways and channel clients are all MailboxSenders;
// composing them builds a message's path. `post` is policy: it applies the TTL rule (R-ENV-3) and
// then calls `post_unchecked`, which is mechanism only and never touches the TTL.
//
// A sender never throws and never drops silently: an envelope it cannot move is handed to
// `MessageEnvelope::undeliverable` with the ReturnHandle it was given.
#pragma once

#include <functional>
#include <string_view>

#include "postal/runtime/message_envelope.h"

namespace postal::runtime {

// Why an envelope was dropped instead of returned (R-FAIL-4).
enum class DropCause : uint8_t {
  kReturnDisabled,      // return_undeliverable was false
  kReturnFailed,        // the Undeliverable itself could not be delivered
  kNoReturnPath,        // nothing could take the returned envelope
};
std::string_view to_string(DropCause cause);

// Where undeliverable envelopes go; implemented by the Proc.
class ReturnHandle {
 public:
  virtual ~ReturnHandle() = default;
  // Takes an envelope whose failure was recorded and whose return_undeliverable is true.
  virtual void return_envelope(EnvelopePtr env) = 0;
  // Counts and logs (rate limited) an envelope that is abandoned.
  virtual void drop(EnvelopePtr env, DropCause cause) = 0;
};

class MailboxSender {
 public:
  virtual ~MailboxSender() = default;

  // R-ENV-3: TTL 0 → Expired{dest}; otherwise decrement and post_unchecked.
  void post(EnvelopePtr env, ReturnHandle& ret) {
    if (env->ttl() == 0) {
      std::string target = env->dest().to_string();
      MessageEnvelope::undeliverable(std::move(env), DeliveryFailure::expired(std::move(target)),
                                     ret);
      return;
    }
    env->set_ttl(env->ttl() - 1);
    post_unchecked(std::move(env), ret);
  }

  virtual void post_unchecked(EnvelopePtr env, ReturnHandle& ret) = 0;

  // Whether an envelope to `next_hop` may be posted here while its payload is still arriving
  // in chunks (docs/wire.md §9.7): true only where it leaves through a channel that forwards
  // chunks as they come. Whatever delivers needs the whole payload, so the default is no.
  virtual bool accepts_stream(const PortAddr& next_hop) const {
    (void)next_hop;
    return false;
  }

  // R-FLOW-2, credit (docs/wire.md §10.1): asks to hear once, through `on_room`, when `actor` —
  // an actor of this proc whose bounded mailbox refused an envelope — has drained to half its
  // bound, or stops. `on_room` runs on whichever thread frees the room, must not block and may
  // run before this returns. False when this sender cannot tell (an actor of another proc, an
  // unbounded or unknown one): the caller then has nothing to wait for.
  virtual bool notify_on_room(const ActorId& actor, std::function<void()> on_room) {
    (void)actor;
    (void)on_room;
    return false;
  }
};

// A sender that fails everything with Transport(NoRoute): the default forwarder of a proc that
// is not attached to any router.
class NoRouteSender final : public MailboxSender {
 public:
  void post_unchecked(EnvelopePtr env, ReturnHandle& ret) override;
};

}  // namespace postal::runtime
