// InjectQueue: the scheduler's shared queue of runnables made runnable off the workers
// (runtime internal).
//
// Producers are any threads (a Client's thread, the I/O thread, a timer, a worker spilling its
// full local queue); consumers are the workers. A push is one atomic exchange plus one store and
// never blocks, allocates or takes a lock, so a thread outside the workers that makes an actor
// runnable on every send (Fork-Join throughput's main thread) pays no mutex.
//
// Vyukov's intrusive MPSC queue (the design of mpsc_queue.h), with the link in the node
// (`InjectLink`, a base of `Schedulable`): a node is in at most one queue at a time, which the
// scheduler's "one outstanding schedule per Schedulable" already guarantees. Several workers
// consume, so `try_pop` is guarded by a consumer flag taken with one exchange: a worker that finds
// it taken returns nullptr at once (another worker is popping) and looks again later;
// `maybe_nonempty()` stays true while anything is queued, so an idle worker neither sleeps nor
// stops spinning in the meantime.
//
// Guarantees: every pushed node is popped exactly once (none lost, none twice); per producer,
// nodes come out in the order it pushed them. `try_pop` may briefly return nullptr while a
// producer is between its exchange and its link store, or while another worker pops; in both
// cases `maybe_nonempty()` is true.
#pragma once

#include <atomic>
#include <cstddef>

namespace postal::runtime {

// The link an InjectQueue threads through its nodes.
class InjectLink {
 public:
  InjectLink() = default;
  InjectLink(const InjectLink&) = delete;
  InjectLink& operator=(const InjectLink&) = delete;

 private:
  friend class InjectQueue;
  std::atomic<InjectLink*> inject_next_{nullptr};
};

class InjectQueue {
 public:
  InjectQueue() : head_(&stub_), tail_(&stub_) {}
  InjectQueue(const InjectQueue&) = delete;
  InjectQueue& operator=(const InjectQueue&) = delete;

  // Any thread.
  void push(InjectLink* n) { push_node(n); }

  // Any thread; nullptr when empty, mid-push, or another consumer is popping (see above).
  InjectLink* try_pop() {
    if (!maybe_nonempty()) return nullptr;
    if (popping_.exchange(true, std::memory_order_acquire)) return nullptr;
    InjectLink* n = pop_locked();
    popping_.store(false, std::memory_order_release);
    return n;
  }

  // Any thread: false means nothing is queued (or a push has not begun its exchange).
  bool maybe_nonempty() const {
    return head_.load(std::memory_order_seq_cst) != &stub_ ||
           tail_.load(std::memory_order_seq_cst) != &stub_ ||
           stub_.inject_next_.load(std::memory_order_seq_cst) != nullptr;
  }

 private:
  void push_node(InjectLink* n) {
    n->inject_next_.store(nullptr, std::memory_order_relaxed);
    InjectLink* prev = head_.exchange(n, std::memory_order_seq_cst);
    prev->inject_next_.store(n, std::memory_order_release);
  }

  // Holding `popping_`: the single consumer of Vyukov's queue.
  InjectLink* pop_locked() {
    InjectLink* tail = tail_.load(std::memory_order_relaxed);
    InjectLink* next = tail->inject_next_.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (next == nullptr) return nullptr;
      tail_.store(next, std::memory_order_release);
      tail = next;
      next = next->inject_next_.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      tail_.store(next, std::memory_order_release);
      return tail;
    }
    if (tail != head_.load(std::memory_order_acquire)) return nullptr;  // producer mid-push
    push_node(&stub_);
    next = tail->inject_next_.load(std::memory_order_acquire);
    if (next != nullptr) {
      tail_.store(next, std::memory_order_release);
      return tail;
    }
    return nullptr;
  }

  alignas(64) std::atomic<InjectLink*> head_;  // producers' end
  alignas(64) std::atomic<InjectLink*> tail_;  // the consumer's end
  std::atomic<bool> popping_{false};
  InjectLink stub_;
};

}  // namespace postal::runtime
