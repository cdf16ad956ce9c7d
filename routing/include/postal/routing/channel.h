// Channels carry envelopes between procs (R-CHAN-1…4): what every channel shares.
//
//   ChannelOptions  the limits and timings of one client or server.
//   IoThread        the thread that runs network I/O, apart from the actor workers.
//
// A channel is a ChannelClient (a MailboxSender that sends envelopes to one address) and a
// ChannelServer (which receives them and posts them to a local sender, usually a gateway). The
// transport is chosen by the address: `inproc://N` stays in the process, `ipc://…` is a Unix
// socket, `tcp://host:port` a TCP connection. See channel_client.h, channel_server.h and
// docs/wire.md (the wire format, version kWireVersion).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/runtime/scheduler.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace postal::routing {

class ChannelKey;  // channel_key.h

// The wire version the ipc and tcp channels speak (docs/wire.md). A peer of another version gets
// a REJECT naming both.
inline constexpr uint16_t kWireVersion = 2;

// nats:// channels: TLS to the NATS server, for clusters off one machine (docs/security.md).
// With `ca_file`, every tunnel connects with TLS and accepts only a server certificate signed by
// it (and naming the host dialed); `cert_file` and `key_file` add a client certificate, for
// servers that verify clients. Empty: plain TCP.
struct NatsTls {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  bool enabled() const { return !ca_file.empty(); }
  friend bool operator==(const NatsTls&, const NatsTls&) = default;
};

// ChannelOptions::tls: when a tcp channel runs TLS 1.3 (R-SEC-1).
enum class TlsMode : uint8_t { kAuto, kOn, kOff };
// "auto", "on", "off" (the topology's `tls` field, `postal proc --tls`).
std::string_view to_string(TlsMode mode);
// The inverse of to_string; InvalidArgument naming the three values otherwise.
absl::StatusOr<TlsMode> parse_tls_mode(std::string_view text);

struct ChannelOptions {
  // nats:// channels: the NATS server (nats://host:port) this side's tunnels connect to when it
  // dials, whatever server a peer's address names — a proc talks to the cluster through its own
  // node, and the cluster routes to the peer's. Empty: the server in the address dialed. A Node
  // listening on nats:// sets it to its own server.
  std::string nats_url;
  // nats:// channels of a topology with a key: the NATS user this side is (nats_conn.h, R-SEC-4).
  // A Node listening on nats:// sets it to its proc id; empty: the dial-only user `client`.
  std::string nats_member;
  NatsTls nats_tls;
  // Largest frame (the length prefix's value: kind + body) either side sends or accepts.
  // R-CHAN-3: a larger envelope fails alone with OversizedFrame; a peer that announces a larger
  // frame loses its connection.
  size_t max_frame_bytes = 8 << 20;
  // Large messages (docs/wire.md §9): a payload over `chunk_bytes` travels as a transfer of
  // CHUNK frames of at most this size, interleaved with other traffic; payloads up to
  // `max_message_bytes` are allowed (a larger one fails alone with OversizedFrame). A server
  // announces its max_message_bytes and `transfer_window` (chunk bytes a client may send beyond
  // what is acked, per transfer) in WELCOME, and holds at most `max_transfers` per session.
  size_t chunk_bytes = 256 << 10;
  uint64_t max_message_bytes = 1ull << 30;
  uint32_t transfer_window = 8 << 20;
  uint16_t max_transfers = 4;
  // A session whose client has been gone this long while a transfer of it is incomplete is
  // forgotten (its partial payloads freed; the client gets session_unknown and returns them).
  absl::Duration transfer_idle_timeout = absl::Seconds(60);
  // R-CHAN-2: when no ACK came for this long while envelopes were pending, the client closes and
  // returns every pending envelope with AckTimedOut (docs/wire.md §12 rule 40). The first dial's
  // handshake is bounded by it too.
  absl::Duration delivery_timeout = absl::Seconds(30);
  // Reconnect backoff: starts here, doubles per failed attempt, capped at reconnect_max.
  absl::Duration reconnect_initial = absl::Milliseconds(10);
  absl::Duration reconnect_max = absl::Seconds(1);
  // A write round gathers queued frames up to this many bytes (at least one frame).
  size_t max_batch_bytes = 256 << 10;
  // R-FLOW-3: one connect attempt, through the HELLO/WELCOME handshake, takes at most this long
  // (capped by delivery_timeout). A first dial past it fails with DialFailed; a reconnect past
  // it counts as a failed attempt and backs off.
  absl::Duration dial_timeout = absl::Seconds(10);
  // R-FLOW-3: while a client dialed with `dial_async` has not connected yet, at most this many
  // envelopes and bytes wait for it; past either bound a post fails at once with DialFailed.
  size_t max_dial_queue = 65536;
  size_t max_dial_queue_bytes = 64 << 20;
  // R-FLOW-2: a client holds at most `max_queue` envelopes and `max_queue_bytes` payload bytes
  // posted and neither acked nor returned (its unsequenced and unacked queues together, the
  // dial queue included), and at most `max_queue_per_destination` / `_bytes` of them for one
  // destination actor, so that one flooded destination cannot fill the queue in front of
  // another's. Past any bound a post fails at once with Transport(Overloaded), naming the bound.
  // The per-destination bytes default admits one message of max_message_bytes; why these
  // defaults: docs/decisions.md, "Bounded mailboxes and channel queues".
  size_t max_queue = 1 << 20;
  uint64_t max_queue_bytes = uint64_t{2} << 30;
  size_t max_queue_per_destination = 1 << 18;
  uint64_t max_queue_per_destination_bytes = uint64_t{1} << 30;
  // R-FLOW-2, credit (docs/wire.md §10.1): both ends offer the `credit` feature while this is
  // true. With it, a server whose proc refuses an envelope because the destination actor's
  // mailbox is full answers CREDIT `paused` for that actor, and `open` once the mailbox has
  // drained to half its bound; the client meanwhile holds that actor's envelopes (within the
  // per-destination bound above) instead of writing them, so a full actor costs its connection
  // nothing and never delays another actor's traffic. Held envelopes that wait longer than
  // delivery_timeout return Transport(Overloaded).
  bool credit = true;

  // R-FLOW-4, listener bounds (a ChannelServer's; docs/decisions.md has why these defaults).
  // A connection that has not sent a valid HELLO within this long is closed.
  absl::Duration handshake_timeout = absl::Seconds(10);
  // A connection in the middle of a frame that receives no byte for this long is closed. A
  // connection between frames is closed for being quiet only by heartbeats (below), when its
  // client offered them: a client with nothing to send is otherwise legitimately silent.
  absl::Duration partial_frame_timeout = absl::Seconds(30);
  // Connections open at once per listener; past it a new connection is accepted and closed at
  // once (logged, rate-limited) and the listener keeps serving the others.
  size_t max_connections = 512;
  // Bytes held in incomplete frames across a listener's connections (never below one
  // max_frame_bytes frame). Past it the connection holding the largest partial frame (the newest
  // among equals) is closed; its client reconnects and retransmits (R-CHAN-2).
  size_t max_partial_frame_bytes = 64 << 20;
  // Sessions (docs/wire.md §5): a server forgets a session that has had no connection for
  // `session_linger`, and past `max_sessions` it forgets those without a connection, longest
  // unconnected first. Forgetting is always safe: the client's next resuming HELLO gets
  // `session_unknown` and it returns what it had written, at most once (R-CHAN-2).
  absl::Duration session_linger = absl::Minutes(10);
  size_t max_sessions = 4096;

  // R-ROUTE-3: a DialRouter closes and frees a client with nothing unacked and no post for this
  // long; the next post to its address dials again.
  absl::Duration idle_client_timeout = absl::Seconds(60);

  // ---- Heartbeats (R-FLOW-4, R-CHAN-2; docs/wire.md §10.2; decisions.md has the defaults) ----
  // Both ends offer the `heartbeat` feature while heartbeat_interval > 0 (ZeroDuration: not
  // offered, so never enabled). Once a session has it, an end that has written nothing for an
  // interval sends a PING, answers every PING with a PONG, and counts every byte received as
  // liveness. A client that hears nothing for heartbeat_timeout declares the peer dead
  // (ChannelClient::liveness()), drops the connection and reconnects as on a lost connection;
  // a server closes such a connection (GOODBYE `idle`) and keeps its session. Timers tick once
  // per interval, never per message. heartbeat_timeout is used as at least 3 intervals.
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  // R-SEC-1 (docs/security.md, docs/wire.md §4.5): the topology's channel key. A server with a
  // key refuses every connection that does not prove it in the handshake (REJECT auth_required
  // or auth_failed) before decoding anything else; a client with a key proves it, checks the
  // server's proof first, and never falls back to an unauthenticated handshake. Without a key
  // both ends behave as before (unauthenticated) and log that once.
  std::shared_ptr<const ChannelKey> key;
  // R-SEC-1 (docs/security.md, docs/wire.md §2.1): TLS 1.3 on tcp:// channels, keyed from `key`
  // (a PSK derived from it: no certificates). kAuto: a client with a key uses TLS to a peer off
  // loopback; a server with a key requires it from peers off loopback and accepts both on
  // loopback. kOn: TLS on every tcp connection, loopback included (a server then refuses
  // plaintext); it needs a key (dial and serve fail without one). kOff: never (a server closes a
  // TLS ClientHello). ipc:// and nats:// channels never use it (nats_tls is TLS to NATS).
  TlsMode tls = TlsMode::kAuto;
  // R-SEC-1: the uids a server accepts on a unix socket (ipc://, checked with SO_PEERCRED on
  // accept, since an abstract socket has no file mode); empty: the server's own effective uid.
  std::vector<uint32_t> allowed_uids;
};

// IoThread: one boost::asio::io_context and the thread that runs it.
//
// Channel clients and servers do all their socket work in it, so the actor workers never block
// on the network. One thread runs the context at a time: this thread, or an idle worker it is
// lent to (`idle_poller`, R-SCHED-2: runtime/scheduler.h, "Idle poll"), which then reads,
// decodes and delivers what arrives itself. Construction starts the thread; destruction stops
// the context and joins it. Every client and server made with an IoThread must be destroyed
// before it, and a scheduler given its poller must stop first.
class IoThread {
 public:
  IoThread();
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  boost::asio::io_context& context() { return *context_; }
  // Whether the caller runs the context now: this I/O thread, or a worker it is lent to.
  bool in_io_thread() const;
  // What lends the context to an idle worker (runtime::Scheduler::set_idle_poller).
  runtime::IdlePoller& idle_poller();

 private:
  class Lender;
  std::unique_ptr<boost::asio::io_context> context_;
  std::unique_ptr<Lender> lender_;
  std::thread thread_;
};

}  // namespace postal::routing
