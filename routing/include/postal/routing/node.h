// Node: a networked proc — a Proc, the channel server others reach it on, a DialRouter as its
// forwarder, optionally a Gateway in front of it, and the system actors.
//
// Without a gateway, the channel server delivers straight into the proc, and the proc's
// location is its bound listen address (a tcp port 0 is resolved first). With a gateway (a host
// agent's node), the server delivers into the Gateway; the gateway delivers to the node's own
// proc and to the procs attached to it (`attach`), forwards everything else to the dial router,
// and the proc's location is the one the gateway advertises for it.
//
// Envelopes that come back asynchronously (a channel's ack timeout, a closed session) are
// returned through the node's proc, so they reach their senders like any undeliverable.
//
// R-SEC-2 (no open relay): what arrives over the channel server is routed only along the routes
// the node was given — its own proc, its gateway's attached procs and peers, its dial router's
// address book; an envelope naming any other location returns Transport(NoRoute) to its sender
// and nothing is dialed for it. What the node's own actors send (replies included) dials its
// destination as before. R-SEC-1: `channel.key` authenticates every channel of the node (its
// server refuses connections without the key; its clients prove it); docs/security.md.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "postal/routing/channel.h"
#include "postal/routing/channel_server.h"
#include "postal/routing/dial_router.h"
#include "postal/routing/gateway.h"
#include "postal/runtime/proc.h"

namespace postal::routing {

struct NodeOptions {
  runtime::ProcId id;
  runtime::ChannelAddr listen;
  // How others reach this node's entry (its gateway, or the proc); default: the bound address.
  std::optional<runtime::Location> location;
  // Run a gateway with this uid in front of the proc.
  std::optional<runtime::Uid> gateway;
  // A node's workers share the cores with its I/O thread, so they spin less before sleeping
  // than a proc's default (20 µs, not 50): on 2 vCPUs a 50 µs spin kept the I/O thread that
  // carries the reply off its core (ipc ping-pong p50 100–110 µs at 50, ~70 µs at 10–20, 150 µs
  // at 5; docs/benchmarks.md).
  runtime::SchedulerOptions scheduler = node_scheduler();
  ChannelOptions channel;
  // R-FLOW-1: the proc's default mailbox bound (runtime::ProcOptions::mailbox).
  runtime::MailboxBound mailbox;
  bool system_actors = true;
  // R-SCHED-2: worker 0 waits in the I/O thread's loop when idle instead of sleeping
  // (runtime/scheduler.h, "Idle poll"); false: the I/O thread always reads, and the workers sleep.
  bool idle_poll = true;

  static runtime::SchedulerOptions node_scheduler() {
    runtime::SchedulerOptions o;
    o.spin = absl::Microseconds(20);
    return o;
  }
};

class Node {
 public:
  static absl::StatusOr<std::unique_ptr<Node>> start(NodeOptions options);
  ~Node();

  runtime::Proc& proc() { return *proc_; }
  DialRouter& dial_router() { return *dial_; }
  Gateway* gateway() { return gateway_.get(); }
  const runtime::ChannelAddr& listen_addr() const { return server_->local_addr(); }
  ChannelServer& server() { return *server_; }

  // Gateway nodes: attach the proc `id`, listening at `addr`, behind this node's gateway, and
  // return the address others reach it at.
  absl::StatusOr<runtime::ProcAddr> attach(const runtime::ProcId& id,
                                           const runtime::ChannelAddr& addr);
  void detach(const runtime::ProcId& id);
  // Gateway nodes: forward envelopes whose next via names `gateway` to it, at `addr`.
  absl::Status add_peer(const runtime::Uid& gateway, const runtime::ChannelAddr& addr);

 private:
  // Stands in for the proc until it exists, and after it is gone (during teardown).
  class Relay final : public runtime::MailboxSender, public runtime::ReturnHandle {
   public:
    void set(runtime::MailboxSender* to, runtime::ReturnHandle* ret) {
      ret_.store(ret);
      to_.store(to);
    }
    void post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle& ret) override;
    bool accepts_stream(const runtime::PortAddr& next_hop) const override;
    bool notify_on_room(const runtime::ActorId& actor, std::function<void()> on_room) override;
    void return_envelope(runtime::EnvelopePtr env) override;
    void drop(runtime::EnvelopePtr env, runtime::DropCause cause) override;

   private:
    std::atomic<runtime::MailboxSender*> to_{nullptr};
    std::atomic<runtime::ReturnHandle*> ret_{nullptr};
  };

  // R-SEC-2: what the channel server delivers into (through the relay).
  class Ingress final : public runtime::MailboxSender {
   public:
    explicit Ingress(Node& node) : node_(node) {}
    void post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle& ret) override;
    bool accepts_stream(const runtime::PortAddr& next_hop) const override;
    // Credit (docs/wire.md §10.1) for this proc's own actors; not through a gateway.
    bool notify_on_room(const runtime::ActorId& actor, std::function<void()> on_room) override;

   private:
    Node& node_;
  };

  Node() = default;

  IoThread io_;
  ChannelOptions channel_;
  Relay relay_;
  Ingress ingress_{*this};
  std::vector<std::unique_ptr<ChannelClient>> peers_;
  std::unique_ptr<DialRouter> dial_;
  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<runtime::Proc> proc_;
  std::unique_ptr<ChannelServer> server_;
};

}  // namespace postal::routing
