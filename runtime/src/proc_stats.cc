#include "postal/runtime/proc_stats.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace postal::runtime {

namespace internal {
namespace {

// The shards no live thread owns. The mutex orders a shard's last owner's writes before its
// next owner's.
struct ShardPool {
  absl::Mutex mu;
  std::vector<int> free ABSL_GUARDED_BY(mu);
  ShardPool() {
    for (int i = static_cast<int>(ProcStats::kShards) - 2; i >= 0; --i) free.push_back(i);
  }
};
ShardPool& shard_pool() {
  static ShardPool* pool = new ShardPool();  // never destroyed: threads exit after main
  return *pool;
}

// Gives the thread's shard back when it exits. What the thread counts after that (from other
// thread-local destructors) goes to the shared shard.
struct ShardLease {
  ~ShardLease() {
    const int s = counter_shard;
    counter_shard = static_cast<int>(ProcStats::kShards) - 1;
    if (s < 0 || s == counter_shard) return;
    ShardPool& pool = shard_pool();
    absl::MutexLock lock(&pool.mu);
    pool.free.push_back(s);
  }
};

}  // namespace

int claim_counter_shard() {
  const int shared = static_cast<int>(ProcStats::kShards) - 1;
  int s = shared;
  {
    ShardPool& pool = shard_pool();
    absl::MutexLock lock(&pool.mu);
    if (!pool.free.empty()) {
      s = pool.free.back();
      pool.free.pop_back();
    }
  }
  counter_shard = s;
  thread_local ShardLease lease;  // constructed here, on the first add
  (void)lease;
  return s;
}

}  // namespace internal

void ProcStats::failure(FailureKind kind) {
  switch (kind) {
    case FailureKind::kInvalidReference: add(Counter::kInvalidReference); break;
    case FailureKind::kTransport: add(Counter::kTransport); break;
    case FailureKind::kPortGone: add(Counter::kPortGone); break;
    case FailureKind::kExpired: add(Counter::kExpired); break;
  }
}

void ProcStats::drop(DropCause cause) {
  add(Counter::kDropped);
  switch (cause) {
    case DropCause::kReturnDisabled: add(Counter::kDropReturnDisabled); break;
    case DropCause::kReturnFailed: add(Counter::kDropReturnFailed); break;
    case DropCause::kNoReturnPath: add(Counter::kDropNoReturnPath); break;
  }
}

ProcStatsSnapshot ProcStats::snapshot() const {
  std::array<uint64_t, static_cast<size_t>(Counter::kCount)> sum{};
  for (const Shard& s : shards_) {
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += s.v[i].load(std::memory_order_relaxed);
  }
  auto at = [&](Counter c) { return sum[static_cast<size_t>(c)]; };
  ProcStatsSnapshot out;
  out.posted = at(Counter::kPosted);
  out.delivered = at(Counter::kDelivered);
  out.returned = at(Counter::kReturned);
  out.dropped = at(Counter::kDropped);
  out.invalid_reference = at(Counter::kInvalidReference);
  out.transport = at(Counter::kTransport);
  out.port_gone = at(Counter::kPortGone);
  out.expired = at(Counter::kExpired);
  out.drop_return_disabled = at(Counter::kDropReturnDisabled);
  out.drop_return_failed = at(Counter::kDropReturnFailed);
  out.drop_no_return_path = at(Counter::kDropNoReturnPath);
  out.overloaded = at(Counter::kOverloaded);
  out.dropped_oldest = at(Counter::kDroppedOldest);
  return out;
}

uint64_t ProcStatsSnapshot::undeliverable(FailureKind kind) const {
  switch (kind) {
    case FailureKind::kInvalidReference: return invalid_reference;
    case FailureKind::kTransport: return transport;
    case FailureKind::kPortGone: return port_gone;
    case FailureKind::kExpired: return expired;
  }
  return 0;
}

std::string ProcStatsSnapshot::to_string() const {
  return absl::StrCat("posted=", posted, " delivered=", delivered, " returned=", returned,
                      " dropped=", dropped, " failures{invalid_reference=", invalid_reference,
                      " transport=", transport, " port_gone=", port_gone, " expired=", expired,
                      "} drops{return_disabled=", drop_return_disabled,
                      " return_failed=", drop_return_failed,
                      " no_return_path=", drop_no_return_path, "} overloaded=", overloaded,
                      " dropped_oldest=", dropped_oldest);
}

}  // namespace postal::runtime
