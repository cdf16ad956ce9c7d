// retained_core.h — the shared state behind RetainedMailboxes and its handles (internal).
//
// Lock order: Core::mu, then MailStore's own locks, then Sub::mu. Strand tasks never take
// Core::mu, so a handler may publish, erase or subscribe.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "../mem/delivery_executor.h"
#include "absl/synchronization/mutex.h"
#include "postal/mail/retained_mailboxes.h"

namespace postal::mail::retained_internal {

using mem_internal::DeliveryExecutor;

// What the members of one lifetime of a named queue group share (M-RECV-4): the replay
// snapshot, and which stored messages up to it a member was handed already — settled by the
// group before it formed (read from the store's marks), or handed out since. Live messages past
// the snapshot are routed to exactly one member and need no record. So `taken` is bounded by
// what was stored when the group formed.
struct GroupLedger {
  std::string name;  // the queue group's name: the store's key for its marks
  std::shared_ptr<MailStore> store;
  uint64_t replay_through = 0;
  DeliverPolicy deliver = DeliverPolicy::kAll;

  // True when no member of this lifetime had `seq` yet; it now has.
  bool claim(uint64_t seq);
  bool replay_done();
  void finish_replay();

  absl::Mutex mu;
  std::unordered_set<uint64_t> taken ABSL_GUARDED_BY(mu);
  bool replayed ABSL_GUARDED_BY(mu) = false;
};

// One subscription or listing watch.
struct Sub {
  std::string mailbox;
  std::string group;  // key in Core::groups[mailbox]
  uint64_t max_message_bytes = 0;
  RetainedHandler handler;
  std::shared_ptr<GroupLedger> ledger;  // named queue groups only
  std::function<void(const absl::Status&)> on_end;
  std::function<void(const MailboxEvent&)> on_event;  // listing watches
  std::shared_ptr<DeliveryExecutor::Strand> strand;

  // Touched only by tasks on the strand.
  uint64_t replay_through = 0;            // 0: this subscription does not replay
  DeliverPolicy deliver = DeliverPolicy::kAll;  // what the replay hands out (M-KIND-3)
  std::unordered_set<uint64_t> replayed;  // seqs ≤ replay_through the replay delivered

  absl::Mutex mu;
  bool closed ABSL_GUARDED_BY(mu) = false;
  bool running ABSL_GUARDED_BY(mu) = false;
  std::thread::id runner ABSL_GUARDED_BY(mu);
  std::atomic<uint64_t> delivered{0};

  // Marks it closed and waits for a running task of it, unless called from inside that task.
  void close();
};

// Subscriptions of one mailbox sharing a queue group (or a subscription alone).
struct Group {
  std::vector<std::shared_ptr<Sub>> members;
  size_t next = 0;
  uint64_t replay_through = 0;  // live messages up to here go to the replaying member
  std::weak_ptr<Sub> replayer;
  std::shared_ptr<GroupLedger> ledger;  // named queue groups only
};

struct Core {
  explicit Core(RetainedOptions o);

  // Runs `task` on `sub`'s strand unless `sub` is closed by then; then `skipped` runs instead.
  void post(const std::shared_ptr<Sub>& sub, std::function<void(Sub&)> task,
            std::function<void()> skipped = nullptr);
  // Routes a stored message to one member of each group of its mailbox. Needs mu.
  void route_locked(const RetainedMessage& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Routes it to one member of one group: the replaying member up to the group's snapshot,
  // else the next in turn. A member that left before delivering it hands it back here, so a
  // queue group loses nothing to a member leaving (M-RECV-4). Needs mu.
  void route_to_group_locked(const RetainedMessage& message, const std::string& key, Group& group)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Ends every subscription of `mailbox` with `why`. Needs mu.
  void end_locked(const std::string& mailbox, const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void notify_locked(const MailboxEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void arm_expiry_locked(const MailboxInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void remove_sub(const std::shared_ptr<Sub>& sub);

  const RetainedOptions options;
  const std::shared_ptr<MailStore> store;
  const std::shared_ptr<Clock> clock;
  std::weak_ptr<Core> self;
  DeliveryExecutor executor;

  absl::Mutex mu;
  std::map<std::string, std::map<std::string, Group>, std::less<>> groups ABSL_GUARDED_BY(mu);
  std::vector<std::shared_ptr<Sub>> watchers ABSL_GUARDED_BY(mu);
  std::map<std::string, Clock::TimerId, std::less<>> expiry_timers ABSL_GUARDED_BY(mu);
  Clock::TimerId sweep_timer ABSL_GUARDED_BY(mu) = 0;
  // publish_async calls whose store append has not completed yet; ~RetainedMailboxes waits for
  // them, so their continuations never outlive this core.
  // publish_async calls not finished yet. Its own lock, never held into the store: a commit's
  // continuation (on the writer, or the thread that committed) counts down without waiting for
  // `mu`, which create/remove hold while they wait for the writer.
  absl::Mutex pending_mu;
  uint64_t pending_appends ABSL_GUARDED_BY(pending_mu) = 0;
  // Members of all groups (changed under mu, read without it): a publish that sees 0 after its
  // commit routes nothing. A subscription counts itself before it snapshots the store, so either
  // the publish sees it and routes, or its commit came first and the replay reads it.
  std::atomic<uint64_t> members{0};
  // Where publish_async's continuations run, in commit order: never on the store's writer
  // thread, which must not wait for `mu` (mailbox-level calls hold `mu` across a store call that
  // waits for the writer — a continuation taking `mu` there would deadlock with them).
  std::shared_ptr<DeliveryExecutor::Strand> published = executor.make_strand();
  uint64_t solo_count ABSL_GUARDED_BY(mu) = 0;
  bool stopped ABSL_GUARDED_BY(mu) = false;

  absl::Mutex idle_mu;
  int64_t pending ABSL_GUARDED_BY(idle_mu) = 0;
};

// The ledger of a named group's new lifetime: the marks it settled before, up to `snapshot`.
absl::StatusOr<std::shared_ptr<GroupLedger>> form_ledger(const std::shared_ptr<MailStore>& store,
                                                         const MailboxInfo& mailbox,
                                                         const std::string& name,
                                                         uint64_t snapshot, DeliverPolicy deliver);
// Removes every mailbox whose TTL ended and ends its subscriptions (M-BOX-3).
absl::Status sweep_expired(Core& core);
// Schedules the periodic sweep.
void arm_sweep(const std::shared_ptr<Core>& core);

// The strand tasks. A named group's member replays through its ledger (replay_group).
void replay(Sub& sub, MailStore& store);
void replay_group(Sub& sub);
void deliver(Sub& sub, const RetainedMessage& message);

}  // namespace postal::mail::retained_internal
