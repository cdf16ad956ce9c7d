// Proc: one postal process — its muxer, its forwarder, its scheduler and its statistics.
//
// A proc owns messages by id (R-ADDR-3): `post_unchecked` compares the destination's proc id with
// its own; local envelopes go through the muxer to the owner's Mailbox, others to the forwarder
// (a gateway or router, installed by the routing layer; by default a NoRouteSender that fails
// them with Transport(NoRoute)).
//
// The proc is also the ReturnHandle of everything posted through it (R-FAIL-3): an undeliverable
// comes back as `UndeliverableEnvelope` on the sender's handler port, posted with
// `return_undeliverable = false`, so a return that fails is dropped — counted and logged once per
// cause, rate limited (R-FAIL-4) — and never bounced again.
//
// `send` reports every failure asynchronously, as a returned envelope. `try_post` (R-FAIL-6) is
// the synchronous variant for the local part of the path: a refusal this proc can see at once —
// TTL expired, actor does not exist, stopped or failed, handler not bound, port never allocated
// or gone, payload of the wrong type, no forwarder for another proc — comes back as the call's
// `absl::Status` (`DeliveryFailure::to_status`) and the envelope is not returned (it is counted
// as a failure of its kind, not as returned). An envelope for another proc returns OK once the
// forwarder has it, unless the forwarder refuses it at once as Overloaded (a channel's queue
// past its bound, R-FLOW-2: `ResourceExhausted`); what fails beyond that point comes back
// asynchronously, as with `send`.
//
// Stopped actors stay in the muxer as closed mailboxes (tombstones, R-ACT-4) for
// `ProcOptions::tombstone_grace` (R-ACT-7): until then a send fails ActorStopped / ActorFailed
// and the name stays taken; after it the tombstone is reaped — sends fail ActorNotExist and the
// name is free again; past `ProcOptions::max_tombstones` the oldest goes before its grace. A
// lookup treats an expired tombstone as gone at once; the memory is
// released by the next `attach` (every spawn sweeps expired tombstones, oldest first) or
// `reap_tombstones()`, once the actor's last slice has ended. Time comes from
// `ProcOptions::clock`, so tests need not sleep.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "postal/runtime/address.h"
#include "postal/runtime/log_rate_limit.h"
#include "postal/runtime/mailbox.h"
#include "postal/runtime/mailbox_bound.h"
#include "postal/runtime/mailbox_sender.h"
#include "postal/runtime/proc_stats.h"
#include "postal/runtime/scheduler.h"
#include "postal/runtime/timers.h"

namespace postal::runtime {

struct ProcOptions {
  std::optional<ProcId> id;                // default: a random instance labelled "proc"
  std::optional<Location> location;        // default: inproc://<instance number>; a named
                                           // proc (singleton id): inproc://<random number>
  SchedulerOptions scheduler;
  uint8_t default_ttl = kDefaultTtl;       // R-ENV-2; 0 means the default (nothing could be sent)
  // R-ACT-7: how long a stopped or failed actor stays a tombstone. Zero reaps it as soon as it
  // closes; absl::InfiniteDuration() keeps tombstones for the proc's life.
  absl::Duration tombstone_grace = absl::Seconds(10);
  // R-ACT-7: at most this many tombstones at once. Past it the oldest is reaped before its grace
  // ends (sends to it fail ActorNotExist, not ActorStopped): a proc that churns actors faster than
  // this many per grace keeps a bounded muxer (~0.6 KB each).
  size_t max_tombstones = 100'000;
  // The proc's clock (R-ACT-7 tombstone ages, R-SUP-3 timers, R-SUP-1 restart windows and
  // backoff); empty means absl::Now. Tests hand in their own (virtual time on a deterministic
  // proc: advance it, then step).
  std::function<absl::Time()> clock;
  // R-FLOW-1: the mailbox bound of actors spawned without their own (SpawnOptions::mailbox).
  MailboxBound mailbox;

  // `workers` threads (0: one per core).
  static ProcOptions threads(int workers) {
    ProcOptions o;
    o.scheduler.workers = workers;
    return o;
  }
  // No threads: the test drives delivery with scheduler().step() / run_until_idle().
  static ProcOptions deterministic() {
    ProcOptions o;
    o.scheduler = SchedulerOptions::deterministic();
    return o;
  }
};

// What the trace hook sees (tests and users attach with `Proc::set_trace`).
enum class TraceEventKind : uint8_t { kPosted, kDelivered, kReturned, kDropped };
struct TraceEvent {
  TraceEventKind kind;
  const MessageEnvelope& envelope;
};
struct TraceHook {
  std::function<void(const TraceEvent&)> fn;
  std::optional<uint64_t> type_hash;  // only envelopes of this payload type
};

class Proc final : public MailboxSender, public ReturnHandle {
 public:
  explicit Proc(ProcOptions options = {});
  ~Proc() override;
  Proc(const Proc&) = delete;
  Proc& operator=(const Proc&) = delete;

  const ProcId& id() const { return id_; }
  const ProcAddr& addr() const { return addr_; }
  const Location& location() const { return addr_.location; }
  Scheduler& scheduler() { return scheduler_; }
  // R-SUP-3: the proc's timers, on its clock (fired before each step on a deterministic proc).
  Timers& timers() { return timers_; }
  uint8_t default_ttl() const { return default_ttl_; }
  // R-FLOW-1: the per-proc default mailbox bound (ProcOptions::mailbox).
  const MailboxBound& mailbox_bound() const { return mailbox_bound_; }

  // The sender for envelopes addressed to other procs. Not owned; nullptr restores NoRoute.
  void set_forwarder(MailboxSender* forwarder);

  // The address of a local actor uid.
  ActorAddr actor_addr(Uid uid) const { return ActorAddr{ActorId{id_, std::move(uid)}, location()}; }

  // Muxer. `attach` fails with AlreadyExists when the id is taken (live or tombstone).
  absl::Status attach(std::shared_ptr<Mailbox> mailbox);
  std::shared_ptr<Mailbox> lookup(const ActorId& id) const;
  // Live mailboxes plus tombstones not yet reaped (R-ACT-7: stays bounded under churn).
  size_t mailbox_count() const;
  // R-ACT-7: removes tombstones older than the grace period; frees those whose actor finished.
  // Returns how many were removed from the muxer.
  size_t reap_tombstones();
  // R-ACT-7: called by a mailbox when it closes (Mailbox::close), at `closed` (the proc's clock).
  void tombstoned(const Mailbox& mailbox, absl::Time closed);
  absl::Time now() const { return clock_ ? clock_() : absl::Now(); }
  // R-ACT-7: a closed mailbox past the grace period: to senders it no longer exists (also
  // through a reference that holds the mailbox itself).
  bool reaped(const Mailbox& mailbox) const {
    return mailbox.reaped_.load(std::memory_order_acquire) || expired(mailbox);
  }
  absl::Duration tombstone_grace() const { return tombstone_grace_; }
  // Calls `fn` for every mailbox, live or tombstone (a snapshot: `fn` may send).
  void for_each_mailbox(const std::function<void(const Mailbox&)>& fn) const;

  // Posts with the proc as return handle; `local` is a resolved destination mailbox (fast path).
  void send(EnvelopePtr env, Mailbox* local = nullptr);
  // R-FAIL-6: like `send`, but a local refusal is the result instead of a returned envelope
  // (see the header comment). OK means delivered to a local port or handed to the forwarder.
  absl::Status try_post(EnvelopePtr env, Mailbox* local = nullptr);

  void post_unchecked(EnvelopePtr env, ReturnHandle& ret) override;
  // R-FLOW-2, credit: the actor's mailbox sink is asked (PortSink::notify_on_room).
  bool notify_on_room(const ActorId& actor, std::function<void()> on_room) override;

  // ReturnHandle (R-FAIL-3, R-FAIL-4).
  void return_envelope(EnvelopePtr env) override;
  void drop(EnvelopePtr env, DropCause cause) override;

  ProcStats& counters() { return stats_; }
  ProcStatsSnapshot stats() const { return stats_.snapshot(); }

  // Delivery trace (one hook; set an empty TraceHook to remove it). The hook runs on the thread
  // that moved the envelope, outside any proc lock, so it may send; it must be thread-safe.
  void set_trace(TraceHook hook);
  void trace(TraceEventKind kind, const MessageEnvelope& env) {
    if (tracing_.load(std::memory_order_relaxed)) trace_slow(kind, env);
  }

  // The proc's own system sender: the `sender` of returned undeliverables.
  const ActorAddr& system_addr() const { return system_addr_; }

 private:
  void trace_slow(TraceEventKind kind, const MessageEnvelope& env);
  void log_drop(const MessageEnvelope& env, DropCause cause);

  ProcId id_;
  ProcAddr addr_;
  ActorAddr system_addr_;
  uint8_t default_ttl_;
  MailboxBound mailbox_bound_;
  Scheduler scheduler_;
  NoRouteSender no_route_;
  std::atomic<MailboxSender*> forwarder_;

  bool expired(const Mailbox& mailbox) const;
  size_t sweep(std::vector<std::shared_ptr<Mailbox>>& to_free)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(tomb_mu_);
  // Takes the oldest tombstone out of the muxer into the graveyard; false when it was gone.
  bool reap_oldest() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tomb_mu_);
  void publish_due() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tomb_mu_);

  std::function<absl::Time()> clock_;
  absl::Duration tombstone_grace_;
  size_t max_tombstones_;
  Timers timers_;

  // The muxer, in shards by uid (the top bits of its hash): spawns and stops on different
  // workers (Savina's Fibonacci: 150,049 of each in ~0.3 s) take different locks, and each
  // shard's table grows on its own.
  struct alignas(64) MuxerShard {
    mutable absl::Mutex mu;
    absl::flat_hash_map<Uid, std::shared_ptr<Mailbox>> map ABSL_GUARDED_BY(mu);
  };
  static constexpr size_t kMuxerShards = 16;
  MuxerShard& shard(const Uid& uid) const;
  mutable std::array<MuxerShard, kMuxerShards> shards_;

  // R-ACT-7: closed mailboxes in closing order (due time, uid, identity), and reaped ones whose
  // actor has not finished its last slice yet. Lock order: tomb_mu_, then a shard's.
  struct Tombstone {
    absl::Time due;
    Uid uid;
    const Mailbox* mailbox;
  };
  absl::Mutex tomb_mu_;
  std::deque<Tombstone> tombstones_ ABSL_GUARDED_BY(tomb_mu_);
  std::vector<std::shared_ptr<Mailbox>> graveyard_ ABSL_GUARDED_BY(tomb_mu_);
  // The oldest tombstone's due time (absl::ToUnixNanos), INT64_MAX when there is none, and
  // whether the graveyard holds a batch worth freeing (kGraveyardBatch in proc.cc): a spawn
  // reads these instead of taking tomb_mu_.
  std::atomic<int64_t> next_due_ns_{INT64_MAX};
  std::atomic<bool> graveyard_full_{false};

  ProcStats stats_;
  std::atomic<bool> tracing_{false};
  absl::Mutex trace_mu_;
  std::shared_ptr<const TraceHook> trace_ ABSL_GUARDED_BY(trace_mu_);
  // R-FAIL-4: one line per drop cause, then at most one a second per cause.
  std::array<LogRateLimit, 3> drop_log_limits_{LogRateLimit(absl::Seconds(1)),
                                               LogRateLimit(absl::Seconds(1)),
                                               LogRateLimit(absl::Seconds(1))};
};

}  // namespace postal::runtime
