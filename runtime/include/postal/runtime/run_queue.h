// RunQueue: a worker's bounded FIFO of runnables (runtime internal).
//
// One producer (the owning worker) pushes at the tail; the owner and thieves pop at the head with
// a CAS, so popping is FIFO for everyone and a busy actor cannot starve older runnables. Full →
// push returns false and the caller spills into the scheduler's inject queue. Indices are 64-bit
// and only grow, so there is no ABA.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace postal::runtime {

class Schedulable;

class RunQueue {
 public:
  static constexpr uint64_t kCapacity = 4096;

  bool push(Schedulable* s) {
    uint64_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_.load(std::memory_order_acquire) >= kCapacity) return false;
    slots_[t & (kCapacity - 1)].store(s, std::memory_order_relaxed);
    tail_.store(t + 1, std::memory_order_seq_cst);
    return true;
  }

  Schedulable* pop() {
    uint64_t h = head_.load(std::memory_order_acquire);
    for (;;) {
      if (h == tail_.load(std::memory_order_acquire)) return nullptr;
      Schedulable* s = slots_[h & (kCapacity - 1)].load(std::memory_order_relaxed);
      if (head_.compare_exchange_weak(h, h + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        return s;
      }
    }
  }

  bool empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_seq_cst);
  }

 private:
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
  std::array<std::atomic<Schedulable*>, kCapacity> slots_{};
};

}  // namespace postal::runtime
