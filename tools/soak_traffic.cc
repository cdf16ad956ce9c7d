#include "soak_traffic.h"

#include <algorithm>

#include "postal/routing/workload.h"
#include "postal/runtime/port.h"

namespace postal::tools {

uint32_t SoakTraffic::add_target(runtime::ActorAddr echo) {
  absl::MutexLock lock(&mu_);
  targets_.push_back(Target{std::move(echo), 0, {}});
  return static_cast<uint32_t>(targets_.size() - 1);
}

void SoakTraffic::add_relay(uint32_t via, uint32_t target, runtime::ActorAddr relay) {
  absl::MutexLock lock(&mu_);
  targets_[target].relays.emplace_back(via, std::move(relay));
}

void SoakTraffic::next_incarnation(uint32_t target) {
  absl::MutexLock lock(&mu_);
  ++targets_[target].incarnation;
}

uint32_t SoakTraffic::incarnation(uint32_t target) const {
  absl::MutexLock lock(&mu_);
  return targets_[target].incarnation;
}

absl::StatusOr<runtime::PortAddr> SoakTraffic::attach(runtime::Proc& proc) {
  absl::StatusOr<std::unique_ptr<runtime::Client>> client = runtime::Client::attach(proc, "soak");
  if (!client.ok()) return client.status();
  client_ = *std::move(client);
  runtime::OpenPort<routing::Payload> port = runtime::open_port<routing::Payload>(*client_);
  reply_to_ = port.handle.bind();
  replies_ = std::make_unique<runtime::PortReceiver<routing::Payload>>(std::move(port.receiver));
  runtime::OpenPort<routing::RelayedReturn> relayed =
      runtime::open_port<routing::RelayedReturn>(*client_);
  relayed_ = std::make_unique<runtime::PortReceiver<routing::RelayedReturn>>(
      std::move(relayed.receiver));
  return relayed.handle.bind().addr();
}

void SoakTraffic::start() { thread_ = std::thread([this] { run(); }); }

void SoakTraffic::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void SoakTraffic::send_one(uint32_t target) {
  runtime::ActorAddr to;
  uint32_t incarnation = 0;
  uint32_t via = SoakLedger::kDirect;
  {
    absl::MutexLock lock(&mu_);
    const Target& t = targets_[target];
    to = t.echo;
    incarnation = t.incarnation;
    if (!t.relays.empty() && rng_() % 2 == 0) {
      const auto& relay = t.relays[rng_() % t.relays.size()];
      via = relay.first;
      to = relay.second;
    }
  }
  routing::Payload p;
  p.mode = routing::Payload::kPing;
  p.seq = ledger_.sent(target, incarnation, via);
  p.sent_ns = routing::steady_now_ns();
  // Mostly small; one in 400 over the chunk size (256 KiB), so transfers cross the chaos too.
  const size_t size = rng_() % 400 == 0 ? 300 << 10 : 16 + rng_() % 2033;
  p.body = wire::SharedBytes(size, 's');
  p.reply_to = reply_to_;
  runtime::PortRef<routing::Payload>(routing::payload_port(to)).send(*client_, std::move(p));
}

bool SoakTraffic::drain() {
  bool any = false;
  for (;;) {
    absl::StatusOr<routing::Payload> r = replies_->recv(absl::ZeroDuration());
    if (!r.ok()) break;
    ledger_.replied(r->seq);
    any = true;
  }
  for (;;) {  // payloads a relay forwarded that came back to it
    absl::StatusOr<routing::RelayedReturn> r = relayed_->recv(absl::ZeroDuration());
    if (!r.ok()) break;
    ledger_.returned(r->seq, r->root, /*relayed=*/true);
    any = true;
  }
  for (;;) {
    absl::StatusOr<runtime::EnvelopePtr> back = client_->next_undeliverable(absl::ZeroDuration());
    if (!back.ok()) break;
    any = true;
    runtime::MessageEnvelope& env = **back;
    const runtime::DeliveryFailure* root = env.root_failure();
    if (root == nullptr || !env.data().decode<routing::Payload>().ok()) {
      ledger_.returned(UINT64_MAX, runtime::DeliveryFailure{});  // counted as unknown
      continue;
    }
    ledger_.returned(env.data().get<routing::Payload>()->seq, *root);
  }
  return any;
}

void SoakTraffic::run() {
  const absl::Time start = absl::Now();
  uint64_t sent = 0;
  size_t next = 0;
  while (!stop_) {
    // `rate` per second since the start, at most a window per target unresolved.
    const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
    const uint64_t allowed = static_cast<uint64_t>(elapsed * static_cast<double>(rate_));
    // Time spent with every window full is not made up for later in a burst.
    sent = std::max(sent, allowed - std::min(allowed, rate_ / 10 + 1));
    size_t n = 0;
    {
      absl::MutexLock lock(&mu_);
      n = targets_.size();
    }
    bool progress = drain();
    if (sending_) {
      for (size_t tried = 0; tried < n && sent < allowed; ++tried, next = (next + 1) % n) {
        const uint32_t t = static_cast<uint32_t>(next);
        if (ledger_.in_flight(t) >= window_) continue;
        send_one(t);
        ++sent;
        progress = true;
      }
    }
    if (!progress) {
      // Nothing to do: wait for a reply (a return is picked up on the next round).
      absl::StatusOr<routing::Payload> r = replies_->recv(absl::Milliseconds(2));
      if (r.ok()) ledger_.replied(r->seq);
    }
  }
  drain();
}

}  // namespace postal::tools
