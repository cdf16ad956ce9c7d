// MpscQueue: an intrusive multi-producer single-consumer queue of envelopes (runtime internal).
//
// Vyukov's design: `push` is one atomic exchange and never blocks or allocates; `pop` belongs to
// the single consumer (the actor's runner). `pop` can briefly return nullptr while a producer is
// between its exchange and its link store; `maybe_nonempty()` tells the consumer to look again.
//
// The queue is split in its two ends, which its owner keeps apart: the producers' end
// (`MpscHead`, the last node, exchanged by every push) and the consumer's (`MpscQueue`: the
// next node to pop, written by every pop, and the stub). On one cache line, a producer and a
// busy consumer pull it from each other on every message (ActorCell keeps them on different
// lines). An idle actor pays 24 bytes for both.
#pragma once

#include <atomic>

#include "postal/runtime/message_envelope.h"

namespace postal::runtime {

// The producers' end: the last node pushed.
struct MpscHead {
  std::atomic<QueueNode*> last{nullptr};
};

// The consumer's end; every call names the head it was made with.
class MpscQueue {
 public:
  explicit MpscQueue(MpscHead& head) : tail_(&stub_) {
    head.last.store(&stub_, std::memory_order_relaxed);
  }
  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;

  // Any thread.
  static void push(MpscHead& head, MessageEnvelope* e) { push_node(head, e); }

  // Consumer only.
  MessageEnvelope* pop(MpscHead& head) {
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
    if (tail != head.last.load(std::memory_order_acquire)) return nullptr;  // producer mid-push
    push_node(head, &stub_);
    next = tail->next_.load(std::memory_order_acquire);
    if (next != nullptr) {
      tail_ = next;
      return static_cast<MessageEnvelope*>(tail);
    }
    return nullptr;
  }

  // Consumer only: false means certainly empty.
  bool maybe_nonempty(const MpscHead& head) const {
    // seq_cst: pairs with push's exchange (a consumer that stores "idle" and then looks here
    // sees a push that did not see the store; ActorCell::wake/release).
    return tail_ != &stub_ || head.last.load(std::memory_order_seq_cst) != &stub_ ||
           stub_.next_.load(std::memory_order_acquire) != nullptr;
  }

  // Consumer only, once no producer is left: frees what is still queued (the owner's destructor).
  void drain(MpscHead& head) {
    while (MessageEnvelope* e = pop(head)) delete e;
  }

 private:
  static void push_node(MpscHead& head, QueueNode* n) {
    n->next_.store(nullptr, std::memory_order_relaxed);
    QueueNode* prev = head.last.exchange(n, std::memory_order_seq_cst);
    prev->next_.store(n, std::memory_order_release);
  }

  QueueNode* tail_;
  QueueNode stub_;
};

}  // namespace postal::runtime
