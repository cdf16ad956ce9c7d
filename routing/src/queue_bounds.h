// QueueBounds: what a channel client holds — posted and neither acked nor returned (the
// unsequenced and the unacked queue together) — in total and per destination actor (R-FLOW-2;
// routing internal).
//
// `admit` counts an envelope against four bounds (ChannelOptions::max_queue, max_queue_bytes,
// max_queue_per_destination, max_queue_per_destination_bytes) or returns the Overloaded failure
// naming the bound it met; `release` uncounts it when it leaves the client (acked, returned,
// failed alone). The per-destination bound is what keeps one flooded destination from filling
// the queue in front of another destination's envelopes: the head-of-line blocking a sender can
// suffer is bounded by it. Bytes are the payload's serialized size (the client serializes once,
// before admitting), recorded in the envelope (`held_bytes`) so a release frees what was counted.
// Thread-safe: posts admit on any thread; the I/O state releases under the client's io_mu_.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "postal/runtime/delivery_failure.h"
#include "postal/runtime/ids.h"
#include "postal/runtime/message_envelope.h"

namespace postal::routing::internal {

class QueueBounds {
 public:
  struct Limits {
    uint64_t max_messages;
    uint64_t max_bytes;
    uint64_t max_destination_messages;
    uint64_t max_destination_bytes;
  };
  struct Held {
    uint64_t messages = 0;
    uint64_t bytes = 0;
  };

  explicit QueueBounds(Limits limits) : limits_(limits) {}

  // Counts `env` (`bytes`: its payload's size) or returns why it does not fit.
  std::optional<runtime::DeliveryFailure> admit(runtime::MessageEnvelope& env, uint64_t bytes);
  // `env`, admitted before, left the client.
  void release(const runtime::MessageEnvelope& env);
  // Releases each envelope `next()` yields until it yields null, under one lock (a cumulative
  // ack trims a run of envelopes at once).
  template <class Next>
  void release_each(Next next) {
    absl::MutexLock lock(&mu_);
    while (const runtime::MessageEnvelope* env = next()) release_locked(*env);
  }
  // Everything left the client at once (it closed).
  void clear();

  Held total() const;
  Held for_destination(const runtime::ActorId& dest) const;

 private:
  const Limits limits_;
  mutable absl::Mutex mu_;
  Held total_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<runtime::ActorId, Held> by_destination_ ABSL_GUARDED_BY(mu_);
  // The entry of the last destination counted (a stream's), compared instead of hashed; null
  // after any insert or erase moved the map's entries.
  runtime::ActorId last_dest_ ABSL_GUARDED_BY(mu_);
  Held* last_ ABSL_GUARDED_BY(mu_) = nullptr;
  // The entry of `dest`, made when `make` (null when absent and not made).
  Held* entry(const runtime::ActorId& dest, bool make) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void erase(const runtime::ActorId& dest) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void release_locked(const runtime::MessageEnvelope& env) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace postal::routing::internal
