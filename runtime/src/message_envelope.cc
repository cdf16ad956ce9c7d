#include "postal/runtime/message_envelope.h"

#include <cstdlib>
#include <vector>

#include "postal/runtime/mailbox_sender.h"

namespace postal::runtime {
namespace {

// A per-thread free list of envelope blocks. Blocks freed on another thread join that thread's
// list; each list is capped so memory returns to malloc past the cap.
// Trivially destructible, so it stays readable after the pool itself is gone: an envelope freed
// during thread or process exit (after thread_locals are destroyed) goes straight to malloc.
thread_local bool pool_alive = false;

class EnvelopePool {
 public:
  static constexpr size_t kCap = 4096;
  EnvelopePool() { pool_alive = true; }
  ~EnvelopePool() {
    pool_alive = false;
    for (void* p : free_) ::operator delete(p);
  }
  void* get(size_t size) {
    if (size == sizeof(MessageEnvelope) && !free_.empty()) {
      void* p = free_.back();
      free_.pop_back();
      return p;
    }
    return ::operator new(size);
  }
  void put(void* p, size_t size) {
    if (size == sizeof(MessageEnvelope) && free_.size() < kCap) {
      free_.push_back(p);
      return;
    }
    ::operator delete(p);
  }

 private:
  std::vector<void*> free_;
};

EnvelopePool& pool() {
  thread_local EnvelopePool p;
  return p;
}

}  // namespace

void* MessageEnvelope::operator new(size_t size) { return pool().get(size); }

void MessageEnvelope::operator delete(void* p, size_t size) noexcept {
  if (pool_alive) {
    pool().put(p, size);
  } else {
    ::operator delete(p);
  }
}

void MessageEnvelope::undeliverable(EnvelopePtr env, DeliveryFailure failure, ReturnHandle& ret) {
  // docs/wire.md §9.7: a payload still streaming through a gateway goes back upstream (a
  // CANCEL with this failure), where the whole payload is, and is returned from there; once
  // the upstream handed it over whole it returns from here, emptied (its bytes never were).
  if (const std::shared_ptr<wire::ByteStream>& stream = env->data().stream()) {
    if (stream->hand_back(static_cast<uint8_t>(failure.transport), failure.detail)) return;
    env->data() = wire::Any::from_bytes(env->data().type_hash(), std::string());
  }
  env->add_failure(std::move(failure));  // R-FAIL-3: record before trying to return
  // R-FAIL-3: an Undeliverable is never bounced again.
  bool is_return = env->data().type_hash() == wire::type_hash<UndeliverableEnvelope>();
  if (!env->return_undeliverable() || is_return) {
    ret.drop(std::move(env), is_return ? DropCause::kReturnFailed : DropCause::kReturnDisabled);
    return;
  }
  ret.return_envelope(std::move(env));
}

std::string_view to_string(DropCause cause) {
  switch (cause) {
    case DropCause::kReturnDisabled:
      return "return_undeliverable is false";
    case DropCause::kReturnFailed:
      return "the undeliverable return itself failed";
    case DropCause::kNoReturnPath:
      return "no return path";
  }
  return "unknown";
}

void NoRouteSender::post_unchecked(EnvelopePtr env, ReturnHandle& ret) {
  std::string target = env->next_hop().to_string();
  MessageEnvelope::undeliverable(
      std::move(env),
      DeliveryFailure::transport_failure(std::move(target), TransportReason::kNoRoute,
                                         "this proc has no forwarder for other procs"),
      ret);
}

}  // namespace postal::runtime
