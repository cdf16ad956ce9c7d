// ProcStats: what a proc counts (R-FAIL-4: nothing vanishes silently).
//
// Counters are sharded per thread (relaxed increments on mostly private cache lines), so counting
// costs a few nanoseconds on the hot path; `snapshot()` sums the shards.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "postal/runtime/delivery_failure.h"
#include "postal/runtime/mailbox_sender.h"

namespace postal::runtime {

enum class Counter : uint8_t {
  kPosted,            // envelopes posted through this proc
  kDelivered,         // envelopes accepted by a local port
  kReturned,          // undeliverables sent back to their sender
  kDropped,           // envelopes abandoned (all causes)
  kInvalidReference,  // failures recorded, by kind (root or not)
  kTransport,
  kPortGone,
  kExpired,
  kDropReturnDisabled,
  kDropReturnFailed,
  kDropNoReturnPath,
  kOverloaded,     // R-FLOW-1: envelopes a full local mailbox refused (returned Overloaded)
  kDroppedOldest,  // R-FLOW-1: envelopes a kDropOldest mailbox dropped (returned Overloaded)
  kCount,
};

struct ProcStatsSnapshot {
  uint64_t posted = 0;
  uint64_t delivered = 0;
  uint64_t returned = 0;
  uint64_t dropped = 0;
  uint64_t invalid_reference = 0;
  uint64_t transport = 0;
  uint64_t port_gone = 0;
  uint64_t expired = 0;
  uint64_t drop_return_disabled = 0;
  uint64_t drop_return_failed = 0;
  uint64_t drop_no_return_path = 0;
  uint64_t overloaded = 0;      // R-FLOW-1
  uint64_t dropped_oldest = 0;  // R-FLOW-1

  uint64_t undeliverable(FailureKind kind) const;
  std::string to_string() const;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(posted, delivered, returned, dropped, invalid_reference, transport, port_gone, expired,
       drop_return_disabled, drop_return_failed, drop_no_return_path, overloaded, dropped_oldest);
  }
};

class ProcStats {
 public:
  void add(Counter c, uint64_t n = 1) {
    shards_[shard()].v[static_cast<size_t>(c)].fetch_add(n, std::memory_order_relaxed);
  }
  void failure(FailureKind kind);
  void drop(DropCause cause);
  ProcStatsSnapshot snapshot() const;

 private:
  static constexpr size_t kShards = 16;
  struct alignas(64) Shard {
    std::array<std::atomic<uint64_t>, static_cast<size_t>(Counter::kCount)> v{};
  };
  static size_t shard();
  std::array<Shard, kShards> shards_{};
};

}  // namespace postal::runtime
