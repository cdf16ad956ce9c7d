// Deferred flushes: the hand-off budget's hook between the scheduler and senders that batch
// (docs/wire.md §13).
//
// A sender that can batch (a channel client) defers its flush to the end of the current worker
// slice instead of waking another thread per post: a handler that sends a burst costs one flush,
// which writes on the worker itself when it can. The worker runs its deferred flushes after each
// slice and before it spins or sleeps, so nothing deferred waits on an idle worker — also when a
// handler blocks (its fiber yields to a runner that finishes a slice or idles).
//
// Off worker threads (a Client's thread, an I/O thread, the deterministic scheduler)
// `can_defer_flush()` is false and the sender flushes at once.
#pragma once

#include <memory>

namespace postal::runtime {

class DeferredFlush {
 public:
  virtual ~DeferredFlush() = default;
  // Runs on the worker thread that deferred it, once per defer_flush call.
  virtual void flush() = 0;
};

// Whether the calling thread is a worker that runs deferred flushes.
bool can_defer_flush();
// Queues `f` to run after the current slice on this worker. Precondition: can_defer_flush().
void defer_flush(std::shared_ptr<DeferredFlush> f);

namespace internal {
// The scheduler's side: marks this thread as a worker (or not) and runs what it deferred.
void set_defers_flushes(bool on);
void run_deferred_flushes();
}  // namespace internal

}  // namespace postal::runtime
