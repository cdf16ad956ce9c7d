#include "envelope_pool.h"

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
    return true;
  }
  // Swaps a full batch into `into` (empty); false when there is none.
  bool take(Batch& into) {
    absl::MutexLock lock(&mu_);
    if (batches_.empty()) return false;
    into.swap(batches_.back());
    batches_.pop_back();
    return true;
  }

 private:
  absl::Mutex mu_;
  std::vector<Batch> batches_ ABSL_GUARDED_BY(mu_);
};

Depot& depot() {
  static Depot* d = new Depot();  // never destroyed: frees at exit may still reach it
  return *d;
}

// The thread's pool: not made yet (a thread that has only freed so far), alive, or destroyed
// (thread exit). Trivially destructible, so it stays readable after the pool is gone.
enum class PoolState : unsigned char { kNotYet, kAlive, kGone };
thread_local PoolState pool_state = PoolState::kNotYet;

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
        }
      }
      if (!free_.empty()) {
        void* p = free_.back();
        free_.pop_back();
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
  // The oldest kEnvelopeBatch blocks go to the depot (or, when it is full, to the allocator).
  void spill() {
    Batch batch(free_.begin(), free_.begin() + kEnvelopeBatch);
    free_.erase(free_.begin(), free_.begin() + kEnvelopeBatch);
    if (!depot().put(batch)) {
      for (void* q : batch) ::operator delete(q);
    }
  }

  std::vector<void*> free_;
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
