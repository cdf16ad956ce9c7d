// MessageEnvelope: one message in flight (R-ENV-1…4).
//
// An envelope carries the sender actor, the destination port (never changed in flight), the next
// hop (stored empty while it equals the destination), the payload as a wire::Any, headers, a TTL,
// the `return_undeliverable` flag, and the DeliveryFailures it accumulated on the way.
//
// Envelopes are owned through `EnvelopePtr` and allocated from a per-thread pool. They link into
// intrusive queues through `next_`, so enqueueing never allocates.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "postal/runtime/address.h"
#include "postal/runtime/delivery_failure.h"
#include "postal/wire/any.h"
#include "postal/wire/headers.h"

namespace postal::runtime {

class ReturnHandle;

inline constexpr uint8_t kDefaultTtl = 64;  // R-ENV-2

class MessageEnvelope;
using EnvelopePtr = std::unique_ptr<MessageEnvelope>;

// Intrusive link for the actor queues (runtime internal; see mpsc_queue.h).
struct QueueNode {
  std::atomic<QueueNode*> next_{nullptr};
};

class MessageEnvelope : public QueueNode {
 public:
  MessageEnvelope() = default;
  MessageEnvelope(ActorAddr sender, PortAddr dest, wire::Any data, uint8_t ttl = kDefaultTtl)
      : sender_(std::move(sender)), dest_(std::move(dest)), data_(std::move(data)), ttl_(ttl) {}

  static EnvelopePtr make(ActorAddr sender, PortAddr dest, wire::Any data,
                          uint8_t ttl = kDefaultTtl) {
    return std::make_unique<MessageEnvelope>(std::move(sender), std::move(dest), std::move(data),
                                             ttl);
  }

  const ActorAddr& sender() const { return sender_; }
  const PortAddr& dest() const { return dest_; }
  // R-ENV-1: defaults to dest.
  const PortAddr& next_hop() const { return next_hop_ ? *next_hop_ : dest_; }
  void set_next_hop(PortAddr hop) {
    if (hop == dest_) {
      next_hop_.reset();
    } else {
      next_hop_ = std::make_unique<PortAddr>(std::move(hop));
    }
  }
  bool has_explicit_next_hop() const { return next_hop_ != nullptr; }

  wire::Any& data() { return data_; }
  const wire::Any& data() const { return data_; }
  wire::Headers& headers() { return headers_; }
  const wire::Headers& headers() const { return headers_; }

  uint8_t ttl() const { return ttl_; }
  void set_ttl(uint8_t ttl) { ttl_ = ttl; }
  bool return_undeliverable() const { return return_undeliverable_; }
  void set_return_undeliverable(bool v) { return_undeliverable_ = v; }
  // R-FLOW-1, R-FLOW-2 (runtime internal, never serialized): the bytes the bounded queue that
  // holds this envelope counted for it (a mailbox, a channel client), so that it releases the
  // same amount whatever happens to the payload meanwhile.
  uint32_t held_bytes() const { return held_bytes_; }
  void set_held_bytes(uint64_t n) {
    held_bytes_ = n > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(n);
  }

  const std::vector<DeliveryFailure>& delivery_failures() const {
    static const std::vector<DeliveryFailure> none;
    return failures_ ? *failures_ : none;
  }
  // R-FAIL-2: the first failure recorded; policy reads this one.
  const DeliveryFailure* root_failure() const {
    return failures_ && !failures_->empty() ? &failures_->front() : nullptr;
  }
  void add_failure(DeliveryFailure f) {
    if (!failures_) failures_ = std::make_unique<std::vector<DeliveryFailure>>();
    failures_->push_back(std::move(f));
  }

  // R-FAIL-3: records `failure` first, then returns the envelope through `ret` (or drops it when
  // `return_undeliverable` is false). Never throws; a failing return is the handle's to count.
  static void undeliverable(EnvelopePtr env, DeliveryFailure failure, ReturnHandle& ret);

  // Pool-backed allocation (a per-thread free list of envelope-sized blocks).
  static void* operator new(size_t size);
  static void operator delete(void* p, size_t size) noexcept;

  // The next hop is an optional on the wire, as it always was (see `next_hop_`).
  template <class Archive>
  void save(Archive& ar) const {
    std::optional<PortAddr> hop;
    if (next_hop_) hop = *next_hop_;
    ar(sender_, dest_, hop, data_, headers_, ttl_, return_undeliverable_, delivery_failures());
  }
  template <class Archive>
  void load(Archive& ar) {
    std::optional<PortAddr> hop;
    std::vector<DeliveryFailure> failures;
    ar(sender_, dest_, hop, data_, headers_, ttl_, return_undeliverable_, failures);
    next_hop_ = hop ? std::make_unique<PortAddr>(*std::move(hop)) : nullptr;
    failures_ = failures.empty()
                    ? nullptr
                    : std::make_unique<std::vector<DeliveryFailure>>(std::move(failures));
  }

 private:
  ActorAddr sender_;
  PortAddr dest_;
  // Set only on envelopes that cross a gateway, so out of line: inline it was 80 of the
  // envelope's 384 bytes, on every envelope (a backlog's memory, its cache misses).
  std::unique_ptr<PortAddr> next_hop_;
  wire::Any data_;
  wire::Headers headers_;
  uint8_t ttl_ = kDefaultTtl;
  bool return_undeliverable_ = true;  // R-ENV-2
  uint32_t held_bytes_ = 0;           // R-FLOW-1, R-FLOW-2 (fits in the padding)
  // Out of line like the next hop: most envelopes never fail.
  std::unique_ptr<std::vector<DeliveryFailure>> failures_;
};

// The message an undeliverable envelope comes back in (R-FAIL-3): docs/semantics.md's
// `Undeliverable<MessageEnvelope>`, bound on every actor's handler port for its type.
struct UndeliverableEnvelope {
  EnvelopePtr envelope;

  template <class Archive>
  void save(Archive& ar) const {
    ar(*envelope);
  }
  template <class Archive>
  void load(Archive& ar) {
    envelope = std::make_unique<MessageEnvelope>();
    ar(*envelope);
  }
};

}  // namespace postal::runtime

POSTAL_MESSAGE(postal::runtime::UndeliverableEnvelope,
               "postal.Undeliverable<postal.MessageEnvelope>");
