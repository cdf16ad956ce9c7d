// PayloadStream: a transfer's bytes on their way through a gateway (routing internal;
// docs/wire.md §9.7).
//
// A gateway's channel server registers a chunked DATA frame whose next hop is another channel
// (runtime::MailboxSender::accepts_stream) as a *streamed* transfer: it routes the envelope at
// once, its payload an Any::from_stream over a PayloadStream, and appends each CHUNK's bytes to
// the stream as they arrive (the producer). The outbound channel client that takes the envelope
// starts its own transfer of the same size and cuts chunks from what the stream holds (the
// consumer); when the next hop acks bytes, the client releases them, which frees them here and
// lets the server ack as many more upstream (rule 32). So the gateway holds about two transfer
// windows per transfer, never the whole payload.
//
// Either side can give up: the producer `abort`s when the upstream does (ABORT, its session
// forgotten) — the consumer then ABORTs downstream and returns nothing (rule 33); the consumer
// gives up when its envelope fails or is dropped before the next hop holds every byte — the
// producer then CANCELs upstream (rule 31). The envelope holds the stream through a reader
// (`make_reader`): when the last envelope copy is gone, or a return empties its payload
// (MessageEnvelope::undeliverable), the reader gives up for it.
//
// Threads: any; every member takes the stream's lock. The wake callbacks run without it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/synchronization/mutex.h"
#include "postal/wire/any.h"

namespace postal::routing::internal {

class PayloadStream : public std::enable_shared_from_this<PayloadStream> {
 public:
  enum class State {
    kFlowing,    // bytes arrive and leave
    kAborted,    // the upstream gave up before every byte arrived
    kAbandoned,  // the consumer gave up before the next hop held every byte
  };

  explicit PayloadStream(uint64_t size) : size_(size) {}
  ~PayloadStream();
  PayloadStream(const PayloadStream&) = delete;
  PayloadStream& operator=(const PayloadStream&) = delete;

  uint64_t size() const { return size_; }

  // An Any of `type_hash` whose bytes are this stream; see above.
  wire::Any make_reader(uint64_t type_hash);
  // The stream behind an Any made by make_reader; null for any other Any.
  static std::shared_ptr<PayloadStream> of(const wire::Any& any);

  // ---- The producer (the inbound connection) ----
  // Called when released() moves or the consumer gives up.
  void set_producer_wake(std::function<void()> wake);
  // The next bytes, in order; ignored once the stream is no longer flowing.
  void append(std::string_view bytes);
  // The upstream gave up. No effect once every byte arrived.
  void abort();

  // ---- The consumer (the outbound channel client) ----
  // Called when bytes arrive or the producer aborts.
  void set_consumer_wake(std::function<void()> wake);
  // The bytes at [offset, offset + max) that one stored piece holds (maybe fewer); `offset`
  // must be in [released(), end()]. Stays valid until release() passes it.
  std::string_view slice(uint64_t offset, size_t max) const;
  // The next hop holds every byte below `upto`: they are freed; the producer is woken.
  void release(uint64_t upto);
  // The consumer gives up; no effect once every byte was released.
  void give_up();
  // The consumer's envelope failed (`reason`, `detail`): gives up and says whether the upstream
  // will be told and return the envelope itself (false once the producer took every byte over).
  bool hand_back(uint8_t reason, std::string_view detail);
  // The producer took every byte over and acked them upstream: a failure from now on returns
  // from the gateway.
  void taken_whole();
  // Why the consumer gave up (the CANCEL's reason and text); ChannelClosed when unknown.
  uint8_t failure_reason() const;
  std::string failure_detail() const;

  State state() const;
  uint64_t end() const;       // bytes appended
  uint64_t released() const;  // bytes the consumer released
  uint64_t held() const;      // bytes stored now
  uint64_t peak_held() const;

  // Bytes held by every stream of the process now (what a gateway's memory bound is about), and
  // the most held at once since the last reset (for tests and benchmarks).
  static uint64_t held_in_process();
  static uint64_t peak_in_process();
  static void reset_peak_in_process();

 private:
  void wake(std::function<void()> PayloadStream::*which);

  const uint64_t size_;
  mutable absl::Mutex mu_;
  std::deque<std::string> pieces_ ABSL_GUARDED_BY(mu_);  // the bytes from base_ on, in order
  uint64_t base_ ABSL_GUARDED_BY(mu_) = 0;               // the offset of pieces_.front()
  uint64_t end_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t released_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t peak_ ABSL_GUARDED_BY(mu_) = 0;
  State state_ ABSL_GUARDED_BY(mu_) = State::kFlowing;
  bool taken_whole_ ABSL_GUARDED_BY(mu_) = false;
  uint8_t failure_reason_ ABSL_GUARDED_BY(mu_) = 1;  // runtime::TransportReason::kChannelClosed
  std::string failure_detail_ ABSL_GUARDED_BY(mu_) = "the gateway's next hop gave the transfer up";
  std::function<void()> producer_wake_ ABSL_GUARDED_BY(mu_);
  std::function<void()> consumer_wake_ ABSL_GUARDED_BY(mu_);
};

}  // namespace postal::routing::internal
