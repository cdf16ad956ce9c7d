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
                                                 " is already a peer of gateway ",
                                                 uid_.to_string(), "; remove it first"));
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
  runtime::Location loc = runtime::Location::via(uid_, runtime::Location::addr(location_.channel()));
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

void Gateway::route(EnvelopePtr env, runtime::ReturnHandle& ret, runtime::MailboxSender* foreign) {
  runtime::NoBlockScope no_block;  // R-FLOW-2: a gateway never waits for a full mailbox
  bool peeled = false;
  runtime::MailboxSender* next = nullptr;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (;;) {
      const runtime::PortAddr& hop = env->next_hop();
      if (hop.location.is_via()) {
        const runtime::Uid& via = hop.location.via_uid();
        const bool self = via == uid_;
        auto peer = self ? peers_.end() : peers_.find(via);
        if (!self && peer == peers_.end()) {  // R-GW-1: a via naming neither → forwarder
          next = foreign != nullptr ? foreign : forwarder_;
          break;
        }
        runtime::PortAddr inner{hop.id, hop.location.inner()};
        env->set_next_hop(std::move(inner));
        peeled = true;
        if (self) continue;  // peel our own hop and route again
        next = peer->second;
        break;
      }
      if (auto it = procs_.find(hop.id.actor.proc); it != procs_.end()) {
        next = it->second;  // no via left and the proc is attached here: deliver
        break;
      }
      if (peeled) {
        next = nullptr;  // we peeled our own hop, so the proc should have been here
        break;
      }
      next = foreign != nullptr ? foreign : forwarder_;
      break;
    }
  }
  if (next == nullptr) {
    no_route(std::move(env), ret,
             peeled ? "the proc is not attached here" : "no forwarder for foreign locations");
    return;
  }
  next->post(std::move(env), ret);
}

}  // namespace postal::routing
