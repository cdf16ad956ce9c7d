// StreamClientCore's side of credit (docs/wire.md §10.1, R-FLOW-2; stream_client.h has the
// threading): CREDIT pauses a destination actor whose mailbox is full at the receiving proc, and
// the client holds that actor's envelopes — unsequenced, in order, within the per-destination
// queue bound (QueueBounds) — instead of writing them, until CREDIT opens it again. Other
// destinations keep flowing: a full actor costs the connection nothing. Pauses belong to the
// session: a new session opens every destination; on a resumed one the server repeats its
// pauses, and the opens it could not send, right after WELCOME. Every function here runs holding
// io_mu_.
#include "absl/strings/str_cat.h"
#include "credit_frame.h"
#include "session_credit.h"
#include "postal/wire/absl_compat.h"
#include "stream_client.h"

namespace postal::routing::internal {

using runtime::DeliveryFailure;
using runtime::EnvelopePtr;
using runtime::MessageEnvelope;

void StreamClientCore::on_credit(uint64_t gen, std::string_view body) {
  if (link_ != Link::kUp || (limits_.features & v2::kFeatureCredit) == 0) {
    return link_failed(gen, "protocol error: CREDIT without the credit feature, or before WELCOME");
  }
  absl::StatusOr<v2::Credit> credit = v2::decode_credit(body);
  if (!credit.ok()) {
    return link_failed(gen, absl::StrCat("protocol error: ", credit.status().message()));
  }
  bool opened = false;
  for (const v2::CreditEntry& e : credit->entries) {
    if (e.state == v2::CreditState::kPaused) {
      // Bounded like the server's side: past it a destination stays open, and the server
      // refuses its overflow one by one.
      if (paused_.size() < SessionCredit::kMaxPaused) paused_.try_emplace(e.actor, Paused{{}, absl::Now()});
      continue;
    }
    auto it = paused_.find(e.actor);
    if (it == paused_.end()) continue;  // absolute: an open destination stays open
    std::deque<EnvelopePtr> envs = std::move(it->second.envs);
    paused_.erase(it);
    paused_held_.fetch_sub(envs.size(), std::memory_order_acq_rel);
    for (EnvelopePtr& env : envs) admit(std::move(env));  // in order, behind nothing of theirs
    opened = true;
  }
  paused_count_.store(paused_.size(), std::memory_order_release);
  if (opened) flush_writes();
}

bool StreamClientCore::hold_paused(EnvelopePtr& env) {
  if (paused_.empty() || env->dest().id.port.kind() != runtime::Port::Kind::kHandler) return false;
  // Replies to ephemeral ports never wait: the mailbox bound counts handler ports only.
  auto it = paused_.find(env->dest().id.actor);
  if (it == paused_.end()) return false;
  it->second.envs.push_back(std::move(env));
  paused_held_.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

std::vector<EnvelopePtr> StreamClientCore::take_paused() {
  std::vector<EnvelopePtr> out;
  for (auto& [actor, p] : paused_) {
    for (EnvelopePtr& env : p.envs) out.push_back(std::move(env));
  }
  paused_.clear();
  paused_count_.store(0, std::memory_order_release);
  paused_held_.store(0, std::memory_order_release);
  return out;
}

void StreamClientCore::expire_paused() {
  const absl::Time now = absl::Now();
  for (auto& [actor, p] : paused_) {
    if (p.envs.empty() || now - p.since < options_.delivery_timeout) continue;
    const uint64_t held = p.envs.size();
    for (EnvelopePtr& env : p.envs) {
      outstanding_.fetch_sub(1, std::memory_order_acq_rel);
      bounds_.release(*env);  // R-FLOW-2
      std::string target = env->dest().to_string();
      MessageEnvelope::undeliverable(
          std::move(env),
          DeliveryFailure::overloaded(
              std::move(target), runtime::OverloadBound::kDestinationMessages, held,
              options_.max_queue_per_destination,
              absl::StrCat("the destination's mailbox stayed full (CREDIT paused) for ",
                           absl::FormatDuration(options_.delivery_timeout))),
          returns_);
    }
    p.envs.clear();
    paused_held_.fetch_sub(held, std::memory_order_acq_rel);
    p.since = now;  // the pause goes on; what is held from now on gets its own time
  }
}

bool StreamClientCore::waiting_on_credit() const {
  return link_ == Link::kUp && acked_ == next_seq_ && !paused_.empty();
}

}  // namespace postal::routing::internal
