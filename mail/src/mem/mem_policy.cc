// Which settings govern a mem delivery: the subscription's own (M-RETRY-5), else the mailbox's
// policy (M-RETRY-6), else the provider's configuration — field by field, read when they apply,
// so a policy set while a subscription exists governs its next attempt.
#include "mem_state.h"

namespace postal::mail::mem_internal {
namespace {

const MailboxPolicy* policy_of(const BusState& bus, const std::string& address)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (bus.policies.empty()) return nullptr;  // the common case: one test of an empty map
  auto it = bus.policies.find(address);
  return it == bus.policies.end() ? nullptr : &it->second;
}

}  // namespace

AttemptPolicy attempt_policy_locked(const BusState& bus, const SubscriberState& sub) {
  AttemptPolicy p{sub.config->retry, sub.config->settle_timeout};
  if (const MailboxPolicy* box = policy_of(bus, sub.topic)) {
    if (box->retry) p.retry = box->retry;
    if (box->settle_timeout) p.settle_timeout = *box->settle_timeout;
  }
  if (sub.own_retry) p.retry = sub.own_retry;
  if (sub.own_settle_timeout) p.settle_timeout = *sub.own_settle_timeout;
  return p;
}

uint64_t max_rounds_locked(const BusState& bus, const Config& config, const Topic& topic) {
  const MailboxPolicy* box = policy_of(bus, topic.address.canonical());
  return box && box->max_delivery_rounds ? *box->max_delivery_rounds : config.max_rounds;
}

std::optional<DeadLetterOptions> dead_letter_locked(const BusState& bus, const Config& config,
                                                    const Topic& topic) {
  const MailboxPolicy* box = policy_of(bus, topic.address.canonical());
  if (box == nullptr || !box->dead_letter) return config.dead_letter;
  if (!*box->dead_letter) return std::nullopt;
  return config.dead_letter.value_or(DeadLetterOptions{});
}

}  // namespace postal::mail::mem_internal
