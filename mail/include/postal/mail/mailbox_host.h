// mailbox_host.h — `MailboxHost`, the actor that serves `post:` mailboxes on a proc.
//
// A MailboxHost owns an isolated MemProvider (mem_provider.h) and translates the post wire
// protocol (post_messages.h) into its calls, so every queue semantic of the mem provider —
// M-KIND-1, M-RECV-1…3, M-ACK-1…5, M-RETRY-1…4, M-DLQ-1…3, M-STAT-1…2 — holds for `post:`
// mailboxes as well. `post://user@host/path` is stored as `mem://user@host/path` on the host's
// private bus (M-ADDR-3: the same identity) and reported back in the post scheme.
//
// Registered as "postal.MailboxHost" by `register_mail_actors()`; `postal proc` calls it, so a
// topology file spawns one with
//   [[actor]]  proc = "mail"  name = "mailbox-host"  type = "postal.MailboxHost"
// `postal mail` looks for an actor named kMailboxHostName ("mailbox-host") on the procs of a
// running topology. Spawn parameters (all optional):
//   settle_timeout_ms      M-RETRY-4 watchdog of one push attempt (default 30 000; 0: none)
//   retry_max_attempts     M-RETRY-2 (default: no retry policy)
//   retry_base_delay_ms    M-RETRY-2 (default 100)
//   dead_letter            M-DLQ-1: true enables dead letters with the default suffix "_dlq"
//   lease_sweep_ms         M-ACK-3 opt-in lease sweeper period (default 0: none)
//   server_spin_us         the server spin the host asks of its proc's scheduler (scheduler.h;
//                          default 250, 0: none; at most 10000): a request that follows its
//                          predecessor's answer within it finds the worker awake (decisions.md,
//                          "Server spin"). A host constructed directly asks for none.
//
// Subscribers on other procs. Each push is a request to the subscriber's MailPush port; the
// subscriber's callback result settles it. A push that comes back undeliverable (the
// subscriber's proc died or closed its port) counts as unhandled — the message goes back to the
// queue by M-RETRY-1 — and that subscription is dropped. On the same event, every manual-fetch
// lease taken out by the dead proc is settled `unhandled` at once; a dead proc that had no push
// in flight has its leases reclaimed by their own ack timeout (M-ACK-3).
//
// Blocking verbs (unsubscribe, wait-idle) run on helper threads, never on the actor's worker.
// Admin verbs arrive as one MailAdminCall each and run on the actor, against the mem provider's
// admin (mail_admin.h): a verb the mem provider serves is served here with no code of its own.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "postal/actors/actor.h"
#include "postal/actors/actor_registry.h"
#include "postal/mail/mem_provider.h"
#include "postal/mail/post_messages.h"

namespace postal::mail {

inline constexpr std::string_view kMailboxHostType = "postal.MailboxHost";
inline constexpr std::string_view kMailboxHostName = "mailbox-host";

namespace post_internal {
class HostCore;
}

class MailboxHost final
    : public actors::Actor,
      public actors::Handles<MailHello, MailPost, MailFetch, MailSettleMany, MailLease,
                             MailStatusQuery, MailSubscribe, MailUnsubscribe, MailWaitIdle,
                             MailAdminCall> {
 public:
  // `options.bus` null: an isolated bus (a host never shares the process-wide mem bus).
  explicit MailboxHost(MemOptions options = {});
  ~MailboxHost() override;
  // The registry factory (the spawn parameters above).
  static absl::StatusOr<std::unique_ptr<MailboxHost>> create(const actors::SpawnParams& params);

  absl::Status init(actors::Context& cx) override;
  void on_stop(actors::Context& cx, const actors::ActorStatus& status) override;

  absl::Status handle(actors::Context& cx, MailHello m) override;
  absl::Status handle(actors::Context& cx, MailPost m) override;
  absl::Status handle(actors::Context& cx, MailFetch m) override;
  absl::Status handle(actors::Context& cx, MailSettleMany m) override;
  absl::Status handle(actors::Context& cx, MailLease m) override;
  absl::Status handle(actors::Context& cx, MailStatusQuery m) override;
  absl::Status handle(actors::Context& cx, MailSubscribe m) override;
  absl::Status handle(actors::Context& cx, MailUnsubscribe m) override;
  absl::Status handle(actors::Context& cx, MailWaitIdle m) override;
  // Every admin verb (mail_admin.h), forwarded to the mem provider's admin (admin_wire.h).
  absl::Status handle(actors::Context& cx, MailAdminCall m) override;

 private:
  static constexpr absl::Duration kDefaultServerSpin = absl::Microseconds(250);  // create()
  MemOptions options_;
  absl::Duration server_spin_ = absl::ZeroDuration();
  std::shared_ptr<post_internal::HostCore> core_;
};

// Registers postal.MailboxHost and postal.InboxPort (inbox_port.h) in the actor registry
// (idempotent). `postal proc` calls it; a proc binary of your own that should host mailboxes or
// inbox ports calls it before routing::proc_main.
void register_mail_actors();

}  // namespace postal::mail
