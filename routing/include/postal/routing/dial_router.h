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
// the dial fails. A dead or unreachable peer delays no traffic to another.
//
// Eviction frees: a client is held by shared_ptr, and a posting thread takes its own reference
// under the router's lock and drops it after the post, so an evicted client is destroyed (its
// connection closed) once the last post into it has returned, never while one is in progress.
// Besides closed and rejected clients, a client that is idle — nothing unacked, no post for
// ChannelOptions::idle_client_timeout (60 s), no post in progress — is evicted by a sweep on the
// I/O thread (every quarter of the timeout, 10 ms–10 s), so procs that talk once to throwaway
// peers (`postal status`) do not keep a client per peer for good.
//
// R-SEC-2 (no open relay): `booked_only()` is the same router restricted to its address book. A
// Node routes what arrives over its channel server through it, so an envelope from the network
// naming a location that is not among the proc's routes returns Transport(NoRoute) to its
// sender and nothing is dialed for it; what local actors send dials as above.
#pragma once

#include <memory>

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

  // Clients cached now (dialing, connected, or closed and not yet evicted).
  size_t live_clients() const;
  size_t dials() const;  // dials started, including redials

  void post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle& ret) override;
  // wire.md §9.7: ipc and tcp channels forward a payload's chunks as they arrive.
  bool accepts_stream(const runtime::PortAddr& next_hop) const override {
    return streams_to(next_hop, /*booked_only=*/false);
  }

  // R-SEC-2: posts only to next hops the address book names; others fail with NoRoute.
  runtime::MailboxSender& booked_only() { return booked_only_; }

 private:
  class BookedOnly final : public runtime::MailboxSender {
   public:
    explicit BookedOnly(DialRouter& router) : router_(router) {}
    void post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle& ret) override {
      router_.route(std::move(env), ret, /*booked_only=*/true);
    }
    bool accepts_stream(const runtime::PortAddr& next_hop) const override {
      return router_.streams_to(next_hop, /*booked_only=*/true);
    }

   private:
    DialRouter& router_;
  };
  void route(runtime::EnvelopePtr env, runtime::ReturnHandle& ret, bool booked_only);
  // Whether the channel `next_hop` goes out on forwards chunks as they arrive (ipc, tcp).
  bool streams_to(const runtime::PortAddr& next_hop, bool booked_only) const;

  struct Cached {
    std::shared_ptr<ChannelClient> client;
    uint64_t posts = 0;       // posts routed to it (no clock read per post)
    uint64_t posts_seen = 0;  // `posts` at the last sweep that saw it change
    absl::Time quiet_since;   // when that sweep ran (or when the client was made)
  };
  // The last route taken (a post of a burst repeats it): valid while `epoch_` is unchanged.
  // `chan` is where the next hop's location keeps its channel (locations are interned, so the
  // address is the location's identity); `from_book` says the book named the address.
  struct LastRoute {
    uint64_t epoch = 0;
    runtime::PortId id;
    const runtime::ChannelAddr* chan = nullptr;
    bool from_book = false;
    Cached* cached = nullptr;
  };
  struct Sweeper;  // the I/O thread's timer for idle eviction

  // The cached client for `addr`, dialed (or redialed) as needed. `evicted` receives a closed
  // client replaced here, to be destroyed by the caller after it releases the lock.
  absl::StatusOr<std::shared_ptr<ChannelClient>> client_for(const runtime::ChannelAddr& addr,
                                                            std::shared_ptr<ChannelClient>& evicted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void arm_sweep();
  // Evicts idle, closed and rejected clients (I/O thread).
  void sweep();

  IoThread& io_;
  runtime::ReturnHandle& returns_;
  const ChannelOptions options_;
  mutable absl::Mutex mu_;
  FlatPrefixTable<runtime::ChannelAddr> book_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<runtime::ChannelAddr, Cached> clients_ ABSL_GUARDED_BY(mu_);
  size_t dials_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 1;  // bumped whenever book_ or clients_ changes
  LastRoute last_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Sweeper> sweeper_;
  BookedOnly booked_only_{*this};
};

}  // namespace postal::routing
