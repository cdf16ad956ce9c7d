// SendContext: who is sending. Ports send "as" a context: its proc routes the envelope and its
// address becomes the envelope's sender (where undeliverables return). Actor contexts and
// proc clients are SendContexts.
#pragma once

#include <memory>

#include "postal/runtime/address.h"

namespace postal::runtime {

class Proc;
class Mailbox;

class SendContext {
 public:
  virtual ~SendContext() = default;
  virtual Proc& proc() = 0;
  virtual std::shared_ptr<Mailbox> mailbox() = 0;
  virtual const ActorAddr& self_addr() const = 0;
};

}  // namespace postal::runtime
