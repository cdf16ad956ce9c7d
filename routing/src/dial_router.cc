#include "postal/routing/dial_router.h"

#include "absl/strings/str_cat.h"
#include "postal/runtime/logger.h"

namespace postal::routing {

DialRouter::DialRouter(IoThread& io, runtime::ReturnHandle& returns, ChannelOptions options)
    : io_(io), returns_(returns), options_(options) {}

DialRouter::~DialRouter() = default;

void DialRouter::add(const RoutePrefix& prefix, runtime::ChannelAddr addr) {
  absl::MutexLock lock(&mu_);
  book_.add(prefix, std::move(addr));
}

bool DialRouter::remove(const RoutePrefix& prefix) {
  absl::MutexLock lock(&mu_);
  return book_.remove(prefix);
}

size_t DialRouter::live_clients() const {
  absl::MutexLock lock(&mu_);
  return clients_.size();
}

size_t DialRouter::dials() const {
  absl::MutexLock lock(&mu_);
  return dials_;
}

absl::StatusOr<ChannelClient*> DialRouter::client_for(const runtime::ChannelAddr& addr) {
  mu_.AssertHeld();
  auto it = clients_.find(addr);
  if (it != clients_.end()) {
    if (!it->second->closed() && !it->second->rejected()) return it->second.get();
    evicted_.push_back(std::move(it->second));  // R-ROUTE-3: evict and redial
    clients_.erase(it);
  }
  absl::StatusOr<std::unique_ptr<ChannelClient>> dialed =
      ChannelClient::dial_async(io_, addr, returns_, options_);
  if (!dialed.ok()) return dialed.status();  // the address cannot be a socket
  ++dials_;
  if (runtime::Logger::routing().enabled(runtime::LogLevel::kDebug)) {
    runtime::Logger::routing().debug(absl::StrCat("dial router: dialing ", addr.to_string()));
  }
  ChannelClient* client = dialed->get();
  clients_.emplace(addr, *std::move(dialed));
  return client;
}

void DialRouter::post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle& ret) {
  absl::StatusOr<ChannelClient*> client;
  runtime::ChannelAddr addr;
  {
    absl::MutexLock lock(&mu_);
    const runtime::PortAddr& hop = env->next_hop();
    const runtime::ChannelAddr* booked = book_.lookup(hop.id);
    addr = booked != nullptr ? *booked : hop.location.channel();
    client = client_for(addr);
  }
  if (!client.ok()) {
    std::string target = env->next_hop().to_string();
    runtime::MessageEnvelope::undeliverable(
        std::move(env),
        runtime::DeliveryFailure::transport_failure(
            std::move(target), runtime::TransportReason::kDialFailed,
            absl::StrCat(addr.to_string(), ": ", client.status().message())),
        ret);
    return;
  }
  (*client)->post(std::move(env), ret);
}

}  // namespace postal::routing
