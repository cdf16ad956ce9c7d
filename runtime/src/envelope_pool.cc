#include "envelope_pool.h"

#include <algorithm>
#include <atomic>
#include <new>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace postal::runtime::internal {
namespace {

using Batch = std::vector<void*>;

// Full batches handed between threads (envelope_pool.h).
class Depot {
 public:
  // False when the depot is full: the caller frees the blocks itself.
  bool put(Batch& batch) {
    absl::MutexLock lock(&mu_);
    if (batches_.size() >= kEnvelopeDepotBatches) return false;
    batches_.push_back(std::move(batch));
    count_.store(batches_.size(), std::memory_order_relaxed);
    return true;
  }
  // Swaps a full batch into `into` (empty); false when there is none. A thread that makes
  // envelopes faster than any thread frees them finds the depot empty on every allocation: it
  // learns that from one relaxed load instead of the lock (a batch put a moment ago is taken at
  // the next allocation).
  bool take(Batch& into) {
    if (count_.load(std::memory_order_relaxed) == 0) return false;
    absl::MutexLock lock(&mu_);
    if (batches_.empty()) return false;
    into.swap(batches_.back());
    batches_.pop_back();
    count_.store(batches_.size(), std::memory_order_relaxed);
    return true;
  }

 private:
  absl::Mutex mu_;
  std::vector<Batch> batches_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> count_{0};  // batches_.size(), readable without the lock
};

Depot& depot() {
  static Depot* d = new Depot();  // never destroyed: frees at exit may still reach it
  return *d;
}

// The thread's pool: not made yet (a thread that has only freed so far), alive, or destroyed
// (thread exit). Trivially destructible, so it stays readable after the pool is gone.
enum class PoolState : unsigned char { kNotYet, kAlive, kGone };
thread_local PoolState pool_state = PoolState::kNotYet;

// A block handed out here was last written by whichever thread freed it — often another
// (fan-out: the receivers' worker frees what the sender's worker makes), so every line of the
// new envelope is a store miss, and the sender's next locked instruction waits for them all.
// Asking for the next block's lines now overlaps those misses with the current send.
// On x86 that is PREFETCHW (AMD since K8, Intel since Broadwell, a NOP before), which the
// baseline target does not enable: the builtin would read the lines in shared state and the
// stores would still wait for ownership.
inline void prefetch_line_for_write(const char* p) {
#if defined(__x86_64__) && defined(__GNUC__)
  asm volatile("prefetchw %0" : : "m"(*p));
#else
  __builtin_prefetch(p, 1);
#endif
}

inline void prefetch_for_write(const void* block, size_t size) {
  const char* p = static_cast<const char*>(block);
  for (size_t off = 0; off < size; off += 64) prefetch_line_for_write(p + off);
  prefetch_line_for_write(p + size - 1);
}

class EnvelopePool {
 public:
  EnvelopePool() {
    pool_state = PoolState::kAlive;
    free_.reserve(kEnvelopePoolCap);
  }
  ~EnvelopePool() {
    pool_state = PoolState::kGone;
    for (void* p : free_) ::operator delete(p);
  }
  void* get(size_t size, size_t block_size) {
    if (size == block_size) {
      if (free_.empty()) {
        Batch batch;
        if (depot().take(batch)) {
          free_.insert(free_.end(), batch.begin(), batch.end());
          cold_end_ = free_.size();
        }
      }
      if (!free_.empty()) {
        void* p = free_.back();
        free_.pop_back();
        // Only blocks from the depot are cold; one this thread freed is still in its cache.
        cold_end_ = std::min(cold_end_, free_.size());
        if (cold_end_ > 0) prefetch_for_write(free_.back(), block_size);
        return p;
      }
    }
    return ::operator new(size);
  }
  void put(void* p, size_t size, size_t block_size) {
    if (size != block_size) {
      ::operator delete(p);
      return;
    }
    if (free_.size() >= kEnvelopePoolCap) spill();
    free_.push_back(p);
  }

 private:
  // The newest kEnvelopeBatch blocks go to the depot (or, when it is full, to the allocator).
  // A thread reaches the cap only by freeing more than it makes (a receiver of another thread's
  // sends), so the blocks it spills are for other threads anyway; taking them off the end costs
  // a copy of the batch, where taking the oldest moved the whole list down (~30 KB a spill).
  void spill() {
    Batch batch(free_.end() - kEnvelopeBatch, free_.end());
    free_.resize(free_.size() - kEnvelopeBatch);
    cold_end_ = std::min(cold_end_, free_.size());
    if (!depot().put(batch)) {
      for (void* q : batch) ::operator delete(q);
    }
  }

  std::vector<void*> free_;
  // free_[0, cold_end_) came from the depot (freed by another thread) and was not handed out
  // since; blocks this thread frees go above it.
  size_t cold_end_ = 0;
};

EnvelopePool& pool() {
  thread_local EnvelopePool p;
  return p;
}

}  // namespace

void* envelope_alloc(size_t size, size_t block_size) { return pool().get(size, block_size); }

void envelope_free(void* p, size_t size, size_t block_size) noexcept {
  if (pool_state == PoolState::kGone) {
    ::operator delete(p);
    return;
  }
  pool().put(p, size, block_size);  // made here on a thread that frees before it allocates
}

}  // namespace postal::runtime::internal
