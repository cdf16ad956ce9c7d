// StreamClientCore: the state machine behind the ipc/tcp ChannelClient (routing internal), wire
// version 2 (docs/wire.md).
//
// Threads: `post` runs on any thread. It serializes the payload (once, R-ENV-4), checks what it
// can of the size, and appends the envelope to the unsequenced queue `queued_` under `mu_`.
// Then, once per burst (§13 rule 41): on a worker thread it defers a flush to the end of the
// worker's slice (runtime/deferred_flush.h) — the flush sequences, encodes and writes on the
// worker itself when the link is up and the I/O state is free, so a reply or a burst costs no
// wake-up of the I/O thread; anywhere else, or when the inline flush cannot finish (the socket
// is full, an error), it kicks the I/O thread. The I/O state — sequencing and encoding (§6.1),
// the session dictionary, the pending frames, the socket, the timers — is guarded by `io_mu_`,
// which the I/O thread holds in every handler and a worker's flush only try-locks. Lock order:
// io_mu_, then mu_.
//
// Lifetime: the owning ChannelClient and every pending I/O handler share the core. The owner's
// destructor closes it on the I/O thread; handlers that run later see `closed()` and do nothing,
// so `returns_` is never used after the owner is gone.
//
// Link states: kConnecting (a connect is in flight) → kHandshaking (the TLS handshake when the
// connection runs TLS, R-SEC-1, stream_client_tls.cc; then HELLO sent, waiting for WELCOME) →
// kUp (DATA flows) → kDown (lost; reconnect after backoff while anything is pending).
// Each connection has a generation number; handlers of an older generation are ignored. Every
// attempt, from connect to WELCOME, is bounded by dial_timeout (the dial timer).
//
// Dialing (R-FLOW-3): until a connect first succeeds the client is *dialing*. A background dial
// (`start_in_background`) resolves and connects on the I/O thread; posts meanwhile queue up to
// max_dial_queue / max_dial_queue_bytes. A failed or timed-out first connect closes the client
// with DialFailed for everything queued; once connected, failures (a handshake that stalls past
// dial_timeout included) reconnect as below, bounded by the delivery timer.
//
// Sessions (§4.2, §5): a session is a random id, seqs counted from 0 and an encoder dictionary.
// Envelopes are sequenced and encoded only while the link is up (after WELCOME, when the
// server's limits are known). A HELLO resumes the current session (`resuming`) when something
// written is unacked; otherwise the client starts a new session, and on its WELCOME re-encodes
// the pending frames (none of them written) from seq 0 with a fresh dictionary. A REJECT
// `session_unknown`/`session_out_of_sync` returns only the frames written and unacked — they may
// or may not have been delivered — and resumes the rest on a new session; any other REJECT, and
// a REJECT of another version, closes the channel.
//
// Delivery timer (§12 rule 40): while anything is pending the client expects an ACK at least
// every delivery_timeout; when none comes the channel closes with AckTimedOut.
//
// Heartbeats (§10.2, R-FLOW-4; stream_client_heartbeat.cc): with the `heartbeat` feature enabled
// by WELCOME, a timer ticks once per heartbeat_interval while the link is up. A tick sends a
// PING when nothing was written since the last one, and declares the peer dead when nothing was
// read for heartbeat_timeout: the connection is dropped and the client reconnects as on any lost
// connection (R-CHAN-2), the reconnect's handshake bounded by dial_timeout; what is pending stays
// pending, bounded by the delivery timer. Reads and writes only set a flag (no clock, no timer).
// PING and PONG frames wait in `heartbeat_out_` until the write round is at a frame boundary.
//
// Transfers (§9): a payload over `chunk_bytes` travels as a DATA frame with flag `chunked` and
// then CHUNK frames cut from the envelope's cached bytes, at most `transfer_window` beyond what
// the server acked, one chunk per transfer per write round after the DATA frames (§9.9), so a
// transfer never stalls the channel. Order per (sender, destination) pair (R-CHAN-4, §9.8): a
// later envelope of a pair whose transfer has not written its last chunk yet is *held* (`held_`)
// and sequenced once that chunk is out; after a reconnect, the remaining chunks of a transfer
// whose pair was released go out before any DATA frame. A transfer's envelope is the client's
// until the server acks its last byte; it counts as outstanding until then. At a gateway the
// payload of a transfer may still be arriving (§9.7, payload_stream.h): its chunks are cut from
// what the stream holds, the stream wakes the client when more comes, and what the server acks
// is released to it. An ABORT is due when such a stream's upstream aborts or the server
// CANCELs (rule 31); it goes once the transfer's DATA and any chunk cut in half are written,
// and the transfer is then dropped without a return (whoever gave up returns it).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "byte_sink.h"
#include "envelope_codec.h"
#include "frames_v2.h"
#include "payload_stream.h"
#include "postal/routing/channel.h"
#include "postal/routing/channel_client.h"
#include "postal/runtime/deferred_flush.h"
#include "postal/runtime/mailbox_sender.h"
#include "queue_bounds.h"
#include "socket_util.h"
#include "tls_filter.h"

namespace postal::routing::internal {

// Helpers the parts of StreamClientCore use (stream_client*.cc).
// The failure target of an envelope: its next hop.
inline std::string target_of(const runtime::MessageEnvelope& env) {
  return env.next_hop().to_string();
}
// The errno of an OS error code; 0 for asio's own errors (end of stream, …).
inline int errno_of(const boost::system::error_code& ec) {
  return ec.category() == boost::system::system_category() ? ec.value() : 0;
}
// A random non-zero client_session, different from `old`.
uint64_t random_session(uint64_t old = 0);

class StreamClientCore : public std::enable_shared_from_this<StreamClientCore>,
                         public runtime::DeferredFlush {
 public:
  // `label`: how logs and errors name the channel (a nats:// channel names its own address, not
  // the private socket its stream runs on); empty: the address.
  StreamClientCore(IoThread& io, runtime::ChannelAddr addr, std::vector<Endpoint> endpoints,
                   runtime::ReturnHandle& returns, ChannelOptions options, std::string label = {});

  // How logs and errors name the channel (its label, or its address).
  const std::string& addr_text() const { return addr_text_; }

  // Caller thread, before the I/O thread knows this core: the synchronous first connect.
  absl::Status connect_first();
  // Hands the connected socket to the I/O thread: TLS when due, HELLO, then reads.
  void start();
  // R-SEC-1: the TLS context of this client (tls_policy.h), before start; null: no TLS.
  void set_tls(std::shared_ptr<const TlsContext> tls) { tls_ctx_ = std::move(tls); }
  // Instead of the two above: resolve (tcp names) and connect on the I/O thread.
  void start_in_background();
  // Before start: every connection comes from `dialer` instead of a socket connect, and its
  // writes go to the link's sink (a nats:// channel, byte_sink.h).
  void set_dialer(SinkDialer dialer) { dialer_ = std::move(dialer); }

  // Any thread: serialize the payload, check the size (R-CHAN-3) and queue (R-CHAN-4).
  void post(runtime::EnvelopePtr env, runtime::ReturnHandle& ret);
  // Closes the channel from the owner's thread; pending envelopes return ChannelClosed.
  void close(absl::Status why);

  // The deferred flush of posts from a worker (see above).
  void flush() override;

  bool closed() const { return closed_.load(std::memory_order_acquire); }
  bool rejected() const { return rejected_.load(std::memory_order_acquire); }
  // R-FLOW-4: what the heartbeats found out (channel_client.h).
  ChannelClient::Liveness liveness() const {
    return {heartbeat_on_.load(std::memory_order_acquire),
            peer_dead_.load(std::memory_order_acquire), deaths_.load(std::memory_order_acquire)};
  }
  // R-FLOW-2, credit (§10.1).
  ChannelClient::Credit credit() const {
    return {paused_count_.load(std::memory_order_acquire),
            paused_held_.load(std::memory_order_acquire)};
  }
  absl::Status status() const;
  size_t unacked() const { return closed() ? 0 : outstanding_.load(std::memory_order_acquire); }
  // R-FLOW-2: what the client holds, in total and for one destination actor.
  QueueBounds::Held held() const { return bounds_.total(); }
  QueueBounds::Held held_for(const runtime::ActorId& dest) const {
    return bounds_.for_destination(dest);
  }

 private:
  enum class Link { kDown, kConnecting, kHandshaking, kUp };
  enum class Written { kAll, kFull, kFailed };
  // §9: one chunked payload in flight.
  struct Transfer {
    uint64_t seq;                           // its DATA frame's seq
    uint64_t size = 0;                      // the payload's length
    std::string_view payload;               // the envelope's cached bytes; empty when streamed
    std::shared_ptr<PayloadStream> stream;  // §9.7: the bytes as they reach this gateway
    runtime::EnvelopePtr env;  // the envelope once its DATA is acked (before: in its Pending)
    uint64_t sent = 0;         // payload bytes written in chunks on this connection
    uint64_t received = 0;     // what the server holds (§9.4)
    bool released = false;     // its last chunk was written once: its pair flows again
    bool ending = false;       // an ABORT is due (see above)
    // The server's CANCEL (rule 31): the envelope returns from here with its reason and text.
    std::optional<v2::TransferEnd> cancel;
    runtime::ActorAddr from, to;  // its pair (§9.8)
    // Payload bytes that can be cut now.
    uint64_t available() const { return stream ? stream->end() : size; }
  };
  // A chunk frame cut by a write round: its 21-byte prefix and header, then a payload slice.
  struct ChunkCut {
    Transfer* transfer = nullptr;
    uint64_t offset = 0;
    size_t len = 0;
    const char* data = nullptr;  // the payload's bytes at `offset`
    std::array<char, 21> head{};
    size_t done = 0;  // bytes of head + slice written (a chunk cut in half by a full socket)
  };
  struct Pending {
    uint64_t seq;
    runtime::EnvelopePtr env;  // returned as it was posted when the channel closes
    std::string frame;         // prefix, kind and body; without the payload when `sliced`
    // The envelope's cached payload bytes, written after `frame` from where they are: one
    // run, or a few when large fields were referenced, not copied (wire::PayloadBytes). The
    // envelope above owns them.
    absl::InlinedVector<std::string_view, 3> payload;
    size_t payload_bytes = 0;
    bool sliced = false;
    Transfer* transfer = nullptr;  // a chunked envelope's transfer
  };

  void fail_now(runtime::EnvelopePtr env, runtime::ReturnHandle& ret, runtime::DeliveryFailure f);
  void fail_closed(runtime::EnvelopePtr env, runtime::ReturnHandle& ret);

  // ---- I/O thread from here on ----
  // Hands the queue to the I/O thread: at most one kick is scheduled at a time.
  void kick();
  void on_kick();
  void resolve_then_connect();
  void connect_async();
  // The attempt of generation `gen` took longer than dial_timeout.
  void on_dial_timeout(uint64_t gen);
  // The first dial failed: close, returning everything queued as DialFailed.
  void dial_failed(std::string why);
  // A connect succeeded: the client is no longer dialing (any thread that owns the socket).
  void connected();
  void on_connected(uint64_t gen, const boost::system::error_code& ec);
  // A connect failed: the dial fails, or a reconnect is scheduled.
  void connect_failed(std::string why, int err);
  // A connection from dialer_: its socket reads, its sink takes the writes.
  absl::Status attach_dialed();
  void send_hello();
  // ---- R-SEC-1: TLS (stream_client_tls.cc) ----
  // A connection is up: TLS first when the policy says so (its ClientHello), else HELLO.
  void begin_handshake();
  // Ciphertext read on connection `gen`: the TLS handshake, then plaintext into the splitter.
  // False when the connection ended.
  bool on_tls_read(uint64_t gen, std::string_view ciphertext);
  // A TLS failure on connection `gen`: a failed handshake closes the channel for good (another
  // topology's server, or one that does not speak TLS); a bad record is a lost connection.
  void tls_failed(uint64_t gen, const absl::Status& why);
  // Sends the ciphertext waiting in tls_: kAll once it is all out.
  Written send_tls(int& err);
  // Encrypts the gathered plaintext (at most one round) and accounts it as written.
  Written seal(const iovec* iov, size_t count);
  // Best effort, non-blocking: `frame` now, encrypted when the connection runs TLS (GOODBYE).
  void send_now(std::string_view frame);
  void read(uint64_t gen);
  void on_read(uint64_t gen, const boost::system::error_code& ec, size_t n);
  void handle(uint64_t gen, v2::Kind kind, std::string_view body);
  void on_welcome(uint64_t gen, const v2::Welcome& welcome);
  // R-SEC-1 (wire.md §4.5): checks the server's proof, then sends AUTH; a wrong proof closes.
  void on_challenge(uint64_t gen, std::string_view body);
  void on_reject(uint64_t gen, const v2::Reject& reject);
  void on_ack(uint64_t gen, const v2::Ack& ack);
  void on_goodbye(uint64_t gen, const v2::Goodbye& goodbye);
  // §9.6 rule 31: the server gave a transfer up and returns its envelope; an ABORT is due.
  void on_cancel(uint64_t gen, std::string_view body);
  // Sends the ABORTs that are due and drops those transfers (their envelopes go silently);
  // whether one is due that must wait for this write round.
  bool end_transfers();
  bool ending_transfers() const {
    for (const std::unique_ptr<Transfer>& t : transfers_) {
      if (t->ending) return true;
    }
    return false;
  }
  // ---- Heartbeats (stream_client_heartbeat.cc) ----
  uint32_t offered_features() const;
  // Starts the ticks of this connection (after WELCOME), when the session has the feature.
  void arm_heartbeat();
  void on_heartbeat_tick(uint64_t gen);
  // PING (answered with PONG) or PONG; a stream error without the feature.
  void on_heartbeat_frame(uint64_t gen, v2::Kind kind, std::string_view body);
  // ---- Credit (stream_client_credit.cc; docs/wire.md §10.1, R-FLOW-2) ----
  // CREDIT: pauses destination actors, or opens them and sends what they held.
  void on_credit(uint64_t gen, std::string_view body);
  // Holds `env` when its destination actor is paused (handler ports only); whether it did.
  bool hold_paused(runtime::EnvelopePtr& env);
  // Takes every paused destination's envelopes (each destination's in order) and forgets the
  // pauses: a new connection starts with every destination open.
  std::vector<runtime::EnvelopePtr> take_paused();
  // Returns Overloaded the envelopes of destinations paused for delivery_timeout or longer.
  void expire_paused();
  // Everything sequenced is acked and paused destinations hold the rest: no ACK is due.
  bool waiting_on_credit() const;
  // Moves what posts queued into `pending_`, sequenced and encoded (§6.1). Only while up.
  void sequence();
  // Sequences `env` unless its pair must wait (§9.8 rule 34): then it joins `held_`.
  void admit(runtime::EnvelopePtr env);
  // Whether `env` travels as a transfer: a payload over chunk_limit(), or one still streaming.
  bool chunked(runtime::MessageEnvelope& env) const;
  // Whether `env` must wait behind its pair's transfer or for a transfer slot.
  bool must_hold(runtime::MessageEnvelope& env) const;
  // Sequences held envelopes that no longer need to wait, oldest first (rule 35).
  void release_held();
  // Encodes one envelope as the next DATA frame of the session; false when it failed alone.
  bool encode(runtime::EnvelopePtr& env);
  // The server holds all of `t`: the envelope is delivered there (§9.4). Also drops a transfer
  // that ended (its envelope goes without a return).
  void finish_transfer(Transfer* t);
  // Cuts the chunks of a write round into `cuts_` (§9.9): `released` transfers only, or the
  // others whose DATA frame precedes seq `data_end`.
  void cut_chunks(bool released, uint64_t data_end, size_t& bytes);
  // Where `t`'s next chunk starts: past what was written, the chunk cut in half and this round.
  uint64_t cut_end(const Transfer* t) const;
  size_t chunk_limit() const;
  // Writes the control frame, then unsent DATA frames in seq order (R-CHAN-4), with gathered
  // non-blocking writes (§13 rule 42) until everything is out or the socket is full.
  void flush_writes();
  // What write_some got done: everything, up to a full socket, or a failure (errno in `err`;
  // 0 with a TLS failure, in tls_error_).
  Written write_some(int& err);
  // A worker's flush: whether everything went out (else the I/O thread takes over).
  bool write_inline();
  // `n` more bytes of the write round reached the socket: frames written completely count as
  // written. True when a transfer wrote its last chunk (held envelopes may go).
  bool advance(size_t n);
  // The socket is full: flush_writes again when it can take more.
  void wait_writable();
  // The connection of generation `gen` is gone: drop it and reconnect if anything is pending.
  void link_failed(uint64_t gen, std::string why);
  void drop_connection(std::string why);
  void schedule_reconnect();
  // §12 rule 40: a timer that every ACK restarts, running while anything is pending.
  void arm_deadline();
  void on_deadline(const boost::system::error_code& ec);
  // Closes for good: every pending envelope goes back through `returns_` with `reason`.
  // Returns everything pending. Written-and-unacked envelopes may have been delivered
  // (DeliveryFailure::maybe_delivered) unless `server_final`: the server's final ACK said it
  // processes nothing more of the session.
  void close_channel(runtime::TransportReason reason, absl::Status why, bool rejected,
                     bool server_final = false);
  // Returns written-and-unacked envelopes and starts a new session for the rest (§4.4).
  // `server_final`: the server's final ACK (GOODBYE protocol_error) says those returned were
  // not delivered; else they may have been.
  void resume_on_new_session(const std::string& why, bool server_final = false);
  // Starts a new session: a new id, seqs from 0, a fresh dictionary once WELCOME announces its
  // bounds. Precondition: nothing pending was written (their frames are re-encoded).
  void new_session();
  void trim();
  bool anything_pending() const;
  // §9.11: everything written is acked and what remains are transfers streaming through this
  // gateway that wait for their upstream's bytes — the delivery timer does not run out on them.
  bool waiting_on_upstream() const;

  IoThread& io_;
  const std::string addr_text_;
  const runtime::ChannelAddr addr_;
  std::vector<Endpoint> endpoints_;  // empty until resolved (background dials of tcp names)
  runtime::ReturnHandle& returns_;
  const ChannelOptions options_;
  const uint64_t max_frame_;  // max_frame_bytes, capped by the u32 length prefix

  struct Queued {
    runtime::EnvelopePtr env;
    size_t bytes;  // the payload's size
  };
  mutable absl::Mutex mu_;
  std::vector<Queued> queued_ ABSL_GUARDED_BY(mu_);  // posted, not yet sequenced, in order
  bool kick_scheduled_ ABSL_GUARDED_BY(mu_) = false;
  bool flush_deferred_ ABSL_GUARDED_BY(mu_) = false;  // a worker will flush after its slice
  size_t dial_queue_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // payload bytes queued while dialing
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  // What a post after the close fails with: DialFailed when the dial failed, else ChannelClosed.
  runtime::TransportReason closed_reason_ ABSL_GUARDED_BY(mu_) =
      runtime::TransportReason::kChannelClosed;
  int closed_errno_ ABSL_GUARDED_BY(mu_) = 0;  // with DialFailed: the connect's errno
  std::atomic<bool> dialing_{true};            // no connect has succeeded yet
  std::atomic<bool> closed_{false};
  std::atomic<bool> rejected_{false};
  std::atomic<size_t> outstanding_{0};  // posted and neither acked nor returned
  // R-FLOW-2: the same envelopes counted against ChannelOptions' queue bounds, in total and per
  // destination actor; every site that lowers outstanding_ releases them here.
  QueueBounds bounds_;
  std::atomic<bool> up_{false};            // link_ == kUp, for a worker's flush to look at
  std::atomic<bool> heartbeat_on_{false};  // the session has the heartbeat feature
  std::atomic<bool> peer_dead_{false};     // declared dead, no WELCOME since
  std::atomic<uint64_t> deaths_{0};

  // Everything below: under io_mu_ (the I/O thread's handlers, a worker's inline flush).
  absl::Mutex io_mu_;
  std::vector<Queued> taking_;   // the batch `sequence` took from queued_ (kept for capacity)
  std::deque<Pending> pending_;  // sequenced, unacked, by seq (contiguous)
  std::deque<runtime::EnvelopePtr> held_;  // waiting behind their pair's transfer (§9.8)
  // §10.1: destination actors the server paused, with the envelopes held for each (in order).
  struct Paused {
    std::deque<runtime::EnvelopePtr> envs;
    absl::Time since;
  };
  absl::flat_hash_map<runtime::ActorId, Paused> paused_;
  std::atomic<size_t> paused_count_{0};               // paused_.size(), for credit()
  std::atomic<size_t> paused_held_{0};                // envelopes held in paused_, for credit()
  std::vector<std::unique_ptr<Transfer>> transfers_;  // incomplete, by seq
  std::vector<ChunkCut> cuts_;                        // the chunks of the write round in progress
  std::optional<ChunkCut> cut_half_;  // a chunk the socket took part of: it goes on first
  size_t round_robin_ = 0;            // the transfer that cuts first in the next round
  size_t head_cuts_ = 0;              // cuts_[0, head_cuts_) go before the round's DATA frames
  uint64_t batch_data_end_ = 0;       // the round's DATA frames end before this seq
  uint64_t session_;                  // the current client_session
  std::optional<v2::EnvelopeEncoder> encoder_;  // the session's dictionary, from its WELCOME
  v2::Welcome limits_;              // the session's WELCOME (its limits are fixed per session)
  bool session_presented_ = false;  // a HELLO presented session_ (a later new one needs a new id)
  uint64_t next_seq_ = 0;           // seq of the next frame sequenced
  uint64_t acked_ = 0;              // every seq below is acked
  uint64_t next_to_send_ = 0;       // first seq not handed to a write on this link
  // Every seq below was completely written to a socket of this session at least once (so the
  // server may have it); the frames from here to next_seq_ never left this process. ≥ acked_.
  uint64_t written_ = 0;
  Socket socket_;
  SinkDialer dialer_;               // set: connections come from it (byte_sink.h)
  std::shared_ptr<ByteSink> sink_;  // the current connection's, when dialer_ made it
  boost::asio::steady_timer reconnect_timer_;
  boost::asio::steady_timer deadline_timer_;
  boost::asio::steady_timer dial_timer_;
  std::unique_ptr<boost::asio::ip::tcp::resolver> resolver_;
  v2::FrameSplitter splitter_;
  std::vector<char> read_buf_;
  size_t send_offset_ = 0;         // bytes of frame `next_to_send_` already written
  std::string control_;            // the HELLO (then AUTH) being written, before any DATA
  std::string hello_body_;         // R-SEC-1: the HELLO body as sent, which both MACs cover
  bool challenged_ = false;        // R-SEC-1: a CHALLENGE was answered on this connection
  size_t control_sent_ = 0;        // bytes of control_ written
  bool waiting_writable_ = false;  // the socket was full; a wait for writability is pending
  bool wide_send_buffer_ = false;  // a large payload was sent: every socket gets a wide buffer
  Link link_ = Link::kConnecting;  // dial connects synchronously first
  uint64_t gen_ = 1;               // the connection generation; stale handlers compare it
  bool hello_resuming_ = false;    // what the HELLO on this connection claimed
  bool reconnect_scheduled_ = false;
  bool deadline_armed_ = false;
  absl::Time progress_at_;  // the last ACK, or when work arrived with nothing pending
  bool idle_ = true;        // nothing was pending at the last look
  bool outage_ = false;
  std::string last_error_;
  int last_errno_ = 0;  // the errno behind last_error_, when an OS error
  absl::Duration backoff_;
  // Heartbeats (§10.2).
  boost::asio::steady_timer heartbeat_timer_;
  std::string heartbeat_out_;  // PINGs and PONGs waiting for a frame boundary
  bool read_since_tick_ = false;
  bool wrote_since_tick_ = false;
  std::chrono::steady_clock::time_point last_heard_;  // as of the last tick
  uint64_t pings_ = 0;                                // the last PING's token
  // R-SEC-1: TLS (tls_filter.h). The context is set once before start; the filter is this
  // connection's (null: plaintext), dropped with it; X binds the handshake's MACs to it.
  std::shared_ptr<const TlsContext> tls_ctx_;
  std::unique_ptr<TlsFilter> tls_;
  std::string tls_exporter_;
  std::string tls_error_;  // why the last TLS write failed
};

}  // namespace postal::routing::internal
