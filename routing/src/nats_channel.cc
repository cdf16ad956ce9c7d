// nats:// channels (nats_tunnel.h): a stream channel whose connections are virtual connections
// through NATS. The ChannelClient and ChannelServer here own both the stream half and the tunnel
// half, and report the nats:// address.
#include "absl/strings/str_cat.h"
#include "nats_conn.h"
#include "nats_tunnel.h"
#include "postal/routing/channel_client.h"
#include "postal/routing/channel_server.h"
#include "transports.h"

namespace postal::routing::internal {
namespace {

using runtime::ChannelAddr;

std::string server_url(const ChannelAddr& addr) {
  const bool v6 = addr.host().find(':') != std::string_view::npos;
  return absl::StrCat("nats://", v6 ? "[" : "", std::string(addr.host()), v6 ? "]" : "", ":",
                      addr.port());
}

// `dialing`: ChannelOptions::nats_url, when set, replaces the address's server.
nats_tunnel::TunnelOptions tunnel_options(const ChannelAddr& addr, const ChannelOptions& options,
                                          bool dialing) {
  nats_tunnel::TunnelOptions t;
  t.url = server_url(addr);
  t.subject = std::string(addr.subject());
  if (dialing && !options.nats_url.empty()) t.url = options.nats_url;
  t.timeout = std::min(options.dial_timeout, options.delivery_timeout);
  t.max_connections = options.max_connections;
  // A topology with a key talks to NATS with credentials derived from it (start_nats gives the
  // server the same); a server without authorization ignores them.
  t.credentials = nats_credentials(options.key.get(), options.nats_member);
  t.tls = options.nats_tls;
  return t;
}

class NatsClient final : public ChannelClient {
 public:
  NatsClient(ChannelAddr addr, std::unique_ptr<nats_tunnel::TunnelClient> tunnel)
      : ChannelClient(std::move(addr)), tunnel_(std::move(tunnel)) {}
  ~NatsClient() override { inner_.reset(); }  // its GOODBYE still goes through the tunnel

  void set_inner(std::unique_ptr<ChannelClient> inner) { inner_ = std::move(inner); }

  void post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle& ret) override {
    inner_->post_unchecked(std::move(env), ret);
  }
  bool accepts_stream(const runtime::PortAddr& next_hop) const override {
    return inner_->accepts_stream(next_hop);
  }
  bool closed() const override { return inner_->closed(); }
  bool rejected() const override { return inner_->rejected(); }
  absl::Status status() const override { return inner_->status(); }
  size_t unacked() const override { return inner_->unacked(); }
  void close() override { inner_->close(); }
  Liveness liveness() const override { return inner_->liveness(); }
  Credit credit() const override { return inner_->credit(); }

 private:
  std::unique_ptr<nats_tunnel::TunnelClient> tunnel_;  // declared first: destroyed last
  std::unique_ptr<ChannelClient> inner_;
};

class NatsServer final : public ChannelServer {
 public:
  NatsServer(ChannelAddr addr, std::unique_ptr<ChannelServer> inner)
      : addr_(std::move(addr)), inner_(std::move(inner)) {}
  ~NatsServer() override {
    inner_.reset();  // GOODBYE server_stopping to every client, through the tunnel
    tunnel_.reset();
  }
  void set_tunnel(std::unique_ptr<nats_tunnel::TunnelServer> t) { tunnel_ = std::move(t); }

  const ChannelAddr& local_addr() const override { return addr_; }
  Stats stats() const override { return inner_->stats(); }
  void drop_connections() override { inner_->drop_connections(); }
  void vanish() override {
    if (tunnel_) tunnel_->vanish();
    inner_->vanish();
  }

 private:
  ChannelAddr addr_;
  std::unique_ptr<ChannelServer> inner_;
  std::unique_ptr<nats_tunnel::TunnelServer> tunnel_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ChannelClient>> dial_nats(IoThread& io, ChannelAddr addr,
                                                         runtime::ReturnHandle& returns,
                                                         ChannelOptions options,
                                                         bool in_background) {
  absl::StatusOr<std::unique_ptr<nats_tunnel::TunnelClient>> tunnel =
      nats_tunnel::TunnelClient::start(tunnel_options(addr, options, /*dialing=*/true));
  if (!tunnel.ok()) return tunnel.status();
  if (!in_background) {  // a first dial fails at once when nobody serves the subject
    if (absl::Status s = (*tunnel)->probe(); !s.ok()) {
      return absl::UnavailableError(absl::StrCat("dial ", addr.to_string(), ": ", s.message()));
    }
  }
  nats_tunnel::TunnelClient* t = tunnel->get();
  auto client = std::make_unique<NatsClient>(addr, *std::move(tunnel));
  absl::StatusOr<std::unique_ptr<ChannelClient>> inner = dial_stream(
      io, std::move(addr), returns, options, in_background, {}, [t] { return t->dial(); });
  if (!inner.ok()) {
    return absl::Status(inner.status().code(),
                        absl::StrCat(client->addr().to_string(), ": ", inner.status().message()));
  }
  client->set_inner(*std::move(inner));
  return client;
}

absl::StatusOr<std::unique_ptr<ChannelServer>> serve_nats(IoThread& io, ChannelAddr addr,
                                                          runtime::MailboxSender& deliver_to,
                                                          runtime::ReturnHandle& ret,
                                                          ChannelOptions options) {
  SinkAdopter adopt;
  absl::StatusOr<std::unique_ptr<ChannelServer>> inner =
      serve_stream(io, addr, deliver_to, ret, options, &adopt);
  if (!inner.ok()) return inner.status();
  const nats_tunnel::TunnelOptions topts = tunnel_options(addr, options, /*dialing=*/false);
  auto server = std::make_unique<NatsServer>(std::move(addr), *std::move(inner));
  absl::StatusOr<std::unique_ptr<nats_tunnel::TunnelServer>> tunnel =
      nats_tunnel::TunnelServer::start(topts, std::move(adopt));
  if (!tunnel.ok()) return tunnel.status();
  server->set_tunnel(*std::move(tunnel));
  return server;
}

}  // namespace postal::routing::internal
