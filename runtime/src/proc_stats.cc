#include "postal/runtime/proc_stats.h"

#include "absl/strings/str_cat.h"

namespace postal::runtime {

size_t ProcStats::shard() {
  static std::atomic<size_t> next{0};
  thread_local size_t mine = next.fetch_add(1, std::memory_order_relaxed) % kShards;
  return mine;
}

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
