// Router: true longest-prefix routing of envelopes by destination id (R-ROUTE-2).
//
// Routes map an id prefix — a proc, an actor, or a port — to a MailboxSender. An envelope is
// routed on its next hop: the port route wins over the actor route, which wins over the proc
// route (port ⊒ actor ⊒ proc). With no match the fallback sender takes it, or, without one, it
// fails with Transport(NoRoute). Lookups are three hash probes at most, whatever the table size.
//
// Senders are borrowed: they must outlive the router or be removed first. Routes may change
// while envelopes flow (a reader lock guards the tables).
#pragma once

#include <cstddef>

#include "absl/synchronization/mutex.h"
#include "postal/routing/flat_prefix_table.h"
#include "postal/runtime/mailbox_sender.h"

namespace postal::routing {

class Router final : public runtime::MailboxSender {
 public:
  explicit Router(runtime::MailboxSender* fallback = nullptr) : fallback_(fallback) {}

  // Adds or replaces the route for `prefix`.
  void add(const RoutePrefix& prefix, runtime::MailboxSender* sender);
  // Removes it; returns whether it existed.
  bool remove(const RoutePrefix& prefix);
  void set_fallback(runtime::MailboxSender* fallback);
  size_t size() const;

  // The sender for `hop` by longest prefix, or the fallback (nullptr when neither).
  runtime::MailboxSender* lookup(const runtime::PortId& hop) const;

  void post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle& ret) override;

 private:
  mutable absl::Mutex mu_;
  FlatPrefixTable<runtime::MailboxSender*> routes_ ABSL_GUARDED_BY(mu_);
  runtime::MailboxSender* fallback_ ABSL_GUARDED_BY(mu_);
};

}  // namespace postal::routing
