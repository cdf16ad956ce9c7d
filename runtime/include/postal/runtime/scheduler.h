// Scheduler: runs actors on Boost.Fiber worker threads with work stealing.
//
// What it schedules are `Schedulable`s (actor cells): an actor with messages is made runnable
// once, runs a slice of at most `budget` messages on a runner fiber, and is made runnable again
// only if messages remain. Idle actors cost no fiber and no stack.
//
// Placement (keep communicating actors on one worker): an actor made runnable from a worker goes
// into that worker's LIFO slot and runs next on the same thread, so a request/response pair stays
// on one core; the slot's previous occupant moves to the worker's FIFO queue, from which idle
// workers steal. Runnables from other threads go to the shared inject queue, which is lock-free
// (inject_queue.h): a thread outside the workers that makes an actor runnable on every send pays
// one atomic exchange, no mutex.
//
// Idle strategy: a worker with no work spins for `spin` (yielding to its own ready fibers) and
// then sleeps on a fiber condition variable. Waking a sleeping worker costs a thread wake-up
// (~28 µs on 2-vCPU machines); `stats()` counts sleeps and wake-ups so benchmarks can say whether
// the receiver was asleep. `SchedulerOptions::low_power()` never spins.
//
// Server spin (`server_spin`, off by default; `raise_server_spin` turns it on for a running
// scheduler): a worker whose last idle gap — from going idle to finding work — was at most
// `server_spin` spins up to that long the next time, instead of `spin`. A proc that serves
// requests one by one from another proc (a MailboxHost and a synchronous publisher) then finds
// its next request awake rather than paying a thread wake-up per request. Off by default because
// it costs a core while the gaps stay short, and two such spinners on two vCPUs hold the cores the
// I/O threads need (decisions.md, "Server spin").
//
// Linger (`linger`, 2 µs by default, 0 with low_power): a slice whose actor's queue ran dry
// before its budget waits up to `linger` for the actor's next message — spinning on the queue,
// the actor still runnable — while its worker has nothing else queued. An actor fed by a
// sender on another worker (fan-out, fan-in) then takes its messages in slices of many instead
// of being released and made runnable again, and stolen, once per message; senders find it
// already runnable and pay no schedule. The wait ends at once when the worker gets work of its
// own, a stop or restart is asked for, or a message comes; work queued on other workers waits
// at most one slice longer to be stolen. What the slice sent and deferred is flushed before it
// waits. An actor whose waits run out waits again only after a growing number of dry slices (up
// to 255; a wait that pays off halves it), and its worker lets a growing number of chances to
// wait go by, whichever actor they come from (up to 4,095; halved likewise), so neither an actor
// whose next message comes later than the linger nor many such actors spend it on every slice.
//
// Idle poll (R-SCHED-2; `set_idle_poller`, which routing's Node sets to its I/O thread's loop):
// worker 0 does not spin and sleep when idle, it waits in the proc's I/O loop, so a message from
// the network is read, decoded and delivered by the thread that then runs its actor — one
// thread wake-up per message instead of two (the I/O thread's, then the worker's). A wake-up
// from another thread interrupts the wait. A worker alone in its scheduler keeps the loop while
// it runs the slices that follow, so a reply or a burst costs no hand-over either, and gives it
// back at the end of a slice once the I/O thread asks for it (it asks when the holder has not
// been waiting in the loop for a while: a busy worker never keeps the network waiting longer
// than a slice), before sleeping for any other reason, and when a handler of its blocks (a
// fiber resumed from another thread must not wait for the loop to return). With other workers
// it gives the loop back as soon as it has work, so the I/O thread serves the network, and
// wakes another worker, while it runs.
//
// Blocking: a handler that waits (a reply, a deadline) waits on its fiber inside a
// `BlockingScope`; the worker starts another runner fiber so the thread keeps running other
// actors, and retires the extra runner once the waiter resumes.
//
// Deterministic mode (`manual = true`): no threads. Runnables queue in FIFO order and run only
// when the test calls `step()` (one message) or `run_until_idle()`, on the caller's thread. A
// `request` made outside a step (a test's Client) drives `step()` itself until its reply, a
// failure, or nothing is runnable (R-ACT-8, runtime/port.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "boost/fiber/fiber.hpp"
#include "postal/runtime/inject_queue.h"

namespace postal::runtime {

// The InjectLink base is the scheduler's: it threads the runnable through the inject queue.
class Schedulable : public InjectLink {
 public:
  virtual ~Schedulable() = default;
  // Runs at most `budget` messages on the current runner fiber.
  virtual void run_slice(size_t budget) = 0;
};

struct SchedulerOptions {
  int workers = 0;                          // 0: one per hardware thread
  absl::Duration spin = absl::Microseconds(50);  // idle spin before sleeping
  absl::Duration server_spin = absl::ZeroDuration();  // see "Server spin" above; 0: off
  size_t budget = 64;                       // messages per slice before yielding the worker
  // How long a slice whose queue ran dry waits for the actor's next message while its worker
  // has nothing else queued (see "Linger" above); 0: never.
  absl::Duration linger = absl::Microseconds(2);
  bool manual = false;                      // deterministic test mode (no threads)

  static SchedulerOptions low_power() {
    SchedulerOptions o;
    o.spin = absl::ZeroDuration();
    o.linger = absl::ZeroDuration();
    return o;
  }
  static SchedulerOptions deterministic() {
    SchedulerOptions o;
    o.manual = true;
    o.workers = 0;
    return o;
  }
};

struct SchedulerStats {
  uint64_t slices = 0;     // slices run
  uint64_t steals = 0;     // runnables taken from another worker's queue
  uint64_t sleeps = 0;     // times a worker went to sleep
  uint64_t wakeups = 0;    // times a sleeping worker was notified
  uint64_t runners = 0;    // extra runner fibers started for blocked handlers
  uint64_t server_spins = 0;  // idle spins that lasted up to the server spin, not `spin`
  uint64_t polls = 0;         // idle waits in the I/O loop instead of a sleep (Idle poll)
};

class Worker;
class PortSink;

// An I/O loop that an idle worker may wait in instead of sleeping (see "Idle poll"; routing's
// IoThread lends its context). One thread runs the loop at a time.
class IdlePoller {
 public:
  virtual ~IdlePoller() = default;
  // Makes the caller the loop's only runner; false when that cannot be now (sleep as usual).
  virtual bool acquire() = 0;
  // The holder: runs what is ready, waiting up to `max` for something.
  virtual void run_once(std::chrono::nanoseconds max) = 0;
  // Any thread: makes the holder's run_once in progress, or its next one, return.
  virtual void interrupt() = 0;
  // The holder: gives the loop back.
  virtual void release() = 0;
  // Whether the loop's owner asked for it back (the holder then gives it back between slices).
  virtual bool wanted_back() const = 0;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Starts the worker threads (no-op in manual mode). Idempotent.
  void start();
  // Stops the workers after their current slices; runnables left queued are not run. Handlers
  // waiting inside a BlockingScope are woken with a cancellation and finish first.
  void stop();

  // Makes `s` runnable. Callers guarantee one outstanding schedule per Schedulable.
  void schedule(Schedulable* s);

  // Manual mode: runs one message of the oldest runnable (after letting resumed waiters run).
  // Returns false when nothing was runnable.
  bool step();
  // Manual mode: steps until nothing is runnable or `max_steps` ran; returns the steps run.
  size_t run_until_idle(size_t max_steps = SIZE_MAX);

  // Manual mode: runs at the start of every `step()` (the proc fires its due timers there, so
  // virtual time moves when the test advances its clock and steps; R-SUP-3).
  void set_before_step(std::function<void()> fn) { before_step_ = std::move(fn); }

  bool manual() const { return options_.manual; }
  // Manual mode: true while a `step()` runs a slice (so inside a handler that it runs).
  bool stepping() const { return stepping_fiber_.has_value(); }
  int worker_count() const { return static_cast<int>(workers_.size()); }
  const SchedulerOptions& options() const { return options_; }
  SchedulerStats stats() const;
  // Workers that ran out of work and are going to sleep or asleep (none is inside a slice).
  int sleeping_workers() const { return sleepers_.load(std::memory_order_seq_cst); }
  // Raises the server spin to at least `spin` (never lowers it; at most kMaxServerSpin); takes
  // effect at the workers' next idle. Thread-safe. An actor that serves requests asks for it on
  // its proc (MailboxHost).
  static constexpr absl::Duration kMaxServerSpin = absl::Milliseconds(10);
  void raise_server_spin(absl::Duration spin);
  absl::Duration server_spin() const {
    return absl::Nanoseconds(server_spin_ns_.load(std::memory_order_relaxed));
  }
  // How long an idle worker spins before sleeping when its last idle gap was `last_gap`: the
  // server spin when that is on and the gap was within it, else `spin` (0 with low_power).
  std::chrono::nanoseconds idle_spin_after(std::chrono::nanoseconds last_gap) const;

  // Lets worker 0 wait in `poller` when idle (see "Idle poll"; null: never). The poller must
  // outlive the workers.
  void set_idle_poller(IdlePoller* poller) { idle_poller_.store(poller); }

  // True on a worker thread of this scheduler.
  bool on_worker_thread() const;
  // True on a worker thread of this scheduler that has nothing queued: its LIFO slot, its own
  // queue and the shared inject queue are empty (other workers' queues are not looked at), and
  // no blocked handler on it has resumed. What a lingering slice asks (see "Linger").
  bool worker_has_nothing_queued() const;
  // The scheduler whose worker thread this is; nullptr elsewhere (R-FLOW-1: a sender blocked
  // for room waits inside that scheduler's BlockingScope).
  static Scheduler* current();

  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

  // Brackets a fiber wait inside a handler (see the header comment). `waiting_on` is failed with
  // a cancellation when the scheduler stops, so no waiter outlives it.
  class BlockingScope {
   public:
    explicit BlockingScope(Scheduler& s, PortSink* waiting_on = nullptr);
    ~BlockingScope();
    BlockingScope(const BlockingScope&) = delete;
    BlockingScope& operator=(const BlockingScope&) = delete;

   private:
    Scheduler& sched_;
    Worker* worker_;
    PortSink* waiting_on_;
  };

 private:
  friend class Worker;

  void cancel_waiters();
  void push_inject(Schedulable* s);
  Schedulable* pop_inject();
  void wake_one();

  SchedulerOptions options_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int> sleepers_{0};
  std::atomic<int64_t> server_spin_ns_{0};
  std::atomic<IdlePoller*> idle_poller_{nullptr};

  InjectQueue inject_;

  // The sinks blocked handlers wait on (BlockingScope), with how many scopes wait on each; a
  // stop fails them. A set, not a list: Banking's blocking requests keep hundreds waiting, and
  // each scope's end removed itself with a scan.
  absl::Mutex waiters_mu_;
  absl::flat_hash_map<PortSink*, uint32_t> waiters_ ABSL_GUARDED_BY(waiters_mu_);

  // Manual mode.
  std::function<void()> before_step_;
  std::optional<boost::fibers::fiber::id> stepping_fiber_;
  bool stepping_blocked_ = false;

  std::atomic<uint64_t> wakeups_{0};
};

namespace internal {
// R-SCHED-3: a send on a worker's thread found its actor runnable already (ActorCell::wake).
// Every 256 such sends the worker's LIFO slot offers its occupant to an idle worker.
void busy_slice_send();
}  // namespace internal

}  // namespace postal::runtime
