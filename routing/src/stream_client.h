// StreamClientCore: the state machine behind the ipc/tcp ChannelClient (routing internal).
//
// Threads: `post` runs on any thread and only appends to `pending_` under `mu_`, then kicks the
// I/O thread. Everything else — the socket, the decoder, the timers — belongs to the I/O thread.
// At most one write is in flight; its buffers point into `pending_`'s frames, so acked frames are
// trimmed only between writes (a deque keeps element addresses stable on push_back).
//
// Lifetime: the owning ChannelClient and every pending I/O handler share the core. The owner's
// destructor closes it on the I/O thread; handlers that run later see `closed()` and do nothing,
// so `returns_` is never used after the owner is gone.
//
// Link states: kConnecting (a connect is in flight) → kHandshaking (HELLO sent, waiting for
// WELCOME) → kUp (DATA flows) → kDown (lost; reconnect after backoff while anything is pending).
// Each connection has a generation number; handlers of an older generation are ignored. Every
// attempt, from connect to WELCOME, is bounded by dial_timeout (the dial timer).
//
// Dialing (R-FLOW-3): until a connect first succeeds the client is *dialing*. A background dial
// (`start_in_background`) resolves and connects on the I/O thread; posts meanwhile queue up to
// max_dial_queue / max_dial_queue_bytes. A failed or timed-out first connect closes the client
// with DialFailed for everything queued; once connected, failures (a handshake that stalls past
// dial_timeout included) reconnect as below, bounded by the delivery timeout.
//
// Sessions: a session is a random id plus seqs counted from 0. A HELLO presents the current
// session unless nothing *written* is unacked, in which case the client starts a new one first
// (renumbering the unwritten frames from 0), so a server that lost its sessions has nothing to
// reject. A session REJECT (same wire version: the server restarted and forgot the session)
// returns only the frames written and unacked — they may or may not have been delivered — and
// resumes the rest on a new session; only a REJECT of another version (or of a brand-new
// session) closes the channel.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "postal/routing/channel.h"
#include "postal/routing/frame.h"
#include "postal/runtime/mailbox_sender.h"
#include "socket_util.h"

namespace postal::routing::internal {

class StreamClientCore : public std::enable_shared_from_this<StreamClientCore> {
 public:
  StreamClientCore(IoThread& io, runtime::ChannelAddr addr, std::vector<Endpoint> endpoints,
                   runtime::ReturnHandle& returns, ChannelOptions options);

  // Caller thread, before the I/O thread knows this core: the synchronous first connect.
  absl::Status connect_first();
  // Hands the connected socket to the I/O thread: HELLO, then reads.
  void start();
  // Instead of the two above: resolve (tcp names) and connect on the I/O thread.
  void start_in_background();

  // Any thread: serialize, check the size (R-CHAN-3), sequence and queue (R-CHAN-4).
  void post(runtime::EnvelopePtr env, runtime::ReturnHandle& ret);
  // Closes the channel from the owner's thread; pending envelopes return ChannelClosed.
  void close(absl::Status why);

  bool closed() const { return closed_.load(std::memory_order_acquire); }
  bool rejected() const { return rejected_.load(std::memory_order_acquire); }
  absl::Status status() const;
  size_t unacked() const;

 private:
  enum class Link { kDown, kConnecting, kHandshaking, kUp };
  struct Pending {
    uint64_t seq;
    absl::Time posted;
    runtime::EnvelopePtr env;  // returned as it was posted when the channel closes
    std::string frame;         // the complete DATA frame: what is written and retransmitted
  };

  void fail_closed(runtime::EnvelopePtr env, runtime::ReturnHandle& ret);

  // Fails `env` at once: the dial queue is full.
  void fail_dial_queue_full(runtime::EnvelopePtr env, runtime::ReturnHandle& ret, size_t queued,
                            size_t bytes);

  // ---- I/O thread from here on ----
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
  void send_hello();
  void read(uint64_t gen);
  void on_read(uint64_t gen, const boost::system::error_code& ec, size_t n);
  void handle(uint64_t gen, Frame frame);
  void on_welcome(uint64_t gen, const WelcomeFrame& welcome);
  void on_reject(uint64_t gen, const RejectFrame& reject);
  void on_ack(uint64_t gen, const AckFrame& ack);
  // Writes the next batch of unsent frames: one gathered write per round (R-CHAN-4 order).
  void maybe_write();
  // `bytes`: how much of the write reached the socket (frames written completely count as sent).
  void on_written(uint64_t gen, const boost::system::error_code& ec, size_t bytes);
  // The connection of generation `gen` is gone: drop it and reconnect if anything is pending.
  void link_failed(uint64_t gen, std::string why);
  void schedule_reconnect();
  // R-CHAN-2: a timer on the oldest unacked envelope.
  void arm_deadline();
  void on_deadline(const boost::system::error_code& ec);
  // Closes for good: every pending envelope goes back through `returns_` with `reason`.
  void close_channel(runtime::TransportReason reason, absl::Status why, bool rejected);

  void trim_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts a new session: a new id, and the pending frames (all unwritten: acked_ == written_)
  // renumbered from 0. Precondition: no DATA write in flight (their bytes are patched).
  void new_session_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Pending* oldest_unacked_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (pending_.empty() || acked_ >= next_seq_) return nullptr;
    const uint64_t index = acked_ - pending_.front().seq;
    return index < pending_.size() ? &pending_[index] : nullptr;
  }

  IoThread& io_;
  const std::string addr_text_;
  const runtime::ChannelAddr addr_;
  std::vector<Endpoint> endpoints_;  // empty until resolved (background dials of tcp names)
  runtime::ReturnHandle& returns_;
  const ChannelOptions options_;
  const uint64_t max_frame_;  // max_frame_bytes, capped by the u32 length prefix

  mutable absl::Mutex mu_;
  uint64_t session_ ABSL_GUARDED_BY(mu_);             // the current client_session
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);  // unacked, by seq (contiguous)
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;        // seq of the next post
  uint64_t acked_ ABSL_GUARDED_BY(mu_) = 0;           // every seq below is acked
  uint64_t next_to_send_ ABSL_GUARDED_BY(mu_) = 0;    // first seq not handed to a write on this link
  // Every seq below was completely written to a socket of this session at least once (so the
  // server may have it); the frames from here to next_seq_ never left this process. ≥ acked_.
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  bool kick_scheduled_ ABSL_GUARDED_BY(mu_) = false;
  size_t dial_queue_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // frame bytes queued while dialing
  std::atomic<bool> dialing_{true};                   // no connect has succeeded yet
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  // What a post after the close fails with: DialFailed when the dial failed, else ChannelClosed.
  runtime::TransportReason closed_reason_ ABSL_GUARDED_BY(mu_) =
      runtime::TransportReason::kChannelClosed;
  std::atomic<bool> closed_{false};
  std::atomic<bool> rejected_{false};

  // I/O thread only.
  Socket socket_;
  boost::asio::steady_timer reconnect_timer_;
  boost::asio::steady_timer deadline_timer_;
  boost::asio::steady_timer dial_timer_;
  std::unique_ptr<boost::asio::ip::tcp::resolver> resolver_;
  FrameDecoder decoder_;
  std::vector<char> read_buf_;
  std::vector<boost::asio::const_buffer> write_bufs_;
  uint64_t write_first_seq_ = 0;  // the seq of write_bufs_[0] while a DATA write is in flight
  bool writing_data_ = false;     // the write in flight is DATA (write_bufs_), not the HELLO
  std::string hello_;
  uint64_t hello_first_unacked_ = 0;  // what the HELLO on the current connection claimed
  Link link_ = Link::kConnecting;  // dial connects synchronously first
  uint64_t gen_ = 1;               // the connection generation; stale handlers compare it
  bool writing_ = false;
  bool reconnect_wanted_ = false;  // reconnect once the aborted write completes
  bool reconnect_scheduled_ = false;
  bool deadline_armed_ = false;
  bool outage_ = false;
  std::string last_error_;
  absl::Duration backoff_;
};

}  // namespace postal::routing::internal
