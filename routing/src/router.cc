#include "postal/routing/router.h"

namespace postal::routing {

void Router::add(const RoutePrefix& prefix, runtime::MailboxSender* sender) {
  absl::MutexLock lock(&mu_);
  std::visit(
      [&](const auto& id) {
        using T = std::decay_t<decltype(id)>;
        if constexpr (std::is_same_v<T, runtime::PortId>) {
          ports_[id] = sender;
        } else if constexpr (std::is_same_v<T, runtime::ActorId>) {
          actors_[id] = sender;
        } else {
          procs_[id] = sender;
        }
      },
      prefix);
}

bool Router::remove(const RoutePrefix& prefix) {
  absl::MutexLock lock(&mu_);
  return std::visit(
      [&](const auto& id) -> bool {
        using T = std::decay_t<decltype(id)>;
        if constexpr (std::is_same_v<T, runtime::PortId>) {
          return ports_.erase(id) > 0;
        } else if constexpr (std::is_same_v<T, runtime::ActorId>) {
          return actors_.erase(id) > 0;
        } else {
          return procs_.erase(id) > 0;
        }
      },
      prefix);
}

void Router::set_fallback(runtime::MailboxSender* fallback) {
  absl::MutexLock lock(&mu_);
  fallback_ = fallback;
}

size_t Router::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return ports_.size() + actors_.size() + procs_.size();
}

runtime::MailboxSender* Router::lookup(const runtime::PortId& hop) const {
  absl::ReaderMutexLock lock(&mu_);
  if (!ports_.empty()) {
    if (auto it = ports_.find(hop); it != ports_.end()) return it->second;
  }
  if (!actors_.empty()) {
    if (auto it = actors_.find(hop.actor); it != actors_.end()) return it->second;
  }
  if (auto it = procs_.find(hop.actor.proc); it != procs_.end()) return it->second;
  return fallback_;
}

void Router::post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle& ret) {
  runtime::MailboxSender* next = lookup(env->next_hop().id);
  if (next == nullptr) {  // R-ROUTE-2
    std::string target = env->next_hop().to_string();
    runtime::MessageEnvelope::undeliverable(
        std::move(env),
        runtime::DeliveryFailure::transport_failure(std::move(target),
                                                    runtime::TransportReason::kNoRoute,
                                                    "no route matches and no fallback is set"),
        ret);
    return;
  }
  next->post(std::move(env), ret);
}

}  // namespace postal::routing
