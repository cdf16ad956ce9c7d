// Deferred flushes (deferred_flush.h): a per-worker-thread list, run by the scheduler.
#include "postal/runtime/deferred_flush.h"

#include <utility>
#include <vector>

namespace postal::runtime {
namespace {

thread_local bool defers = false;
thread_local std::vector<std::shared_ptr<DeferredFlush>> deferred;

}  // namespace

bool can_defer_flush() { return defers; }

void defer_flush(std::shared_ptr<DeferredFlush> f) { deferred.push_back(std::move(f)); }

namespace internal {

void set_defers_flushes(bool on) { defers = on; }

void run_deferred_flushes() {
  // A flush may defer again (it posts while flushing): run until the list stays empty, taking
  // the batch out first so the list may grow meanwhile.
  while (!deferred.empty()) {
    std::vector<std::shared_ptr<DeferredFlush>> batch;
    batch.swap(deferred);
    for (const auto& f : batch) f->flush();
  }
}

}  // namespace internal
}  // namespace postal::runtime
