// StreamClientCore's heartbeats (docs/wire.md §10.2, R-FLOW-4; stream_client.h has the
// threading): the `heartbeat` feature offered in HELLO, one timer per connection that ticks once
// per heartbeat_interval while the link is up, PING/PONG, and declaring a silent peer dead.
// Every function here runs holding io_mu_.
//
// Cost on the hot path: a read sets `read_since_tick_`, a write `wrote_since_tick_` (plain
// bools under io_mu_, which both already hold); only the tick reads the clock or arms a timer.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "postal/wire/absl_compat.h"
#include "stream_client.h"

namespace postal::routing::internal {

namespace {

std::chrono::steady_clock::duration to_steady(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(std::max(d, absl::ZeroDuration())));
}

}  // namespace

uint32_t StreamClientCore::offered_features() const {
  return (options_.heartbeat_interval > absl::ZeroDuration() ? v2::kFeatureHeartbeat : 0) |
         (options_.credit ? v2::kFeatureCredit : 0);
}

void StreamClientCore::arm_heartbeat() {
  const bool on = (limits_.features & v2::kFeatureHeartbeat) != 0;
  heartbeat_on_.store(on, std::memory_order_release);
  peer_dead_.store(false, std::memory_order_release);  // a WELCOME: the peer answers again
  if (!on) return;
  last_heard_ = std::chrono::steady_clock::now();
  read_since_tick_ = wrote_since_tick_ = false;
  heartbeat_timer_.expires_after(to_steady(options_.heartbeat_interval));
  heartbeat_timer_.async_wait([self = shared_from_this(), gen = gen_](
                                  const boost::system::error_code& ec) {
    if (ec) return;
    absl::MutexLock lock(&self->io_mu_);
    self->on_heartbeat_tick(gen);
  });
}

void StreamClientCore::on_heartbeat_tick(uint64_t gen) {
  if (gen != gen_ || closed() || link_ != Link::kUp) return;  // that connection is gone
  const auto now = std::chrono::steady_clock::now();
  if (read_since_tick_) last_heard_ = now;
  read_since_tick_ = false;
  // At least three intervals: a live server hears our PING within two and answers at once.
  const absl::Duration timeout =
      std::max(options_.heartbeat_timeout, 3 * options_.heartbeat_interval);
  if (now - last_heard_ >= to_steady(timeout)) {
    // R-FLOW-4: alive but stuck (or gone without a FIN): treat it as a lost connection. What is
    // pending stays pending: the reconnect resumes the session, and the delivery timer bounds
    // how long that may take (R-CHAN-2).
    peer_dead_.store(true, std::memory_order_release);
    deaths_.fetch_add(1, std::memory_order_acq_rel);
    log().warn(absl::StrCat("channel ", addr_text_, ": the peer is declared dead: nothing received for ",
                            absl::FormatDuration(timeout), " (heartbeat_timeout)"));
    return link_failed(gen, absl::StrCat("nothing received for heartbeat_timeout (",
                                         absl::FormatDuration(timeout),
                                         "): the server is stuck or unreachable"));
  }
  if (!wrote_since_tick_) {
    v2::append_ping(heartbeat_out_, v2::Ping{++pings_});
    flush_writes();
  }
  wrote_since_tick_ = false;
  heartbeat_timer_.expires_after(to_steady(options_.heartbeat_interval));
  heartbeat_timer_.async_wait([self = shared_from_this(), gen](
                                  const boost::system::error_code& ec) {
    if (ec) return;
    absl::MutexLock lock(&self->io_mu_);
    self->on_heartbeat_tick(gen);
  });
}

void StreamClientCore::on_heartbeat_frame(uint64_t gen, v2::Kind kind, std::string_view body) {
  if (link_ != Link::kUp || (limits_.features & v2::kFeatureHeartbeat) == 0) {
    return link_failed(gen, absl::StrCat("protocol error: ", kind == v2::Kind::kPing ? "PING" : "PONG",
                                         link_ != Link::kUp ? " before WELCOME"
                                                            : " without the heartbeat feature"));
  }
  absl::StatusOr<v2::Ping> ping = v2::decode_ping(body);
  if (!ping.ok()) return link_failed(gen, absl::StrCat("protocol error: ", ping.status().message()));
  if (kind != v2::Kind::kPing) return;  // a PONG: the read already counted as liveness
  v2::append_pong(heartbeat_out_, *ping);
  flush_writes();  // with whatever else is waiting: the PONG is coalesced into this write
}

}  // namespace postal::routing::internal
