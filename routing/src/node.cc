#include "postal/routing/node.h"

#include <filesystem>

#include "postal/actors/system_actors.h"
#include "postal/runtime/mailbox_bound.h"

namespace postal::routing {

void Node::Relay::post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle& ret) {
  // R-FLOW-2: what arrives over a channel (inproc ones too: on the sender's thread) never waits
  // for room in a full mailbox; it returns Overloaded to its sender.
  runtime::NoBlockScope no_block;
  runtime::MailboxSender* to = to_.load();
  if (to == nullptr) {
    std::string target = env->next_hop().to_string();
    runtime::MessageEnvelope::undeliverable(
        std::move(env),
        runtime::DeliveryFailure::transport_failure(std::move(target),
                                                    runtime::TransportReason::kLinkUnavailable,
                                                    "the receiving proc is not running"),
        ret);
    return;
  }
  to->post(std::move(env), ret);
}

bool Node::Relay::accepts_stream(const runtime::PortAddr& next_hop) const {
  runtime::MailboxSender* to = to_.load();
  return to != nullptr && to->accepts_stream(next_hop);
}

bool Node::Relay::notify_on_room(const runtime::ActorId& actor, std::function<void()> on_room) {
  runtime::MailboxSender* to = to_.load();
  return to != nullptr && to->notify_on_room(actor, std::move(on_room));
}

void Node::Relay::return_envelope(runtime::EnvelopePtr env) {
  if (runtime::ReturnHandle* ret = ret_.load()) ret->return_envelope(std::move(env));
}

void Node::Relay::drop(runtime::EnvelopePtr env, runtime::DropCause cause) {
  if (runtime::ReturnHandle* ret = ret_.load()) ret->drop(std::move(env), cause);
}

// R-SEC-2: only along given routes. The relay's post counted the hop (TTL) already, as the
// proc's or gateway's own post did before; the next sender's post counts the next one.
void Node::Ingress::post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle& ret) {
  if (node_.gateway_) {
    node_.gateway_->post_from_network(std::move(env), ret, node_.dial_->booked_only());
  } else if (env->next_hop().id.actor.proc == node_.proc_->id()) {
    node_.proc_->post_unchecked(std::move(env), ret);
  } else {
    node_.dial_->booked_only().post(std::move(env), ret);
  }
}

bool Node::Ingress::accepts_stream(const runtime::PortAddr& next_hop) const {
  if (node_.gateway_)
    return node_.gateway_->accepts_stream_from_network(next_hop, node_.dial_->booked_only());
  return next_hop.id.actor.proc != node_.proc_->id() &&
         node_.dial_->booked_only().accepts_stream(next_hop);
}

bool Node::Ingress::notify_on_room(const runtime::ActorId& actor,
                                   std::function<void()> on_room) {
  if (node_.gateway_ || !(actor.proc == node_.proc_->id())) return false;
  return node_.proc_->notify_on_room(actor, std::move(on_room));
}

absl::StatusOr<std::unique_ptr<Node>> Node::start(NodeOptions options) {
  if (options.listen.transport() == runtime::ChannelAddr::Transport::kNats &&
      options.channel.nats_url.empty()) {
    // Dial every nats:// peer through this node's own NATS server (ChannelOptions::nats_url).
    const std::string_view host = options.listen.host();
    const bool v6 = host.find(':') != std::string_view::npos;
    options.channel.nats_url =
        absl::StrCat("nats://", v6 ? "[" : "", sv(host), v6 ? "]" : "", ":", options.listen.port());
  }
  if (options.listen.transport() == runtime::ChannelAddr::Transport::kNats &&
      options.channel.nats_member.empty()) {
    // Its NATS user is its proc id: the one allowed to serve its subject (R-SEC-4).
    options.channel.nats_member = options.id.to_string();
  }
  if (options.listen.transport() == runtime::ChannelAddr::Transport::kIpc &&
      !options.listen.is_abstract()) {
    // A socket path's folder is created if missing (topology files name paths under /tmp),
    // private to its user (R-SEC-3); a folder that exists keeps its mode.
    const std::filesystem::path folder = std::filesystem::path(options.listen.path()).parent_path();
    std::error_code ignored;
    if (!std::filesystem::exists(folder, ignored) &&
        std::filesystem::create_directories(folder, ignored)) {
      std::filesystem::permissions(folder, std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::replace, ignored);
    }
  }
  std::unique_ptr<Node> node(new Node());
  node->channel_ = options.channel;
  node->dial_ = std::make_unique<DialRouter>(node->io_, node->relay_, options.channel);
  absl::StatusOr<std::unique_ptr<ChannelServer>> server =
      ChannelServer::serve(node->io_, options.listen, node->relay_, node->relay_, options.channel);
  if (!server.ok()) return server.status();
  node->server_ = *std::move(server);

  runtime::Location entry =
      options.location ? *options.location : runtime::Location::addr(node->server_->local_addr());
  runtime::ProcOptions proc_options;
  proc_options.id = options.id;
  proc_options.scheduler = options.scheduler;
  proc_options.mailbox = options.mailbox;  // R-FLOW-1
  if (options.gateway) {
    node->gateway_ = std::make_unique<Gateway>(*options.gateway, entry, node->dial_.get());
    proc_options.location = node->gateway_->advertise(options.id).location;
  } else {
    proc_options.location = entry;
  }
  node->proc_ = std::make_unique<runtime::Proc>(std::move(proc_options));
  if (node->gateway_) {
    (void)node->gateway_->attach(options.id, node->proc_.get());  // a new gateway: cannot clash
    node->proc_->set_forwarder(node->gateway_.get());
  } else {
    node->proc_->set_forwarder(node->dial_.get());
  }
  node->relay_.set(&node->ingress_, node->proc_.get());
  // R-SCHED-2: an idle worker waits in the channels' I/O loop (the proc stops before io_ goes).
  if (options.idle_poll) node->proc_->scheduler().set_idle_poller(&node->io_.idle_poller());
  if (options.system_actors) {
    // R-SUP-4: remote watches check on the procs they watch at the channels' heartbeat pace.
    actors::WatchOptions watch;
    if (options.channel.heartbeat_interval > absl::ZeroDuration()) {
      watch.interval = options.channel.heartbeat_interval;
      watch.timeout =
          std::max(options.channel.heartbeat_timeout, 3 * options.channel.heartbeat_interval);
    }
    if (absl::Status s = actors::install_system_actors(*node->proc_, watch); !s.ok()) return s;
  }
  return node;
}

Node::~Node() {
  server_.reset();  // nothing new comes in
  relay_.set(nullptr, nullptr);
  proc_.reset();
}

absl::StatusOr<runtime::ProcAddr> Node::attach(const runtime::ProcId& id,
                                               const runtime::ChannelAddr& addr) {
  if (!gateway_) {
    return absl::FailedPreconditionError("only a node with a gateway can attach procs");
  }
  if (absl::Status s = gateway_->attach(id, dial_.get()); !s.ok()) return s;
  dial_->add(id, addr);
  return gateway_->advertise(id);
}

void Node::detach(const runtime::ProcId& id) {
  if (!gateway_) return;
  gateway_->detach(id);
  dial_->remove(id);
}

}  // namespace postal::routing

namespace postal::routing {

absl::Status Node::add_peer(const runtime::Uid& gateway, const runtime::ChannelAddr& addr) {
  if (!gateway_) return absl::FailedPreconditionError("only a gateway node has peers");
  absl::StatusOr<std::unique_ptr<ChannelClient>> client =
      ChannelClient::dial(io_, addr, relay_, channel_);
  if (!client.ok()) return client.status();
  if (absl::Status s = gateway_->add_peer(gateway, client->get()); !s.ok()) return s;
  peers_.push_back(*std::move(client));
  return absl::OkStatus();
}

}  // namespace postal::routing
