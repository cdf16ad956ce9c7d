// ByteStream: the bytes of a payload that are still arriving (docs/wire.md §9.7).
//
// A gateway forwards a large payload's chunks as they arrive instead of reassembling it: the
// envelope it routes carries an Any whose bytes are a ByteStream of a known total size. Only a
// channel client that can forward chunks takes such an envelope (runtime::MailboxSender::
// accepts_stream); nothing decodes it. The routing layer implements it (payload_stream.h).
#pragma once

#include <cstdint>

namespace postal::wire {

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // The payload's total size, as its first frame announced.
  virtual uint64_t size() const = 0;
};

}  // namespace postal::wire
