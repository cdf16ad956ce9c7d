// ActorCell: the runtime side of one actor — its queue, its state, its place in the scheduler
// (actors internal).
//
// The cell is the sink of the actor's handler ports: the mailbox decodes and hands envelopes to
// `deliver`, which pushes them on an intrusive MPSC queue and makes the cell runnable once
// (`scheduled_`). A runner fiber then calls `run_slice`, which handles queued messages one at a
// time (R-ACT-2). The mailbox owns the cell while the actor runs; the proc's muxer keeps the
// mailbox as a tombstone after the actor ends (R-ACT-4) until it is reaped (R-ACT-7), and the
// tombstone lets go of the cell as its last slice ends (Mailbox::release_finished_sink: the cell
// is freed then, unless a handle still holds it); the user's Actor object is freed at the end.
//
// Lifetime (R-ACT-7): a reaped mailbox — and with it the cell — may be freed as soon as the cell
// says it is `finished()`. So the slice that terminates the cell is its last: after it nothing
// schedules the cell again (`scheduled_` stays true, deliveries are refused by the closed
// mailbox and the ones in flight are waited for), `finished_` is its very last write, and no
// pointer to a cell outlives it unowned (children are weak, the parent is an address, timers and
// the backoff hold weak references).
//
// Restarts (R-SUP-1, cell_supervision.cc): a failure under a restart policy ends the incarnation
// instead of the cell. The slice that ends it keeps `scheduled_` set, so deliveries queue without
// running the cell; the backoff timer (or a stop) hands the cell back to the scheduler
// (`end_backoff`, once), and the next slice re-creates the actor and runs init.
#pragma once

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "postal/actors/context.h"
#include "postal/actors/remote_watch.h"
#include "postal/runtime/mpsc_queue.h"
#include "restart_budget.h"

namespace postal::actors::internal {

class ReplySink;  // cell_requests.cc

class ActorCell final : public Context,
                        public runtime::Schedulable,
                        public runtime::PortSink,
                        public ActorControl,
                        public std::enable_shared_from_this<ActorCell> {
 public:
  ActorCell(runtime::Proc& proc, std::optional<runtime::ActorAddr> parent,
            std::unique_ptr<Actor> actor, const ActorType& type, const SpawnOptions& options,
            ActorMaker remake)
      : proc_(proc),
        parent_(std::move(parent)),
        actor_(std::move(actor)),
        type_(type),
        supervision_(options.supervision),
        bound_(options.mailbox.value_or(proc.mailbox_bound())),
        budget_(options.supervision),
        remake_(std::move(remake)) {}

  ~ActorCell() override;  // cell_bounds.cc

  void bind(const std::shared_ptr<runtime::Mailbox>& mailbox);
  void add_child(const std::shared_ptr<ActorCell>& child);
  const Supervision& supervision() const { return supervision_; }
  // R-SUP-1: which incarnation this is (0 first); read on this cell's runner only.
  uint32_t incarnation() const { return incarnation_; }
  void set_parent_incarnation(uint32_t n) { parent_incarnation_ = n; }
  // Schedules the first slice, which runs init.
  void start();

  // --- SendContext / Context ---
  runtime::Proc& proc() override { return proc_; }
  std::shared_ptr<runtime::Mailbox> mailbox() override { return mailbox_->shared_from_this(); }
  const runtime::ActorAddr& self_addr() const override { return addr_; }
  const runtime::MessageEnvelope* envelope() const override { return current_; }
  ActorStatus status() const override;
  void stop(std::string reason) override;
  bool cancel(TimerHandle timer) override;
  void unstash_all() override;
  size_t stashed() const override { return stash_.size(); }
  void receive_all() override;
  bool receiving_all() const override { return only_ == nullptr || only_->empty(); }
  uint64_t queued_behind() const override {
    const uint64_t counted = queued();
    const uint64_t mine = stash_.size() + (current_ != nullptr ? 1 : 0);
    return counted > mine ? counted - mine : 0;
  }
  runtime::PortAddr open_reply(uint64_t type_hash, runtime::DecodeFn decode, absl::Duration timeout,
                               ReplyContinuation cont, uint64_t* index) override;
  absl::Status watch(const runtime::ActorAddr& who) override;
  bool unwatch(const runtime::ActorAddr& who) override;

  // --- ActorControl ---
  const runtime::ActorAddr& addr() const override { return addr_; }
  // Null once the tombstone was reaped and nobody else holds the mailbox (R-ACT-7).
  std::shared_ptr<runtime::Mailbox> mailbox_ptr() const override { return weak_mailbox_.lock(); }
  absl::StatusOr<ActorStatus> wait(absl::Duration timeout) override;

  // --- PortSink: any thread ---
  void deliver(runtime::EnvelopePtr env) override;
  // R-ACT-7: the last slice has ended and no earlier slice is still in the tail of release();
  // the cell may be freed.
  bool finished() const override {
    return finished_.load(std::memory_order_acquire) &&
           releasing_.load(std::memory_order_acquire) == 0;
  }
  runtime::SinkInfo info() const override;
  // R-FLOW-1 (cell_bounds.cc): reserves room against the mailbox bound, or refuses by policy.
  runtime::Admission admit(runtime::MessageEnvelope& env) override;
  bool wait_for_room(absl::Time deadline) override;
  // R-FLOW-2, credit (cell_bounds.cc): `on_room` runs once the mailbox is at half its bound or
  // less, or the actor stops; at most kMaxRoomListeners wait at once (false past it).
  bool notify_on_room(std::function<void()> on_room) override;
  static constexpr size_t kMaxRoomListeners = 65536;

  // --- Schedulable: one runner at a time ---
  // After a call that terminated the cell, nothing here touches it again (R-ACT-7).
  void run_slice(size_t budget) override;

  // The proc is being destroyed, its scheduler stopped: frees the actor and what it queued.
  void abandon() override;

  // R-SUP-1, any thread: an all-for-one sibling failed; restart between two messages.
  void request_restart(std::string why);

 private:
  absl::Status stash_current(uint64_t type_hash, wire::Any** slot) override;
  void set_receive_only(const uint64_t* type_hashes, size_t n) override;
  // R-ACT-9, selective receive: whether a handler message of this type waits in the stash.
  bool held_back(uint64_t type_hash) const {
    return only_ != nullptr && !only_->empty() &&
           std::find(only_->begin(), only_->end(), type_hash) == only_->end();
  }
  // The next message: unstashed ones first (those selective receive holds back go straight back
  // to the stash), then the queue.
  runtime::EnvelopePtr next_message();
  // R-FLOW-1 (cell_bounds.cc). The queue's consumer side: for a kDropOldest cell senders pop
  // too (dropping the oldest), so every consumer operation holds drop_mu_.
  runtime::MessageEnvelope* pop_queue();
  bool queue_maybe_nonempty();
  // kDropOldest: the oldest queued envelope that may be dropped, and the failure it returns with.
  runtime::EnvelopePtr pop_droppable(runtime::DeliveryFailure* why);
  bool try_reserve(uint64_t bytes);
  // R-FLOW-1: envelopes and bytes held against the bound now (admitted less released; the
  // released count is read first, so the difference never wraps).
  uint64_t queued() const {
    const uint64_t out = released_.load(std::memory_order_seq_cst);
    return admitted_.load(std::memory_order_seq_cst) - out;
  }
  uint64_t queued_bytes() const {
    const uint64_t out = released_bytes_.load(std::memory_order_seq_cst);
    return admitted_bytes_.load(std::memory_order_seq_cst) - out;
  }
  // A counted envelope (handler port) left the mailbox: frees its room, wakes blocked senders.
  void release_room(const runtime::MessageEnvelope& env);
  void wake_blocked_senders();
  // Credit: the mailbox is at half its bound or less (or the actor is ending).
  bool credit_room() const;
  // Runs (once) every on_room registered so far.
  void call_room_listeners();
  runtime::DeliveryFailure overloaded(const runtime::MessageEnvelope& env, uint64_t bytes,
                                      std::string detail) const;
  bool has_replay() const { return !replay_.empty(); }
  TimerHandle start_timer(absl::Duration delay, absl::Duration period, EnvelopeMaker make) override;
  void cancel_timers();
  // R-ACT-10 (cell_requests.cc): runs the continuation a reply (or its failure) is for.
  bool complete_reply(runtime::EnvelopePtr env);
  // Fails the requests past their deadline; false when a continuation failed (the slice ended).
  bool expire_replies();
  // Arms the one proc timer for the requests' deadlines, if `deadline` is ahead of it.
  void arm_deadline(absl::Time deadline);
  // Drops every pending continuation (restart, end): their ports close, their timers stop.
  void drop_replies();
  // R-SUP-2 (cell_watches.cc). A watcher registers with the watched cell; the cell sends Down
  // to every watcher when it terminates.
  // False when this cell has ended: the caller sends Down itself, with `*ended`.
  bool add_watcher(const runtime::ActorAddr& watcher, ActorStatus* ended);
  void remove_watcher(const runtime::ActorAddr& watcher);
  size_t watcher_count() const;
  void send_down(const runtime::ActorAddr& to, const Down& down);
  void notify_watchers(const ActorStatus& status);
  void end_watches();
  // A Down about to reach the actor: false when it is not (or no longer) watched.
  bool accept_down(const Down& down);
  friend void serve_remote_watch(runtime::Proc& proc, const WatchRequest& request);
  // R-SUP-4: this proc's postal-watch, and a WatchRemote to it about `who`.
  runtime::ActorAddr keeper_addr() const;
  void tell_keeper(const runtime::ActorAddr& who, uint8_t op);
  bool stop_requested() const { return stop_requested_.load(std::memory_order_acquire); }
  void wake();
  bool linger();
  void release();
  bool run_init();
  bool process(runtime::EnvelopePtr env);
  // Runs user code; an escaped exception becomes an error (R-ACT-3).
  template <class F>
  static absl::Status guarded(F&& f) {
    try {
      return f();
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("exception escaped a handler: ", e.what()));
    } catch (...) {
      return absl::InternalError("exception of unknown type escaped a handler");
    }
  }
  void terminate(ActorState final_state, std::string error);
  void report(SupervisionEvent event);
  void return_queued();
  void return_one(runtime::EnvelopePtr env, runtime::InvalidReason reason, std::string& why);
  void stop_children(const std::string& reason);
  void run_on_stop(const ActorStatus& status);

  // R-SUP-1 (cell_supervision.cc). Each returns false: the slice ends there.
  bool on_failure(std::string error);
  bool restart(const std::string& why, absl::Duration backoff, bool failed);
  void end_backoff();
  // A SupervisionEvent about to reach the actor: false when it is stale (a child of an earlier
  // incarnation); restarts all-for-one siblings when it says a child restarts.
  bool supervise(const SupervisionEvent& event);

  runtime::Proc& proc_;
  std::optional<runtime::ActorAddr> parent_;  // where SupervisionEvents go (R-ACT-3)
  std::unique_ptr<Actor> actor_;
  const ActorType& type_;
  const Supervision supervision_;      // of the SpawnOptions, what the cell keeps
  const runtime::MailboxBound bound_;  // R-FLOW-1: resolved at spawn
  RestartBudget budget_;               // runner only
  uint32_t incarnation_ = 0;           // runner only
  uint32_t parent_incarnation_ = 0;    // set before start
  const ActorMaker remake_;
  runtime::Mailbox* mailbox_ = nullptr;  // owns this cell
  std::weak_ptr<runtime::Mailbox> weak_mailbox_;
  runtime::ActorAddr addr_;
  // The senders' line: what every send writes (the queue's producer end, the R-FLOW-1 counts in)
  // or reads (the runnable flag). The runner's line is further down, past the cold fields
  // between them (72 bytes), so the two never share a cache line: with both on one line, one
  // producer and one busy consumer pulled it from each other on every message (Savina's Count).
  runtime::MpscHead queue_head_;
  std::atomic<bool> scheduled_{false};
  // R-FLOW-1: what the mailbox holds against bound_ (queued, being handled, stashed, replayed;
  // handler ports only) is what was admitted less what was released, in envelopes and in bytes
  // (MessageEnvelope::held_bytes). Senders add here; the runner takes off in released_*.
  std::atomic<uint64_t> admitted_{0};
  std::atomic<uint64_t> admitted_bytes_{0};
  // Lower bounds of released_*, kept by the senders: a send reads the runner's line only when
  // these say the mailbox may be full (try_reserve).
  std::atomic<uint64_t> released_seen_{0};
  std::atomic<uint64_t> released_bytes_seen_{0};
  // Cold (and the gap between the two lines).
  struct RoomWaiters;  // cell_bounds.cc; made by the first to block
  std::atomic<RoomWaiters*> room_{nullptr};
  absl::Mutex listeners_mu_;
  std::vector<std::function<void()>> listeners_ ABSL_GUARDED_BY(listeners_mu_);
  absl::Mutex drop_mu_;  // kDropOldest only (see pop_queue)
  // kDropOldest: what a dropping sender popped but must not drop (a reply to the actor's own
  // request, a supervision message), handled before the queue. Oldest first.
  std::vector<runtime::EnvelopePtr> spared_ ABSL_GUARDED_BY(drop_mu_);
  // The runner's line: the queue's consumer end, the counts out, what release_room reads.
  runtime::MpscQueue queue_{queue_head_};
  std::atomic<uint64_t> released_{0};
  std::atomic<uint64_t> released_bytes_{0};
  std::atomic<uint32_t> blocked_senders_{0};
  std::atomic<uint32_t> room_listeners_{0};  // listeners_.size(), read without the lock
  std::atomic<bool> room_signalled_{false};  // a release woke the blocked senders (cell_bounds.cc)
  std::atomic<ActorState> state_{ActorState::kCreated};
  bool stash_current_ = false;  // set by stash() during its handler
  runtime::MessageEnvelope* current_ = nullptr;
  runtime::MessageEnvelope* handling_ = nullptr;  // the handler message being handled
  // A put-aside message with its type, so selective receive can hold it back again without
  // touching its envelope (a replayed stash is cold; R-ACT-9).
  struct Stashed {
    uint64_t type_hash;
    runtime::EnvelopePtr env;
  };
  std::vector<Stashed> stash_;  // runner only, oldest first
  // R-ACT-9: the types receive_only() accepts (runner only); null or empty: every type. Kept
  // allocated between calls (an actor that waits often sets it often).
  std::unique_ptr<std::vector<uint64_t>> only_;
  // Unstashed, handled before the queue; the next one last (no allocation until used).
  std::vector<Stashed> replay_;
  static constexpr size_t kReplayPrefetch = 3;      // how far ahead next_message prefetches replay_
  std::vector<std::weak_ptr<ActorCell>> children_;  // a reaped child is simply gone (R-ACT-7)
  size_t prune_at_ = 64;
  // R-SCHED-1, runner only: dry slices left before the next linger, and how many the last
  // fruitless linger set (linger() in actor_cell.cc).
  static constexpr int kMaxLingerSkip = 255;
  uint8_t linger_countdown_ = 0;
  uint8_t linger_skip_ = 0;
  std::atomic<bool> finished_{false};
  std::atomic<bool> backoff_pending_{false};  // R-SUP-1: the backoff holds `scheduled_`
  // Slices past `scheduled_ = false` in release(): another worker may already run (and end)
  // the cell, but it must not be freed under them (R-ACT-7).
  std::atomic<int> releasing_{0};
  std::atomic<uint64_t> backoff_timer_{0};
  std::atomic<bool> restart_requested_{false};
  std::atomic<bool> stop_requested_{false};
  bool ended_ ABSL_GUARDED_BY(mu_) = false;  // terminal, on_stop ran, the actor is destroyed

  mutable absl::Mutex mu_;
  std::string reason_ ABSL_GUARDED_BY(mu_);
  std::string restart_reason_ ABSL_GUARDED_BY(mu_);
  struct PendingReply {
    ReplyContinuation cont;
    absl::Duration timeout;  // for the DeadlineExceeded message
  };
  // R-ACT-10 (cell_requests.cc), runner only: the pending requests by port index, their
  // deadlines (a min-heap that may hold answered ones), the one sink of their ports (per
  // incarnation), and the proc timer armed for the earliest deadline. Made by the first
  // event-based request and kept for the cell's life: an actor that never makes one does not
  // carry it (bytes per idle actor, benchmarks.md).
  struct Requests {
    absl::flat_hash_map<uint64_t, PendingReply> replies;
    std::vector<std::pair<absl::Time, uint64_t>> deadlines;
    std::shared_ptr<ReplySink> sink;
    absl::Time armed_deadline = absl::InfiniteFuture();
    uint64_t deadline_timer = 0;
  };
  std::unique_ptr<Requests> requests_;
  std::vector<runtime::ActorAddr> watchers_ ABSL_GUARDED_BY(mu_);  // R-SUP-2
  std::vector<runtime::ActorAddr> watching_;                       // R-SUP-2, runner only
  std::vector<uint64_t> timers_ ABSL_GUARDED_BY(mu_);              // R-SUP-3, pruned as it doubles
  size_t timers_prune_at_ ABSL_GUARDED_BY(mu_) = 16;
};

}  // namespace postal::actors::internal
