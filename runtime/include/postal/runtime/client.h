// Client: a mailbox for code that is not an actor (a main function, a test, a tool).
//
// A client is attached to a proc under a name like an actor, so it can send, open ports and
// receive replies; envelopes it sent that come back undeliverable are queued for
// `next_undeliverable()` instead of failing anything.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "postal/runtime/port.h"
#include "postal/runtime/proc.h"
#include "postal/runtime/send_context.h"

namespace postal::runtime {

class Client final : public SendContext {
 public:
  // Attaches a client named `name` (a label) to `proc`; fails on a bad or taken name.
  static absl::StatusOr<std::unique_ptr<Client>> attach(Proc& proc, std::string_view name);
  ~Client() override;

  Proc& proc() override { return proc_; }
  std::shared_ptr<Mailbox> mailbox() override { return mailbox_; }
  const ActorAddr& self_addr() const override { return mailbox_->owner(); }

  // The next envelope of ours that came back, with its failures.
  absl::StatusOr<EnvelopePtr> next_undeliverable(absl::Duration timeout);

 private:
  Client(Proc& proc, std::shared_ptr<Mailbox> mailbox, std::shared_ptr<ReceiverQueue> returns);

  Proc& proc_;
  std::shared_ptr<Mailbox> mailbox_;
  std::shared_ptr<ReceiverQueue> returns_;
};

}  // namespace postal::runtime
