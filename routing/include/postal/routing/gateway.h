// Gateway: next-hop routing with Via peeling (R-GW-1, R-GW-2).
//
// A gateway is a MailboxSender with an identity (a Uid) and the channel location where it can be
// reached. It routes on the envelope's next hop location:
//
//   outermost Via(uid) names a peer gateway → peel it, post to that peer
//   outermost Via(uid) names this gateway   → peel it, route again
//   outermost Via(uid) names neither        → hand the envelope, unpeeled, to the forwarder
//   no via left: a locally attached proc with the next hop's proc id → deliver to it;
//                else, if this gateway peeled a hop → Transport(NoRoute);
//                else → the forwarder.
//
// R-GW-2 follows: an envelope whose via names another gateway is never delivered locally, even
// when its inner proc id is attached here.
//
// Vias are in path order: a location `g1.g2.tcp://h:p` is reached by dialing tcp://h:p (where
// g1 listens); g1 peels itself and passes to its peer g2, which delivers. A gateway's own
// `location` says how envelopes reach it (the gateways in front of it and the entry channel), and
// it advertises an attached proc as that location with itself appended as the innermost via.
// Procs attach with the sender that reaches them (the Proc itself in-process, or a channel
// client). Senders are borrowed.
#pragma once

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "postal/runtime/address.h"
#include "postal/runtime/mailbox_sender.h"

namespace postal::routing {

class Gateway final : public runtime::MailboxSender {
 public:
  // `location` is where this gateway is reached (its channel, possibly behind vias itself).
  Gateway(runtime::Uid uid, runtime::Location location,
          runtime::MailboxSender* forwarder = nullptr);

  const runtime::Uid& uid() const { return uid_; }
  const runtime::Location& location() const { return location_; }

  // AlreadyExists when `proc` is attached already: a second attach never takes over another's
  // traffic silently (detach first).
  absl::Status attach(const runtime::ProcId& proc, runtime::MailboxSender* sender);
  bool detach(const runtime::ProcId& proc);
  // AlreadyExists when `gateway` is a peer already (remove_peer first).
  absl::Status add_peer(const runtime::Uid& gateway, runtime::MailboxSender* sender);
  bool remove_peer(const runtime::Uid& gateway);
  void set_forwarder(runtime::MailboxSender* forwarder);

  // Where an attached proc is reached from outside: Via(this gateway, its location).
  runtime::ProcAddr advertise(const runtime::ProcId& proc) const;

  void post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle& ret) override;
  // R-SEC-2: routes an envelope that arrived over the network: as post_unchecked, with
  // `foreign` in place of the forwarder (a Node passes its dial router's booked_only()).
  void post_from_network(runtime::EnvelopePtr env, runtime::ReturnHandle& ret,
                         runtime::MailboxSender& foreign);
  // wire.md §9.7: whether the next sender forwards chunks as they arrive.
  bool accepts_stream(const runtime::PortAddr& next_hop) const override {
    return streams_to(next_hop, nullptr);
  }
  bool accepts_stream_from_network(const runtime::PortAddr& next_hop,
                                   runtime::MailboxSender& foreign) const {
    return streams_to(next_hop, &foreign);
  }

 private:
  // Where `hop` goes from here: the next sender (null: no route) and, when vias naming this
  // gateway or a peer were peeled, the next hop after them.
  struct Next {
    runtime::MailboxSender* sender = nullptr;
    std::optional<runtime::PortAddr> hop;
  };
  Next resolve(const runtime::PortAddr& hop, runtime::MailboxSender* foreign) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool streams_to(const runtime::PortAddr& next_hop, runtime::MailboxSender* foreign) const;
  void route(runtime::EnvelopePtr env, runtime::ReturnHandle& ret, runtime::MailboxSender* foreign);
  void no_route(runtime::EnvelopePtr env, runtime::ReturnHandle& ret, std::string why);

  const runtime::Uid uid_;
  const runtime::Location location_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<runtime::ProcId, runtime::MailboxSender*> procs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<runtime::Uid, runtime::MailboxSender*> peers_ ABSL_GUARDED_BY(mu_);
  runtime::MailboxSender* forwarder_ ABSL_GUARDED_BY(mu_);
};

}  // namespace postal::routing
