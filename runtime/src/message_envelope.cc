#include "postal/runtime/message_envelope.h"

#include "envelope_pool.h"
#include "postal/runtime/mailbox_sender.h"

namespace postal::runtime {

// A local message's cost is mostly its envelope's cache lines (a backlog of a million is a
// million envelopes): 224 bytes since the uids, headers, failures and Any's rare fields shrank
// (304 before; docs/decisions.md, "A smaller envelope").
static_assert(sizeof(MessageEnvelope) <= 224, "keep the envelope within 224 bytes");

void* MessageEnvelope::operator new(size_t size) {
  return internal::envelope_alloc(size, sizeof(MessageEnvelope));
}

void MessageEnvelope::operator delete(void* p, size_t size) noexcept {
  internal::envelope_free(p, size, sizeof(MessageEnvelope));
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
