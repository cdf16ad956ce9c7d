// mem_bus.h — `MemBus`, the in-process "server" behind the `mem` provider.
//
// A bus holds mailboxes (queued, in-flight and parked copies, subscribers, activity times) and the
// Clock they run on. Providers on one bus see the same mailboxes and subscriptions — that is what
// lets two PostOffices in one process talk over `mem:` — and the state outlives any provider's
// stop(). Three ways to pick the boundary:
//
//   MemBus::shared()             the process-wide default bus (what MemOptions uses when its
//                                `bus` is null). Like the wire type registry, it is a documented
//                                process-wide table: created on first use, never destroyed.
//   MemBus::for_scope("tenant")  a named bus: shared by everyone using that name, invisible to
//                                other names. The scope registry is never collected: a name
//                                generated per run pins its bus for the life of the process;
//                                use isolated() for throwaway state.
//   MemBus::isolated(clock)      a private bus; pass a ManualClock to drive its time in tests.
//
// `clear()` drops queued and in-flight copies of every mailbox (never subscriptions, never
// parked records, which only `purge_parked` removes); on the shared bus that is the whole `mem:`
// namespace of the process. Stale lease handles then settle nothing (they return false).
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "postal/mail/clock.h"

namespace postal::mail {

namespace mem_internal {
class BusState;
}
class MemProvider;

class MemBus {
 public:
  static std::shared_ptr<MemBus> shared();
  static std::shared_ptr<MemBus> for_scope(std::string_view scope);
  // A private bus on `clock` (a SystemClock when null).
  static std::shared_ptr<MemBus> isolated(std::shared_ptr<Clock> clock = nullptr);

  ~MemBus();
  MemBus(const MemBus&) = delete;
  MemBus& operator=(const MemBus&) = delete;

  Clock& clock() const;

  // Drops every mailbox's queued and in-flight copies; returns how many.
  uint64_t clear();
  // Drops one mailbox's queued and in-flight copies; InvalidMailboxAddress on a bad address.
  absl::StatusOr<uint64_t> clear(std::string_view address);

 private:
  friend class MemProvider;
  explicit MemBus(std::shared_ptr<Clock> clock);
  std::shared_ptr<mem_internal::BusState> state_;
};

}  // namespace postal::mail
