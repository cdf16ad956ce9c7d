#include "postal/routing/dial_router.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "postal/runtime/logger.h"
#include "transports.h"

namespace postal::routing {

struct DialRouter::Sweeper {
  explicit Sweeper(boost::asio::io_context& context) : timer(context) {}
  boost::asio::steady_timer timer;
  bool stopped = false;  // I/O thread only: the router is gone
};

DialRouter::DialRouter(IoThread& io, runtime::ReturnHandle& returns, ChannelOptions options)
    : io_(io),
      returns_(returns),
      options_(options),
      sweeper_(std::make_shared<Sweeper>(io.context())) {
  boost::asio::post(io_.context(), [this, sweeper = sweeper_] {
    if (!sweeper->stopped) arm_sweep();
  });
}

DialRouter::~DialRouter() {
  internal::run_in_io_thread(io_, [this] {
    sweeper_->stopped = true;
    sweeper_->timer.cancel();
  });
  {
    absl::flat_hash_map<runtime::ChannelAddr, Cached> clients;
    absl::MutexLock lock(&mu_);
    clients.swap(clients_);
    ++epoch_;
  }
  // The clients' deletions are queued on the I/O thread (see client_for): wait for them, since
  // the IoThread may be destroyed right after this router.
  internal::run_in_io_thread(io_, [] {});
}

void DialRouter::arm_sweep() {
  const auto period = std::clamp<std::chrono::nanoseconds>(
      absl::ToChronoNanoseconds(options_.idle_client_timeout / 4), std::chrono::milliseconds(10),
      std::chrono::seconds(10));
  sweeper_->timer.expires_after(period);
  sweeper_->timer.async_wait([this, sweeper = sweeper_](const boost::system::error_code& ec) {
    if (ec || sweeper->stopped) return;  // `this` may be gone once stopped
    sweep();
    arm_sweep();
  });
}

void DialRouter::sweep() {
  std::vector<std::shared_ptr<ChannelClient>> evicted;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    const absl::Time idle_since = now - options_.idle_client_timeout;
    for (auto it = clients_.begin(); it != clients_.end();) {
      Cached& cached = it->second;
      if (cached.posts != cached.posts_seen) {  // posted since the last sweep
        cached.posts_seen = cached.posts;
        cached.quiet_since = now;
      }
      const std::shared_ptr<ChannelClient>& client = cached.client;
      // use_count() == 1: no post holds it (posts take their reference under mu_, held here).
      const bool idle =
          cached.quiet_since <= idle_since && client.use_count() == 1 && client->unacked() == 0;
      if (idle || client->closed() || client->rejected()) {
        if (runtime::Logger::routing().enabled(runtime::LogLevel::kDebug)) {
          runtime::Logger::routing().debug(absl::StrCat("dial router: evicting the ",
                                                        idle ? "idle" : "closed", " client of ",
                                                        it->first.to_string()));
        }
        evicted.push_back(std::move(it->second.client));
        clients_.erase(it++);
        ++epoch_;
      } else {
        ++it;
      }
    }
  }
}  // evicted clients close here (on this, the I/O thread), outside the lock

void DialRouter::add(const RoutePrefix& prefix, runtime::ChannelAddr addr) {
  absl::MutexLock lock(&mu_);
  book_.add(prefix, std::move(addr));
  ++epoch_;
}

bool DialRouter::remove(const RoutePrefix& prefix) {
  absl::MutexLock lock(&mu_);
  ++epoch_;
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

absl::StatusOr<std::shared_ptr<ChannelClient>> DialRouter::client_for(
    const runtime::ChannelAddr& addr, std::shared_ptr<ChannelClient>& evicted) {
  auto it = clients_.find(addr);
  if (it != clients_.end()) {
    if (!it->second.client->closed() && !it->second.client->rejected()) {
      ++it->second.posts;
      last_.cached = &it->second;
      return it->second.client;
    }
    evicted = std::move(it->second.client);  // R-ROUTE-3: evict and redial
    clients_.erase(it);
    ++epoch_;
  }
  absl::StatusOr<std::unique_ptr<ChannelClient>> dialed =
      ChannelClient::dial_async(io_, addr, returns_, options_);
  if (!dialed.ok()) return dialed.status();  // the address cannot be a socket
  ++dials_;
  if (runtime::Logger::routing().enabled(runtime::LogLevel::kDebug)) {
    runtime::Logger::routing().debug(absl::StrCat("dial router: dialing ", addr.to_string()));
  }
  // The last reference may go on any thread, perhaps one holding a lock the I/O thread needs;
  // a client's destructor waits for the I/O thread, so it runs there.
  std::shared_ptr<ChannelClient> client(dialed->release(), [&io = io_](ChannelClient* c) {
    if (io.in_io_thread()) {
      delete c;
    } else {
      boost::asio::post(io.context(), [c] { delete c; });
    }
  });
  auto [slot, inserted] = clients_.emplace(addr, Cached{client, 1, 0, absl::Now()});
  ++epoch_;
  last_.cached = &slot->second;
  return client;
}

void DialRouter::post_unchecked(runtime::EnvelopePtr env, runtime::ReturnHandle& ret) {
  route(std::move(env), ret, /*booked_only=*/false);
}

bool DialRouter::streams_to(const runtime::PortAddr& next_hop, bool booked_only) const {
  absl::MutexLock lock(&mu_);
  const runtime::ChannelAddr* booked = book_.lookup(next_hop.id);
  if (booked == nullptr && booked_only) return false;
  const runtime::ChannelAddr& addr = booked != nullptr ? *booked : next_hop.location.channel();
  return addr.transport() != runtime::ChannelAddr::Transport::kInproc;
}

void DialRouter::route(runtime::EnvelopePtr env, runtime::ReturnHandle& ret, bool booked_only) {
  absl::StatusOr<std::shared_ptr<ChannelClient>> client;
  std::shared_ptr<ChannelClient> evicted;  // destroyed after the lock is released
  runtime::ChannelAddr addr;
  {
    absl::MutexLock lock(&mu_);
    const runtime::PortAddr& hop = env->next_hop();
    const runtime::ChannelAddr* chan = &hop.location.channel();
    // A burst to one destination takes the last route again: no book lookup, no hashing.
    if (last_.epoch == epoch_ && last_.chan == chan && last_.id == hop.id &&
        (last_.from_book || !booked_only) && !last_.cached->client->closed() &&
        !last_.cached->client->rejected()) {
      ++last_.cached->posts;
      client = last_.cached->client;
    } else {
      const runtime::ChannelAddr* booked = book_.lookup(hop.id);
      if (booked == nullptr && booked_only) {
        client = absl::NotFoundError("");  // R-SEC-2: no route given; nothing is dialed
      } else {
        addr = booked != nullptr ? *booked : *chan;
        last_.cached = nullptr;
        client = client_for(addr, evicted);
        if (client.ok() && last_.cached != nullptr) {
          last_.epoch = epoch_;
          last_.id = hop.id;
          last_.chan = chan;
          last_.from_book = booked != nullptr;
        }
      }
    }
  }
  if (!client.ok() && absl::IsNotFound(client.status())) {
    std::string target = env->next_hop().to_string();
    runtime::MessageEnvelope::undeliverable(
        std::move(env),
        runtime::DeliveryFailure::transport_failure(
            std::move(target), runtime::TransportReason::kNoRoute,
            "this proc has no route to that location: an envelope that arrived over the network "
            "is forwarded only along the routes the proc was given (R-SEC-2, no open relay)"),
        ret);
    return;
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
}  // our reference goes here: an evicted client is freed (on the I/O thread) after its last post

}  // namespace postal::routing
