// DialRouter: reaches other procs by dialing channels on first use (R-ROUTE-3).
//
// An address book maps id prefixes (longest prefix wins) to channel addresses. An envelope is
// routed on its next hop: the book's address if a prefix matches, else the channel of the next
// hop's own location (for a location behind vias, that is where its outermost gateway listens).
// The first envelope to an address dials it; the client is cached for the next ones. A client
// whose session was rejected (its peer restarted and lost the session) or that closed is evicted
// and the address redialed. A failed dial fails the envelope with Transport(DialFailed) naming
// the address and the OS error.
//
// R-FLOW-3: a dial never blocks the posting thread, the I/O thread or the router's lock: the
// client is made at once (ChannelClient::dial_async) and connects on the I/O thread; envelopes
// wait for it in its bounded dial queue and return DialFailed (to the router's `returns`) when
// the dial fails. A dead or unreachable peer delays no traffic to another. Evicted clients are
// kept until the router is destroyed, since other threads may still be posting into them.
#pragma once

#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "postal/routing/channel.h"
#include "postal/routing/channel_client.h"
#include "postal/routing/flat_prefix_table.h"
#include "postal/runtime/mailbox_sender.h"

namespace postal::routing {

class DialRouter final : public runtime::MailboxSender {
 public:
  // `returns` receives envelopes a channel gives back asynchronously (ack timeouts, closes).
  DialRouter(IoThread& io, runtime::ReturnHandle& returns, ChannelOptions options = {});
  ~DialRouter() override;

  void add(const RoutePrefix& prefix, runtime::ChannelAddr addr);
  bool remove(const RoutePrefix& prefix);

  size_t live_clients() const;
  size_t dials() const;  // dials started, including redials

  void post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle& ret) override;

 private:
  // The cached client for `addr`, dialed (or redialed) as needed.
  absl::StatusOr<ChannelClient*> client_for(const runtime::ChannelAddr& addr);

  IoThread& io_;
  runtime::ReturnHandle& returns_;
  const ChannelOptions options_;
  mutable absl::Mutex mu_;
  FlatPrefixTable<runtime::ChannelAddr> book_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<runtime::ChannelAddr, std::unique_ptr<ChannelClient>> clients_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<ChannelClient>> evicted_ ABSL_GUARDED_BY(mu_);
  size_t dials_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace postal::routing
