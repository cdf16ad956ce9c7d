// SessionCredit: docs/wire.md §10.1 (R-FLOW-2).
#include "session_credit.h"

#include "credit_frame.h"
#include "postal/runtime/delivery_failure.h"

namespace postal::routing::internal {

std::optional<runtime::ActorId> SessionCredit::refused_by_full_mailbox(
    const runtime::MessageEnvelope& env) {
  if (env.delivery_failures().empty()) return std::nullopt;
  const runtime::DeliveryFailure& f = env.delivery_failures().back();
  if (f.transport != runtime::TransportReason::kOverloaded ||
      (f.bound != runtime::OverloadBound::kMailboxMessages &&
       f.bound != runtime::OverloadBound::kMailboxBytes) ||
      env.dest().id.port.kind() != runtime::Port::Kind::kHandler) {
    return std::nullopt;
  }
  return env.dest().id.actor;
}

void SessionCredit::pause(const runtime::ActorId& actor, std::string& out) {
  paused_.insert(actor);
  v2::append(out, v2::Credit{{{v2::CreditState::kPaused, actor}}});
}

void SessionCredit::repeat(std::string& out) {
  v2::Credit c;
  auto add = [&](v2::CreditState state, const runtime::ActorId& actor) {
    c.entries.push_back({state, actor});
    if (c.entries.size() == v2::kMaxCreditEntries) {
      v2::append(out, c);
      c.entries.clear();
    }
  };
  for (const runtime::ActorId& actor : paused_) add(v2::CreditState::kPaused, actor);
  for (const runtime::ActorId& actor : unsent_opens_) add(v2::CreditState::kOpen, actor);
  unsent_opens_.clear();
  if (!c.entries.empty()) v2::append(out, c);
}

}  // namespace postal::routing::internal
