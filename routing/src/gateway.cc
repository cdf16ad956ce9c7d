#include "postal/routing/gateway.h"

#include "absl/strings/str_cat.h"
#include "postal/runtime/mailbox_bound.h"

namespace postal::routing {

using runtime::DeliveryFailure;
using runtime::EnvelopePtr;
using runtime::MessageEnvelope;
using runtime::TransportReason;

Gateway::Gateway(runtime::Uid uid, runtime::Location location, runtime::MailboxSender* forwarder)
    : uid_(std::move(uid)), location_(std::move(location)), forwarder_(forwarder) {}

absl::Status Gateway::attach(const runtime::ProcId& proc, runtime::MailboxSender* sender) {
  absl::MutexLock lock(&mu_);
  if (!procs_.try_emplace(proc, sender).second) {
    return absl::AlreadyExistsError(absl::StrCat("proc ", proc.to_string(),
                                                 " is already attached to gateway ",
                                                 uid_.to_string(), "; detach it first"));
  }
  return absl::OkStatus();
}

bool Gateway::detach(const runtime::ProcId& proc) {
  absl::MutexLock lock(&mu_);
  return procs_.erase(proc) > 0;
}

absl::Status Gateway::add_peer(const runtime::Uid& gateway, runtime::MailboxSender* sender) {
  absl::MutexLock lock(&mu_);
  if (!peers_.try_emplace(gateway, sender).second) {
    return absl::AlreadyExistsError(absl::StrCat("gateway ", gateway.to_string(),
                                                 " is already a peer of gateway ", uid_.to_string(),
                                                 "; remove it first"));
  }
  return absl::OkStatus();
}

bool Gateway::remove_peer(const runtime::Uid& gateway) {
  absl::MutexLock lock(&mu_);
  return peers_.erase(gateway) > 0;
}

void Gateway::set_forwarder(runtime::MailboxSender* forwarder) {
  absl::MutexLock lock(&mu_);
  forwarder_ = forwarder;
}

runtime::ProcAddr Gateway::advertise(const runtime::ProcId& proc) const {
  // Vias are in path order from the channel: the gateways before this one, then this one.
  runtime::Location loc =
      runtime::Location::via(uid_, runtime::Location::addr(location_.channel()));
  const auto& before = location_.vias();
  for (auto it = before.rbegin(); it != before.rend(); ++it) loc = runtime::Location::via(*it, loc);
  return runtime::ProcAddr{proc, std::move(loc)};
}

void Gateway::no_route(EnvelopePtr env, runtime::ReturnHandle& ret, std::string why) {
  std::string target = env->next_hop().to_string();
  MessageEnvelope::undeliverable(
      std::move(env),
      DeliveryFailure::transport_failure(std::move(target), TransportReason::kNoRoute,
                                         absl::StrCat("gateway ", uid_.to_string(), ": ", why)),
      ret);
}

void Gateway::post_unchecked(EnvelopePtr env, runtime::ReturnHandle& ret) {
  route(std::move(env), ret, nullptr);
}

void Gateway::post_from_network(EnvelopePtr env, runtime::ReturnHandle& ret,
                                runtime::MailboxSender& foreign) {
  route(std::move(env), ret, &foreign);
}

Gateway::Next Gateway::resolve(const runtime::PortAddr& first,
                               runtime::MailboxSender* foreign) const {
  Next next;
  const runtime::PortAddr* hop = &first;
  for (;;) {
    if (hop->location.is_via()) {
      const runtime::Uid& via = hop->location.via_uid();
      const bool self = via == uid_;
      auto peer = self ? peers_.end() : peers_.find(via);
      if (!self && peer == peers_.end()) {  // R-GW-1: a via naming neither → forwarder
        next.sender = foreign != nullptr ? foreign : forwarder_;
        return next;
      }
      next.hop = runtime::PortAddr{hop->id, hop->location.inner()};
      hop = &*next.hop;
      if (self) continue;  // peel our own hop and route again
      next.sender = peer->second;
      return next;
    }
    if (auto it = procs_.find(hop->id.actor.proc); it != procs_.end()) {
      next.sender = it->second;  // no via left and the proc is attached here: deliver
      return next;
    }
    // Having peeled our own hop, the proc should have been here.
    if (!next.hop) next.sender = foreign != nullptr ? foreign : forwarder_;
    return next;
  }
}

bool Gateway::streams_to(const runtime::PortAddr& next_hop, runtime::MailboxSender* foreign) const {
  Next next;
  {
    absl::ReaderMutexLock lock(&mu_);
    next = resolve(next_hop, foreign);
  }
  return next.sender != nullptr && next.sender->accepts_stream(next.hop ? *next.hop : next_hop);
}

void Gateway::route(EnvelopePtr env, runtime::ReturnHandle& ret, runtime::MailboxSender* foreign) {
  runtime::NoBlockScope no_block;  // R-FLOW-2: a gateway never waits for a full mailbox
  Next next;
  {
    absl::ReaderMutexLock lock(&mu_);
    next = resolve(env->next_hop(), foreign);
  }
  const bool peeled = next.hop.has_value();
  if (peeled) env->set_next_hop(*std::move(next.hop));
  if (next.sender == nullptr) {
    no_route(std::move(env), ret,
             peeled ? "the proc is not attached here" : "no forwarder for foreign locations");
    return;
  }
  next.sender->post(std::move(env), ret);
}

}  // namespace postal::routing
