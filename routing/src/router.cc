#include "postal/routing/router.h"

namespace postal::routing {

void Router::add(const RoutePrefix& prefix, runtime::MailboxSender* sender) {
  absl::MutexLock lock(&mu_);
  routes_.add(prefix, sender);
}

bool Router::remove(const RoutePrefix& prefix) {
  absl::MutexLock lock(&mu_);
  return routes_.remove(prefix);
}

void Router::set_fallback(runtime::MailboxSender* fallback) {
  absl::MutexLock lock(&mu_);
  fallback_ = fallback;
}

size_t Router::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return routes_.size();
}

runtime::MailboxSender* Router::lookup(const runtime::PortId& hop) const {
  absl::ReaderMutexLock lock(&mu_);
  runtime::MailboxSender* const* found = routes_.lookup(hop);
  return found != nullptr ? *found : fallback_;
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
