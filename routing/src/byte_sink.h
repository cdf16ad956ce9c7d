// byte_sink.h — where a stream connection's outgoing bytes go when they do not go into its socket
// (routing internal). A nats:// connection (nats_tunnel.h) writes straight into NATS messages on
// the writing thread, while its socket still brings the peer's bytes in: no thread sits between
// a worker's write and the NATS server.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <functional>
#include <memory>

#include "absl/status/statusor.h"

namespace postal::routing::internal {

class ByteSink {
 public:
  virtual ~ByteSink() = default;  // the connection ends: the peer sees it closed

  // Takes what it can of the `count` buffers now, never blocking: the bytes taken (0 when the
  // sink is full: wait for `when_writable`), or -1 with errno set (EPIPE) when the connection is
  // gone. One writer at a time.
  virtual ssize_t writev(const iovec* iov, int count) = 0;
  // `ready` runs once, on any thread (the caller's included, when the sink has room already),
  // when writev may take bytes again or the connection is gone. A later call replaces it.
  virtual void when_writable(std::function<void()> ready) = 0;
  // Why the connection ended, as an errno (ECONNREFUSED: the peer refused it or nobody serves
  // it); 0 while it lasts or when nothing more is known. For a reader that found the stream's end.
  virtual int ended_by() const = 0;
};

// A connection whose writes go to `sink` and whose reads come from `fd` (a socket this side owns).
struct SinkLink {
  int fd = -1;
  std::shared_ptr<ByteSink> sink;
};
// Makes a new connection of a channel client, without blocking (the peer may still refuse it:
// the client then reads the end of the stream, as from a refused socket).
using SinkDialer = std::function<absl::StatusOr<SinkLink>()>;
// Hands a connection a peer opened to a channel server (any thread).
using SinkAdopter = std::function<void(SinkLink)>;

}  // namespace postal::routing::internal
