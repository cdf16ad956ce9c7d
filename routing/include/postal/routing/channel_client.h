// ChannelClient: the sending end of a channel — a MailboxSender to one channel address.
//
// `dial` picks the transport by the address:
//   ipc:// and tcp://   a socket to a ChannelServer speaking wire version 2 (docs/wire.md).
//                       Payloads are serialized here, once (R-ENV-4); the IoThread sequences
//                       and encodes envelopes as DATA frames (a binary envelope whose addresses
//                       are refs into a per-session dictionary) and writes them in batches.
//   inproc://N          the ChannelServer registered as N in this process: envelopes are posted
//                       straight to its `deliver_to`, never serialized (R-ENV-4).
//
// Guarantees (ipc and tcp)
//   R-CHAN-4  One ordered stream: envelopes leave in the order `post_unchecked` was called, so
//             one sender's messages arrive in send order.
//   R-CHAN-1  Every envelope is kept until the server acks it; an ack means "enqueued at the
//             receiving proc". Acks are cumulative.
//   R-CHAN-2  On a lost connection the client reconnects with backoff (reconnect_initial doubling
//             to reconnect_max) and, after the HELLO/WELCOME handshake, retransmits every frame
//             the server did not ack; the server drops the duplicates. It reconnects only while
//             something is pending. When the server lost the session (it restarted: a session
//             REJECT) the client resumes on a new session: envelopes written to the old one and
//             not acked return Transport(ChannelClosed) with the server's reason (they may or
//             may not have been delivered: at most once), the never-written ones go out on the
//             new session in order, and the channel stays open. A reconnect with nothing
//             written unacked starts a new session right away; one with something written
//             unacked resumes (HELLO `resuming`), so a restarted server can never deliver a
//             retransmitted frame twice (docs/wire.md §4.2). A server's GOODBYE
//             `server_stopping` returns every pending envelope at once and closes the channel.
//   R-CHAN-3  An envelope whose frame exceeds max_frame_bytes fails alone, at once, with
//             Transport(OversizedFrame{len, max}); the channel carries on.
//
// Failure
//   `dial` connects synchronously (blocking the caller for at most delivery_timeout). An address
//   that refuses or cannot be reached fails with Unavailable naming the address and the OS
//   error, e.g. "dial ipc:///tmp/x.sock: connection refused (ECONNREFUSED)"; an unregistered
//   inproc number fails with Unavailable too. The caller turns it into Transport(DialFailed).
//   `dial_async` (R-FLOW-3) never blocks: it returns a client at once and resolves, connects and
//   handshakes on the IoThread. Posts wait in a bounded queue (max_dial_queue, _bytes; past it
//   a post fails at once with DialFailed) and go out when the handshake completes. When the
//   first connect fails or takes longer than dial_timeout (once connected, losses reconnect), the client closes and every queued
//   envelope returns Transport(DialFailed) naming the address and the OS error; a dial router
//   then evicts it and the next post dials again. Only an address that cannot be a socket
//   (e.g. an abstract name too long) fails synchronously.
//   The channel *closes* when nothing was acked for delivery_timeout while envelopes were pending
//   (every pending envelope returns Transport(AckTimedOut)), when the server REJECTs it for
//   another wire version (or REJECTs even a brand-new session: pending envelopes return
//   Transport(ChannelClosed) and `rejected()` is true), when `close()` is called or the client
//   destroyed (ChannelClosed). A restarted server's session REJECT does not close it (above).
//   After that every post fails at once with ChannelClosed; a dial router evicts a closed client
//   and dials again (R-ROUTE-3). `status()` says why it closed.
//
// Authentication (R-SEC-1, docs/wire.md §4.5): with ChannelOptions::key the client sends HELLO
// auth_mode 1, checks the server's CHALLENGE proof before it sends its own AUTH, and never falls
// back to an unauthenticated handshake. A server that cannot prove the key, or REJECTs
// (auth_required, auth_failed, auth_unsupported), closes the channel for good: pending
// envelopes return ChannelClosed, `rejected()` is true, `status()` says why.
//
// Envelopes that fail asynchronously go to the `returns` handle given to `dial`; envelopes that
// fail inside `post_unchecked` go to the handle passed with them. Failure targets are the
// envelope's next hop; the detail names the channel address. `returns` must outlive the client,
// and the client must be destroyed before its IoThread.
//
// Thread safety: `post_unchecked` may be called from any thread; it never blocks on the network.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "postal/routing/channel.h"
#include "postal/runtime/location.h"
#include "postal/runtime/mailbox_sender.h"

namespace postal::routing {

class ChannelClient : public runtime::MailboxSender {
 public:
  static absl::StatusOr<std::unique_ptr<ChannelClient>> dial(IoThread& io,
                                                             runtime::ChannelAddr addr,
                                                             runtime::ReturnHandle& returns,
                                                             ChannelOptions options = {});
  // R-FLOW-3: the same client, connected in the background (see Failure above).
  static absl::StatusOr<std::unique_ptr<ChannelClient>> dial_async(IoThread& io,
                                                                   runtime::ChannelAddr addr,
                                                                   runtime::ReturnHandle& returns,
                                                                   ChannelOptions options = {});

  ChannelClient(const ChannelClient&) = delete;
  ChannelClient& operator=(const ChannelClient&) = delete;
  ~ChannelClient() override = default;

  // The address this client was dialed to.
  const runtime::ChannelAddr& addr() const { return addr_; }

  // Whether the channel is closed (timed out, rejected, closed, or its inproc server is gone):
  // every post now fails with ChannelClosed.
  virtual bool closed() const = 0;
  // Whether the server rejected the channel for good (another wire version); a restarted
  // server's session REJECT resumes on a new session instead and leaves this false.
  virtual bool rejected() const = 0;
  // OK while open; otherwise why the channel closed (FailedPrecondition for a REJECT, with the
  // server's reason; DeadlineExceeded for an ack timeout; Cancelled after close()).
  virtual absl::Status status() const = 0;
  // Envelopes posted and not yet acked (always 0 for inproc, which delivers synchronously).
  virtual size_t unacked() const = 0;
  // Closes the channel now; pending envelopes return ChannelClosed. Idempotent.
  virtual void close() = 0;

  // ---- Liveness (R-FLOW-4 heartbeats; what R-SUP-4's remote watches build on) ----
  struct Liveness {
    bool heartbeat = false;  // the current (or last) session has the `heartbeat` feature
    bool peer_dead = false;  // declared dead, and no WELCOME since (it reconnects meanwhile)
    uint64_t deaths = 0;     // how often the peer was declared dead
  };
  // Any thread. inproc: never dead (the server is in this process).
  virtual Liveness liveness() const { return {}; }

  // ---- Credit (R-FLOW-2, docs/wire.md §10.1) ----
  // Any thread: destination actors the server has paused on this connection now (their
  // envelopes are held here), and the envelopes held for them. inproc: never paused.
  struct Credit {
    size_t paused = 0;
    size_t held = 0;
  };
  virtual Credit credit() const { return {}; }

 protected:
  explicit ChannelClient(runtime::ChannelAddr addr) : addr_(std::move(addr)) {}

 private:
  runtime::ChannelAddr addr_;
};

}  // namespace postal::routing
