// ChannelServer: the receiving end of a channel — takes envelopes from ChannelClients and posts
// them to a local sender (`deliver_to`, usually the proc's gateway).
//
// `serve` picks the transport by the address:
//   tcp://host:port     listens on host:port; port 0 picks a free port (`local_addr()` has it).
//   ipc:///path         a Unix socket file; a stale socket file (nobody listening) is removed
//                       first, and the file is removed again when the server is destroyed.
//   ipc://@name         a Linux abstract-namespace socket (no file).
//   inproc://N          registers N in the process-wide inproc table (inproc://0 picks a free
//                       number); clients in this process post straight to `deliver_to`.
//
// Protocol (ipc and tcp; docs/wire-v1.md): per connection the client says HELLO{version, session,
// first_unacked_seq}. A known session gets WELCOME{next_expected} and continues its numbering; an
// unknown one is accepted when it starts at 0, else REJECTed ("this server restarted; redial");
// another wire version is REJECTed with a message naming both. R-CHAN-1: DATA with seq == next
// is decoded and posted (`deliver_to.post(env, ret)`, which applies the TTL rule), seq < next is
// a retransmit and dropped, seq > next is a protocol error. After each batch of frames read the
// server sends one cumulative ACK{next}: every seq below was enqueued here. Sessions are kept
// for the server's life, so a client that reconnects continues where it was.
//
// Failure: `serve` returns Unavailable naming the address and the OS error when it cannot listen
// (address in use, no permission, missing directory), FailedPrecondition when an ipc path exists
// and is not a socket or another process listens there, AlreadyExists for a taken inproc number.
// A connection that breaks the protocol (undecodable frame or envelope, a frame over
// max_frame_bytes, a seq gap) is logged and closed; the server carries on and the client
// retransmits on its next connection.
//
// Bounds (R-FLOW-4, ChannelOptions): a connection that sends no valid HELLO within
// handshake_timeout, or stalls inside a frame for partial_frame_timeout, is closed; past
// max_connections a new connection is accepted and closed at once; past max_partial_frame_bytes
// (across the listener) the connection holding the largest partial frame is closed. Receive
// buffers start at 4 KiB and grow by doubling as reads fill them, up to 64 KiB; a frame's
// buffer grows with its bytes, never to its announced length. When the process is out of file
// descriptors (EMFILE/ENFILE) the listener closes the pending connections at once through a
// reserved descriptor, logs (rate-limited), and waits for the next connection: it neither dies
// nor spins, and serves again when descriptors free up. These closes are logged rate-limited and
// counted in `stats()`.
//
// Authentication (R-SEC-1, docs/wire.md §4.5, docs/security.md): with ChannelOptions::key the
// server answers a HELLO with CHALLENGE and decodes nothing else — no session, no envelope —
// until the client's AUTH proves the key; a HELLO without authentication gets REJECT
// auth_required, a wrong AUTH REJECT auth_failed (both counted in `stats()` and logged
// rate-limited). On unix sockets (ipc://, abstract ones included) it checks the peer's uid with
// SO_PEERCRED on accept and closes a uid not in ChannelOptions::allowed_uids (default: its own)
// before reading a byte (`stats().refused_peer_uid`). Without a key it is unauthenticated, as
// before, and logs that once per process.
//
// Thread safety: all socket work runs on the IoThread; `deliver_to` is called from it (inproc:
// from the posting thread). `deliver_to` and `ret` must outlive the server, and the server must
// be destroyed before its IoThread. Destruction stops listening and processing frames, then says
// GOODBYE `server_stopping` on every connection that is up, with its session's final ACK, so its
// clients return what is pending at once instead of waiting for delivery_timeout (R-CHAN-2,
// docs/wire.md §11); it waits (at most 2 s) for those clients to hang up, and closes the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "postal/routing/channel.h"
#include "postal/runtime/location.h"
#include "postal/runtime/mailbox_sender.h"

namespace postal::routing {

class ChannelServer {
 public:
  static absl::StatusOr<std::unique_ptr<ChannelServer>> serve(IoThread& io,
                                                              runtime::ChannelAddr addr,
                                                              runtime::MailboxSender& deliver_to,
                                                              runtime::ReturnHandle& ret,
                                                              ChannelOptions options = {});

  ChannelServer(const ChannelServer&) = delete;
  ChannelServer& operator=(const ChannelServer&) = delete;
  virtual ~ChannelServer() = default;

  // The address clients dial: the bound port for tcp port 0, the number for inproc://0.
  virtual const runtime::ChannelAddr& local_addr() const = 0;

  // What the listener holds and what its bounds refused (R-FLOW-4); all zero for inproc.
  struct Stats {
    size_t connections = 0;               // open now
    uint64_t connections_accepted = 0;    // since the server started (those refused included)
    size_t partial_frame_bytes = 0;       // bytes held in incomplete frames now
    size_t partial_frame_bytes_peak = 0;  // the most held at once (after enforcing the bound)
    uint64_t refused_over_cap = 0;        // accepted and closed at once: max_connections
    uint64_t closed_handshake_timeout = 0;
    uint64_t closed_partial_frame_timeout = 0;
    uint64_t closed_over_partial_bytes = 0;  // max_partial_frame_bytes
    uint64_t out_of_fds = 0;                 // accepts that failed with EMFILE/ENFILE
    uint64_t shed_out_of_fds = 0;            // pending connections closed while out of fds
    size_t sessions = 0;                     // sessions remembered now (§5)
    uint64_t sessions_forgotten = 0;         // by session_linger or max_sessions
    // Heartbeats (R-FLOW-4): connections closed for silence past heartbeat_timeout.
    uint64_t closed_heartbeat_timeout = 0;
    // R-SEC-1: handshakes refused for authentication, and ipc peers of another uid.
    uint64_t refused_unauthenticated = 0;  // a HELLO without auth (server has a key): auth_required
    uint64_t auth_failed = 0;              // an AUTH whose MAC did not verify: auth_failed
    uint64_t refused_peer_uid = 0;         // SO_PEERCRED: a uid not in allowed_uids
    // R-FLOW-2, credit (docs/wire.md §10.1): CREDIT `paused` and `open` entries sent.
    uint64_t credit_pauses = 0;
    uint64_t credit_opens = 0;
    // R-SEC-1, TLS on tcp: connections closed for TLS (a failed handshake — a peer without the
    // key —, a record that failed its integrity check, an alert, a ClientHello to a server
    // without TLS), and plaintext HELLOs refused where TLS is required (REJECT auth_required).
    uint64_t tls_failed = 0;
    uint64_t refused_plaintext = 0;
  };
  // Any thread; each field is read on its own (not one snapshot).
  virtual Stats stats() const { return {}; }

  // Test hook: closes every accepted connection now (as a network failure would), keeping the
  // session memory, so clients reconnect and retransmit (R-CHAN-2). No-op for inproc.
  virtual void drop_connections() = 0;
  // Test hook: stops the way a killed process would — the listener and every connection close
  // without GOODBYE, the sessions are gone — so clients see a lost connection and reconnect
  // (R-CHAN-2), unlike a destruction, which says GOODBYE `server_stopping`. The object is then
  // only to be destroyed. No-op for inproc.
  virtual void vanish() {}

 protected:
  ChannelServer() = default;
};

}  // namespace postal::routing
