// ProcStats: what a proc counts (R-FAIL-4: nothing vanishes silently).
//
// Counters are sharded per thread, so counting costs a few nanoseconds on the hot path;
// `snapshot()` sums the shards. A thread owns a shard while it lives (at most kShards - 1 threads
// at once; the shard goes back when the thread exits), and only its owner writes it, so an add
// there is a plain load and store, not a locked instruction (two per message: posted and
// delivered). Threads past that share the last shard, with atomic adds.
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

namespace internal {
// This thread's counter shard, -1 until its first add (constinit: read without a guard).
constinit inline thread_local int counter_shard = -1;
int claim_counter_shard();  // proc_stats.cc
}  // namespace internal

class ProcStats {
 public:
  static constexpr size_t kShards = 16;
  void add(Counter c, uint64_t n = 1) {
    int s = internal::counter_shard;
    if (s < 0) s = internal::claim_counter_shard();
    std::atomic<uint64_t>& v = shards_[static_cast<size_t>(s)].v[static_cast<size_t>(c)];
    if (static_cast<size_t>(s) == kShared) {
      v.fetch_add(n, std::memory_order_relaxed);
    } else {
      v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);  // its owner only
    }
  }
  void failure(FailureKind kind);
  void drop(DropCause cause);
  ProcStatsSnapshot snapshot() const;

 private:
  static constexpr size_t kShared = kShards - 1;  // the threads that own none
  struct alignas(64) Shard {
    std::array<std::atomic<uint64_t>, static_cast<size_t>(Counter::kCount)> v{};
  };
  std::array<Shard, kShards> shards_{};
};

}  // namespace postal::runtime
