#include "postal/routing/workload.h"

#include <algorithm>
#include <chrono>

#include "absl/container/flat_hash_map.h"
#include "postal/actors/context.h"
#include "postal/routing/return_kinds.h"

namespace postal::routing {
namespace {

using actors::Context;

class Echo : public actors::Actor, public actors::Handles<Payload> {
 public:
  static absl::StatusOr<std::unique_ptr<Echo>> create(const actors::SpawnParams&) {
    return std::make_unique<Echo>();
  }

  absl::Status handle(Context& cx, Payload p) override {
    if (p.mode == Payload::kPing) {
      runtime::PortRef<Payload> back = std::move(p.reply_to);
      back.send(cx, std::move(p));
      return absl::OkStatus();
    }
    Stream& s = streams_[p.ack_to.addr().id];
    s.latency.record(steady_now_ns() - p.sent_ns);
    if (p.seq != s.next_seq) ++s.out_of_order;
    s.next_seq = p.seq + 1;
    ++s.received;
    if (s.received % ack_every(p.body.size()) == 0 || s.received == p.total) {
      p.ack_to.send(cx, StreamAck{s.received, s.out_of_order, std::move(s.latency)});
      s.latency.clear();
      s.out_of_order = 0;
      if (s.received == p.total) streams_.erase(p.ack_to.addr().id);
    }
    return absl::OkStatus();
  }

 private:
  struct Stream {
    uint64_t received = 0;
    uint64_t next_seq = 0;
    uint64_t out_of_order = 0;
    LatencyHistogram latency;
  };
  absl::flat_hash_map<runtime::PortId, Stream> streams_;
};

class Relay : public actors::Actor, public actors::Handles<Payload> {
 public:
  static absl::StatusOr<std::unique_ptr<Relay>> create(const actors::SpawnParams& p) {
    std::optional<std::string> next = p.get(wire::HeaderKey<std::string>{"next"});
    std::optional<std::string> returns = p.get(wire::HeaderKey<std::string>{"returns"});
    if (!next || !returns) {
      return absl::InvalidArgumentError(
          "params: next (an echo's actor address) and returns (a RelayedReturn port address) "
          "are required");
    }
    absl::StatusOr<runtime::ActorAddr> to = runtime::ActorAddr::parse(*next);
    if (!to.ok()) return to.status();
    absl::StatusOr<runtime::PortAddr> back = runtime::PortAddr::parse(*returns);
    if (!back.ok()) return back.status();
    return std::make_unique<Relay>(runtime::PortRef<Payload>(payload_port(*to)),
                                   runtime::PortRef<RelayedReturn>(*back));
  }
  Relay(runtime::PortRef<Payload> next, runtime::PortRef<RelayedReturn> returns)
      : next_(std::move(next)), returns_(std::move(returns)) {}

  absl::Status handle(Context& cx, Payload p) override {
    next_.send(cx, std::move(p));  // reply_to stays: the echo answers the original sender
    return absl::OkStatus();
  }

  // A forwarded payload came back: the original sender hears of it, with the failure.
  absl::Status handle_undeliverable(Context& cx, const runtime::MessageEnvelope& env) override {
    const runtime::DeliveryFailure* root = env.root_failure();
    // A payload returned from another proc arrives as bytes; decoding only caches its value.
    wire::Any& data = const_cast<wire::Any&>(env.data());
    if (root == nullptr || !data.decode<Payload>().ok()) return absl::OkStatus();
    returns_.send(cx, RelayedReturn{data.get<Payload>()->seq, *root});
    return absl::OkStatus();
  }

 private:
  runtime::PortRef<Payload> next_;
  runtime::PortRef<RelayedReturn> returns_;
};

class Driver : public actors::Actor,
               public actors::Handles<DriveRequest, Payload, StreamAck, DriveStop, DriveSettled> {
 public:
  static absl::StatusOr<std::unique_ptr<Driver>> create(const actors::SpawnParams&) {
    return std::make_unique<Driver>();
  }

  absl::Status handle(Context& cx, DriveRequest r) override {
    if (active_) {
      DriveResult busy;
      busy.error = "a drive is already running";
      r.reply_to.send(cx, std::move(busy));
      return absl::OkStatus();
    }
    if (r.targets.empty() || r.messages == 0 ||
        (r.pattern != "ping-pong" && r.pattern != "stream")) {
      DriveResult bad;
      bad.error = "a drive needs a pattern (ping-pong|stream), targets and messages > 0";
      r.reply_to.send(cx, std::move(bad));
      return absl::OkStatus();
    }
    request_ = std::move(r);
    const uint64_t per_ack = ack_every(request_.size);
    // Acks must flow (two acks' worth in flight), and bytes in flight are bounded — payloads
    // past the bound go one at a time.
    const uint64_t least = request_.size > kMaxWindowBytes ? per_ack : 2 * per_ack;
    request_.window = std::clamp<uint64_t>(
        std::min<uint64_t>(request_.window, kMaxWindowBytes / std::max<uint64_t>(request_.size, 1)),
        least, std::max<uint64_t>(request_.window, least));
    active_ = true;
    failing_ = false;
    ++drive_;
    result_ = DriveResult{};
    result_.window = request_.window;
    // A body past the window bound is made afresh for each payload, so the driver does not hold
    // a template beside the payload in flight (wire.md §9.10's memory budget).
    // Below it, one body is shared by every payload (wire::SharedBytes): sending one copies no
    // bytes, the channel writes them from here.
    body_ = wire::SharedBytes(request_.size > kMaxWindowBytes ? 0 : request_.size, 'p');
    targets_.clear();
    for (const auto& t : request_.targets) targets_.push_back(Target{runtime::PortRef<Payload>(t)});
    self_payload_ = cx.self<Driver>().port<Payload>();
    self_ack_ = cx.self<Driver>().port<StreamAck>();
    result_.start_ns = steady_now_ns();
    if (request_.pattern == "ping-pong") {
      send_ping(cx, 0);
    } else {
      for (size_t i = 0; i < targets_.size(); ++i) top_up(cx, i);
    }
    return absl::OkStatus();
  }

  // Ping-pong: the echo came back.
  absl::Status handle(Context& cx, Payload p) override {
    if (!active_) return absl::OkStatus();
    result_.latency.record(steady_now_ns() - p.sent_ns);
    ++result_.messages;
    result_.bytes += p.body.size();
    if (result_.messages == request_.messages) return finish(cx);
    if (failing_) return maybe_done(cx);
    if (request_.size <= kMaxWindowBytes) body_ = std::move(p.body);
    send_ping(cx, result_.messages);
    return absl::OkStatus();
  }

  // Stream: a target acknowledged.
  absl::Status handle(Context& cx, StreamAck a) override {
    if (!active_) return absl::OkStatus();
    const auto& sender = cx.envelope()->sender().id;
    for (size_t i = 0; i < targets_.size(); ++i) {
      if (!(targets_[i].port.addr().id.actor == sender)) continue;
      result_.messages += a.received - targets_[i].acked;
      targets_[i].acked = a.received;
      result_.out_of_order += a.out_of_order;
      result_.latency.merge(a.latency);
      if (!failing_) top_up(cx, i);
      break;
    }
    result_.bytes = result_.messages * request_.size;
    return maybe_done(cx);
  }

  // A returned payload is a failure: the drive sends nothing more and ends once every payload
  // sent is acknowledged or returned — each return counted by kind — or when the settle time
  // has passed (what the target received but never acknowledged, because it died, say, is
  // neither: it ends `unresolved`). Finding 5: one kill -9 returns hundreds of envelopes, and
  // the summary counts each.
  absl::Status handle_undeliverable(Context& cx, const runtime::MessageEnvelope& env) override {
    if (!active_) return absl::OkStatus();
    ++result_.failures;
    const runtime::DeliveryFailure* root = env.root_failure();
    const std::string kind = root ? return_kind(*root) : "undeliverable";
    if (root && possibly_delivered(*root)) ++result_.possibly_delivered;
    auto it = std::find_if(result_.returned_by_kind.begin(), result_.returned_by_kind.end(),
                           [&](const auto& e) { return e.first == kind; });
    if (it == result_.returned_by_kind.end()) {
      result_.returned_by_kind.emplace_back(kind, 1);
    } else {
      ++it->second;
    }
    if (result_.error.empty()) result_.error = root ? root->to_string() : "undeliverable";
    if (!failing_) {
      failing_ = true;
      cx.send_after(absl::Milliseconds(std::max<int64_t>(request_.settle_ms, 0)),
                    cx.self<Driver>().port<DriveSettled>(), DriveSettled{drive_});
    }
    return maybe_done(cx);
  }

  absl::Status handle(Context& cx, DriveStop) override {
    if (!active_) return absl::OkStatus();
    result_.stopped = true;
    return finish(cx);
  }

  absl::Status handle(Context& cx, DriveSettled s) override {
    if (!active_ || s.drive != drive_) return absl::OkStatus();
    return finish(cx);
  }

 private:
  struct Target {
    runtime::PortRef<Payload> port;
    uint64_t sent = 0;
    uint64_t acked = 0;
  };

  wire::SharedBytes body() const {
    return request_.size > kMaxWindowBytes ? wire::SharedBytes(request_.size, 'p') : body_;
  }

  void send_ping(Context& cx, uint64_t seq) {
    Payload p;
    p.mode = Payload::kPing;
    p.seq = seq;
    p.sent_ns = steady_now_ns();
    p.body = body();
    p.reply_to = self_payload_;
    targets_[0].port.send(cx, std::move(p));
  }

  void top_up(Context& cx, size_t i) {
    Target& t = targets_[i];
    while (t.sent < request_.messages && t.sent - t.acked < request_.window) {
      Payload p;
      p.mode = Payload::kStream;
      p.seq = t.sent++;
      p.total = request_.messages;
      p.body = body();
      p.ack_to = self_ack_;
      p.sent_ns = steady_now_ns();
      t.port.send(cx, std::move(p));
    }
  }

  uint64_t sent() const {
    if (request_.pattern == "ping-pong") return result_.messages + result_.failures;
    uint64_t n = 0;
    for (const Target& t : targets_) n += t.sent;
    return n;
  }

  // Done when everything is delivered, or — after a failure — when everything sent is accounted
  // for. (A ping-pong has one payload in flight: its first failure accounts for everything.)
  absl::Status maybe_done(Context& cx) {
    const uint64_t resolved = result_.messages + result_.failures;
    if (resolved >= request_.messages * targets_.size() || (failing_ && resolved >= sent())) {
      return finish(cx);
    }
    return absl::OkStatus();
  }

  absl::Status finish(Context& cx) {
    active_ = false;
    result_.sent = sent();
    const uint64_t resolved = result_.messages + result_.failures;
    result_.unresolved = result_.sent > resolved ? result_.sent - resolved : 0;
    result_.end_ns = steady_now_ns();
    request_.reply_to.send(cx, std::move(result_));
    return absl::OkStatus();
  }

  bool active_ = false;
  bool failing_ = false;  // a payload came back: send nothing more, wait for the rest
  uint64_t drive_ = 0;    // which drive is running (a stale settle timer is ignored)
  DriveRequest request_;
  DriveResult result_;
  wire::SharedBytes body_;
  std::vector<Target> targets_;
  runtime::PortRef<Payload> self_payload_;
  runtime::PortRef<StreamAck> self_ack_;
};

}  // namespace

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void register_workload_actors() {
  static const bool once = [] {
    actors::ActorRegistry::global().add(kEchoType, actors::factory_for<Echo>());
    actors::ActorRegistry::global().add(kDriverType, actors::factory_for<Driver>());
    actors::ActorRegistry::global().add(kRelayType, actors::factory_for<Relay>());
    return true;
  }();
  (void)once;
}

runtime::PortAddr payload_port(const runtime::ActorAddr& actor) {
  return actor.port(runtime::Port::handler(wire::type_hash<Payload>()));
}

runtime::PortRef<DriveRequest> drive_port(const runtime::ActorAddr& driver) {
  return runtime::PortRef<DriveRequest>(
      driver.port(runtime::Port::handler(wire::type_hash<DriveRequest>())));
}

runtime::PortRef<DriveStop> drive_stop_port(const runtime::ActorAddr& driver) {
  return runtime::PortRef<DriveStop>(
      driver.port(runtime::Port::handler(wire::type_hash<DriveStop>())));
}

}  // namespace postal::routing
