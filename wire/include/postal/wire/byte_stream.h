// ByteStream: the bytes of a payload that are still arriving (docs/wire.md §9.7).
//
// A gateway forwards a large payload's chunks as they arrive instead of reassembling it: the
// envelope it routes carries an Any whose bytes are a ByteStream of a known total size. Only a
// channel client that can forward chunks takes such an envelope (runtime::MailboxSender::
// accepts_stream); nothing decodes it. The routing layer implements it (payload_stream.h).
#pragma once

#include <cstdint>
#include <string_view>

namespace postal::wire {

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // The payload's total size, as its first frame announced.
  virtual uint64_t size() const = 0;
  // The envelope carrying these bytes failed here before they all passed, with a transport
  // `reason` (runtime::TransportReason) and `detail`. True when the upstream, which still holds
  // the whole payload, is told and returns the envelope itself — then the envelope here is
  // dropped, not returned; false when it must be returned from here (its payload emptied).
  virtual bool hand_back(uint8_t reason, std::string_view detail) {
    (void)reason;
    (void)detail;
    return false;
  }
};

}  // namespace postal::wire
