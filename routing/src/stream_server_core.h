// The ipc/tcp ChannelServer's listener state (routing internal): ServerCore (accept, the
// listener bounds, the session table, stats) and what a connection shares with it. The
// connection itself is stream_connection.h; stream_server.cc has ServerCore's functions and
// `serve_stream`. Everything runs on the I/O thread, except what stream_server.cc says.
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "byte_sink.h"
#include "channel_auth.h"
#include "connection_wire.h"
#include "credit_frame.h"
#include "envelope_codec.h"
#include "frames_v2.h"
#include "payload_stream.h"
#include "postal/routing/channel_key.h"
#include "postal/runtime/log_rate_limit.h"
#include "postal/wire/absl_compat.h"
#include "session_credit.h"
#include "socket_util.h"
#include "transports.h"

namespace postal::routing::internal::stream_server {

using runtime::ChannelAddr;
using runtime::EnvelopePtr;

// R-FLOW-4: a connection reads into its frame splitter's buffer, asking for little at first and
// twice as much each time a read fills what it asked for, up to kReadChunk.
constexpr size_t kFirstReadChunk = 4 << 10;
constexpr size_t kReadChunk = 256 << 10;
// How often a listener looks for connections past their handshake or partial-frame timeout, at
// most (a quarter of the shorter timeout, at least 10 ms).
constexpr auto kMaxSweepPeriod = std::chrono::seconds(1);
constexpr auto kMinSweepPeriod = std::chrono::milliseconds(10);
// After an accept error other than running out of fds, the listener tries again this late.
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);
// After a REJECT the server half-closes and waits this long for the client to hang up, so the
// REJECT is read before the connection is reset.
constexpr auto kRejectLinger = std::chrono::seconds(5);
// R-CHAN-2: a stopping server lingers this long at most for each client to read its GOODBYE
// `server_stopping` and hang up (§11 allows 5 s; a proc's stop should not wait that long for a
// stuck client, and `postal up` gives a child 3 s before SIGKILL). A client that hangs up
// earlier ends the wait for its connection at once.
constexpr auto kStopLinger = std::chrono::seconds(2);
// A connection whose writes go to a sink (nats://, byte_sink.h) sends the ACK of what it read at
// most this long after the read, not at once, unless other frames go out first: each ACK there
// is a NATS message through the server and a wake-up on the client's side, and sent at once it
// competes for the CPUs with the reply it came with (decisions.md, "nats:// channels").
constexpr auto kSinkAckDelay = std::chrono::milliseconds(1);

class Connection;

// A client that went away (closed, reset, or gone mid-write) is routine, not worth a log line.
inline bool hung_up(const boost::system::error_code& ec) {
  return ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset ||
         ec == boost::asio::error::broken_pipe;
}

// Out of file descriptors, process-wide or system-wide.
inline bool out_of_fds(const boost::system::error_code& ec) {
  return ec == boost::asio::error::no_descriptors ||
         (ec.category() == boost::system::system_category() && ec.value() == ENFILE);
}

inline std::chrono::steady_clock::duration to_chrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

// §9: a chunked payload registered by its DATA frame: reassembled here, or — at a gateway whose
// next hop is another channel — streamed through (§9.7, payload_stream.h).
struct Transfer {
  Transfer() = default;
  Transfer(Transfer&&) = default;
  Transfer& operator=(Transfer&&) = default;
  // A streamed transfer that goes before every byte arrived (ABORT, its session forgotten)
  // aborts its stream, so the next hop's transfer is aborted too (rule 33).
  ~Transfer() {
    if (stream) stream->abort();
  }

  EnvelopePtr env;           // reassembled: decoded from the DATA frame; its payload fills in last
  uint64_t payload_len = 0;  // announced by the DATA frame
  std::string bytes;         // reassembled: the buffer (§9.10 rule 38)
  std::shared_ptr<PayloadStream> stream;  // streamed: the bytes on their way (the env is routed)
  uint64_t received = 0;                  // streamed: bytes appended to the stream
  uint64_t taken = 0;      // streamed: bytes taken over — what ACKs announce (rule 32)
  bool cancelled = false;  // streamed: CANCEL sent; chunks are discarded until the ABORT

  // What ACK, WELCOME and GOODBYE say this session's server holds (§9.4, §9.5).
  uint64_t held() const {
    if (!stream) return bytes.size();
    return cancelled ? ~uint64_t{0} : taken;
  }
  // Streamed: what the upstream must hear since the stream moved — nothing, the bytes taken
  // over (at most `window` beyond what the next hop released, rule 32), or a CANCEL (the
  // consumer gave up, rule 31).
  enum class News { kNone, kProgress, kCancel };
  News advance(uint64_t window) {
    if (cancelled) return News::kNone;
    if (stream->state() == PayloadStream::State::kAbandoned) {
      cancelled = true;
      return News::kCancel;
    }
    const uint64_t take = std::min(received, stream->released() + window);
    if (take <= taken) return News::kNone;
    taken = take;
    return News::kProgress;
  }
};

// §5: what the server keeps of a client's session across its connections.
struct Session {
  uint64_t next_expected = 0;                      // R-CHAN-1: every seq below was enqueued here
  Connection* owner = nullptr;                     // the connection currently carrying this session
  std::chrono::steady_clock::time_point orphaned;  // when it last lost its connection
  std::optional<v2::EnvelopeDecoder> decoder;      // the session dictionary's receiving half (§7)
  std::map<uint64_t, Transfer> transfers;          // incomplete, by seq (≤ max_transfers)
  uint32_t features = 0;  // enabled at its creation (§15): the HELLO's offer ∩ this server's
  SessionCredit credit;   // §10.1: the actors its client holds back
  // What the session's transfers progress lists (§8 rule 20, §9.5): every incomplete one.
  std::vector<v2::TransferProgress> progress() const {
    std::vector<v2::TransferProgress> out;
    for (const auto& [seq, t] : transfers) out.push_back({seq, t.held()});
    return out;
  }
};

class ServerCore : public std::enable_shared_from_this<ServerCore> {
 public:
  ServerCore(IoThread& io, ChannelAddr local, runtime::MailboxSender& deliver_to,
             runtime::ReturnHandle& ret, ChannelOptions options)
      : io_(io),
        local_(std::move(local)),
        text_(local_.to_string()),
        deliver_to_(deliver_to),
        ret_(ret),
        options_(options),
        max_frame_(static_cast<uint32_t>(std::clamp<uint64_t>(
            options.max_frame_bytes, 4096, std::numeric_limits<uint32_t>::max()))),
        partial_cap_(std::max<size_t>(options.max_partial_frame_bytes, max_frame_ + 4)),
        acceptor_(io.context()),
        sweep_timer_(io.context()),
        retry_timer_(io.context()),
        heartbeat_timer_(io.context()) {}
  ~ServerCore() {
    if (reserve_fd_ >= 0) ::close(reserve_fd_);
  }

  absl::Status listen(const Endpoint& endpoint);
  void start() {
    boost::asio::post(io_.context(), [self = shared_from_this()] {
      self->accept();
      self->arm_sweep();
      self->arm_heartbeat();
    });
  }
  ChannelServer::Stats stats() const;
  // Stops accepting and processing frames; every connection that is up gets GOODBYE
  // `server_stopping` with its session's final ACK and lingers (kStopLinger at most) until its
  // client hangs up (R-CHAN-2, §11); the others close at once.
  void stop(bool goodbye = true);
  // Any thread but the I/O thread, after stop(): waits until every connection closed, at most
  // `timeout`; whether they did.
  bool wait_drained(absl::Duration timeout) {
    return drained_.WaitForNotificationWithTimeout(timeout);
  }
  void drop_connections();

  // §9.7: the consumer of streamed transfer `seq` of session `session` released bytes or gave
  // up (posted to the I/O thread by the stream's producer wake).
  void stream_moved(uint64_t session, uint64_t seq);
  // Wakes stream_moved when `stream` moves.
  void watch(PayloadStream& stream, uint64_t session, uint64_t seq);

  const ChannelAddr& local_addr() const { return local_; }
  void set_local_addr(ChannelAddr addr) {
    local_ = std::move(addr);
    text_ = local_.to_string();
  }
  void set_unlink_path(std::string path) { unlink_path_ = std::move(path); }
  // R-SEC-1: the TLS context (tls_policy.h), before start; null: no TLS.
  void set_tls(std::shared_ptr<const TlsContext> tls) { tls_ctx_ = std::move(tls); }
  // Any thread: hands the server a connection made outside it (serve_stream's `adopt`); closed
  // when the server stopped.
  void adopt(SinkLink link) {
    boost::asio::post(io_.context(), [self = shared_from_this(), link = std::move(link)] {
      Socket socket(self->io_.context());
      boost::system::error_code ec;
      socket.assign(boost::asio::generic::stream_protocol(AF_UNIX, SOCK_STREAM), link.fd, ec);
      if (ec) {
        ::close(link.fd);
        return;
      }
      if (!self->stopped_) self->on_accepted(std::move(socket), link.sink);
    });
  }
  // Only before start(): afterwards the acceptor belongs to the I/O thread.
  Endpoint bound_endpoint(boost::system::error_code& ec) const {
    return acceptor_.local_endpoint(ec);
  }

 private:
  friend class Connection;

  void accept();
  // `sink`: where the connection's writes go instead of its socket (nats://, byte_sink.h).
  void on_accepted(Socket socket, std::shared_ptr<ByteSink> sink = nullptr);
  // EMFILE/ENFILE: close what is pending through the reserved fd, then wait for a connection.
  void on_out_of_fds(const boost::system::error_code& ec);
  void arm_sweep();
  // ---- Heartbeats (R-FLOW-4, §10.2): one timer per listener, ticking once per interval ----
  uint32_t offered_features() const {
    return (heartbeat_interval() > std::chrono::steady_clock::duration::zero()
                ? v2::kFeatureHeartbeat
                : 0) |
           (options_.credit ? v2::kFeatureCredit : 0);
  }
  // ---- Credit (§10.1) ----
  // What a paused actor's mailbox calls (on any thread) once it has room: room_again on the
  // I/O thread.
  std::function<void()> room_waker(uint64_t session, const runtime::ActorId& actor);
  // Opens `actor` for `session` (and tells its client, when connected).
  void room_again(uint64_t session, const runtime::ActorId& actor);
  std::chrono::steady_clock::duration heartbeat_interval() const {
    return to_chrono(options_.heartbeat_interval);
  }
  // heartbeat_timeout, at least three intervals (a PING goes out at most two intervals after
  // the last write, so a live peer always answers in time).
  std::chrono::steady_clock::duration heartbeat_timeout() const {
    return std::max(to_chrono(options_.heartbeat_timeout), 3 * heartbeat_interval());
  }
  void arm_heartbeat();
  // After stop(): notes that the last connection closed.
  void note_drained() {
    if (stopped_ && connections_.empty() && !drained_.HasBeenNotified()) drained_.Notify();
  }
  // Closes connections past their handshake or partial-frame timeout; forgets sessions past
  // session_linger.
  void sweep();
  // Forgets sessions without a connection past session_linger, and past max_sessions the longest
  // unconnected ones.
  void bound_sessions();
  // R-FLOW-4: closes connections (largest partial frame first) until the bound holds.
  void enforce_partial_cap();
  void publish_partial();
  // A rate-limited line for closes and refusals that input can repeat.
  void log_bounded(std::string_view what);
  // R-SEC-1: whether a unix-socket peer's uid (SO_PEERCRED) may connect; true for tcp.
  bool peer_allowed(Socket& socket);

  IoThread& io_;
  ChannelAddr local_;
  std::string text_;
  runtime::LogRateLimit accept_errors_{absl::Seconds(1)};  // an fd shortage repeats per connection
  runtime::MailboxSender& deliver_to_;
  runtime::ReturnHandle& ret_;
  // The session dictionary's bounds this server announces (§7.4).
  v2::DictLimits dict_limits() const { return v2::DictLimits{}; }
  // The WELCOME of a session at `next_expected`: the same limits for every session (§4.3).
  v2::Welcome welcome(uint64_t next_expected) const {
    v2::Welcome w;
    w.next_expected = next_expected;
    w.max_frame_bytes = max_frame_;
    w.dict_max_entries = dict_limits().max_entries;
    w.dict_max_bytes = static_cast<uint32_t>(dict_limits().max_bytes);
    w.max_message_bytes = options_.max_message_bytes;
    w.transfer_window = std::max<uint32_t>(options_.transfer_window, max_frame_);
    w.max_transfers = std::max<uint16_t>(options_.max_transfers, 1);
    return w;
  }

  const ChannelOptions options_;
  const uint32_t max_frame_;  // max_frame_bytes, within what the u32 length prefix can say
  const size_t partial_cap_;  // max_partial_frame_bytes, at least one max-size frame
  Acceptor acceptor_;
  std::string unlink_path_;                           // ipc path to remove on stop
  runtime::LogRateLimit bounded_{absl::Seconds(1)};   // closes and refusals by the bounds
  runtime::LogRateLimit refusals_{absl::Seconds(1)};  // R-SEC-1 refusals (REJECTs, peer uids)

  // Written on the I/O thread, read by stats() on any thread.
  std::atomic<size_t> connections_open_{0};
  std::atomic<size_t> partial_published_{0};
  std::atomic<size_t> partial_peak_{0};
  std::atomic<uint64_t> refused_over_cap_{0};
  std::atomic<uint64_t> closed_handshake_timeout_{0};
  std::atomic<uint64_t> closed_partial_frame_timeout_{0};
  std::atomic<uint64_t> closed_over_partial_bytes_{0};
  std::atomic<uint64_t> out_of_fds_{0};
  std::atomic<uint64_t> shed_out_of_fds_{0};
  std::atomic<size_t> sessions_open_{0};
  std::atomic<uint64_t> sessions_forgotten_{0};
  std::atomic<uint64_t> closed_heartbeat_timeout_{0};
  absl::Notification drained_;  // after stop(): every connection closed
  std::atomic<uint64_t> refused_unauthenticated_{0};
  std::atomic<uint64_t> auth_failed_{0};
  std::atomic<uint64_t> refused_peer_uid_{0};
  std::atomic<uint64_t> credit_pauses_{0};
  std::atomic<uint64_t> credit_opens_{0};
  std::atomic<uint64_t> tls_failed_{0};
  std::atomic<uint64_t> refused_plaintext_{0};
  std::shared_ptr<const TlsContext> tls_ctx_;  // R-SEC-1; set before start

  // I/O thread only.
  boost::asio::steady_timer sweep_timer_;
  boost::asio::steady_timer retry_timer_;
  boost::asio::steady_timer heartbeat_timer_;
  // A descriptor held in reserve: closed to accept-and-close pending connections at EMFILE.
  int reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  size_t partial_total_ = 0;  // the sum of the connections' partial_bytes_
  bool stopped_ = false;
  std::atomic<uint64_t> connections_accepted_{0};  // written on the I/O thread
  absl::flat_hash_map<uint64_t, std::unique_ptr<Session>> sessions_;
  absl::flat_hash_set<std::shared_ptr<Connection>> connections_;
};

}  // namespace postal::routing::internal::stream_server
