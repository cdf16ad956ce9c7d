// MpscQueue: an intrusive multi-producer single-consumer queue of envelopes (runtime internal).
//
// Vyukov's design: `push` is one atomic exchange and never blocks or allocates; `pop` belongs to
// the single consumer (the actor's runner). `pop` can briefly return nullptr while a producer is
// between its exchange and its link store; `maybe_nonempty()` tells the consumer to look again.
// The queue is three pointers, so an idle actor pays 24 bytes for it.
#pragma once

#include <atomic>

#include "postal/runtime/message_envelope.h"

namespace postal::runtime {

class MpscQueue {
 public:
  MpscQueue() : head_(&stub_), tail_(&stub_) {}
  ~MpscQueue() {
    while (MessageEnvelope* e = pop()) delete e;
  }
  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;

  void push(MessageEnvelope* e) { push_node(e); }

  // Consumer only.
  MessageEnvelope* pop() {
    QueueNode* tail = tail_;
    QueueNode* next = tail->next_.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (next == nullptr) return nullptr;
      tail_ = next;
      tail = next;
      next = next->next_.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      tail_ = next;
      // The next pop reads `next`'s link: a backlog's envelopes are cold by the time their
      // actor gets to them, so start the load now, while this one is handled.
      __builtin_prefetch(next);
      return static_cast<MessageEnvelope*>(tail);
    }
    if (tail != head_.load(std::memory_order_acquire)) return nullptr;  // producer mid-push
    push_node(&stub_);
    next = tail->next_.load(std::memory_order_acquire);
    if (next != nullptr) {
      tail_ = next;
      return static_cast<MessageEnvelope*>(tail);
    }
    return nullptr;
  }

  // Consumer only: false means certainly empty.
  bool maybe_nonempty() const {
    // seq_cst: pairs with push's exchange (a consumer that stores "idle" and then looks here
    // sees a push that did not see the store; ActorCell::wake/release).
    return tail_ != &stub_ || head_.load(std::memory_order_seq_cst) != &stub_ ||
           stub_.next_.load(std::memory_order_acquire) != nullptr;
  }

 private:
  void push_node(QueueNode* n) {
    n->next_.store(nullptr, std::memory_order_relaxed);
    QueueNode* prev = head_.exchange(n, std::memory_order_seq_cst);
    prev->next_.store(n, std::memory_order_release);
  }

  std::atomic<QueueNode*> head_;
  QueueNode* tail_;
  QueueNode stub_;
};

}  // namespace postal::runtime
