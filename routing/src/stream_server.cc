// The ipc/tcp ChannelServer: accept, handshake, deliver in seq order, ack cumulatively
// (R-CHAN-1, R-CHAN-2; channel_server.h has the contract, docs/wire.md the protocol, version 2).
//
// Everything here runs on the I/O thread, except `serve` (which binds and listens on the
// caller's thread before the I/O thread sees the acceptor) and the owner's destructor and
// drop_connections (which run their work on the I/O thread and wait for it).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
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
#include "envelope_codec.h"
#include "frames_v2.h"
#include "postal/runtime/log_rate_limit.h"
#include "postal/wire/absl_compat.h"
#include "socket_util.h"
#include "transports.h"

namespace postal::routing::internal {
namespace {

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

class Connection;

// A client that went away (closed, reset, or gone mid-write) is routine, not worth a log line.
bool hung_up(const boost::system::error_code& ec) {
  return ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset ||
         ec == boost::asio::error::broken_pipe;
}

// Out of file descriptors, process-wide or system-wide.
bool out_of_fds(const boost::system::error_code& ec) {
  return ec == boost::asio::error::no_descriptors ||
         (ec.category() == boost::system::system_category() && ec.value() == ENFILE);
}

std::chrono::steady_clock::duration to_chrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

// §5: what the server keeps of a client's session across its connections.
struct Session {
  uint64_t next_expected = 0;   // R-CHAN-1: every seq below was enqueued here
  Connection* owner = nullptr;  // the connection currently carrying this session
  std::chrono::steady_clock::time_point orphaned;  // when it last lost its connection
  std::optional<v2::EnvelopeDecoder> decoder;  // the session dictionary's receiving half (§7)
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
        retry_timer_(io.context()) {}
  ~ServerCore() {
    if (reserve_fd_ >= 0) ::close(reserve_fd_);
  }

  absl::Status listen(const Endpoint& endpoint);
  void start() {
    boost::asio::post(io_.context(), [self = shared_from_this()] {
      self->accept();
      self->arm_sweep();
    });
  }
  ChannelServer::Stats stats() const;
  void stop();
  void drop_connections();

  const ChannelAddr& local_addr() const { return local_; }
  void set_local_addr(ChannelAddr addr) {
    local_ = std::move(addr);
    text_ = local_.to_string();
  }
  void set_unlink_path(std::string path) { unlink_path_ = std::move(path); }
  // Only before start(): afterwards the acceptor belongs to the I/O thread.
  Endpoint bound_endpoint(boost::system::error_code& ec) const {
    return acceptor_.local_endpoint(ec);
  }

 private:
  friend class Connection;

  void accept();
  void on_accepted(Socket socket);
  // EMFILE/ENFILE: close what is pending through the reserved fd, then wait for a connection.
  void on_out_of_fds(const boost::system::error_code& ec);
  void arm_sweep();
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
    w.transfer_window = std::max<uint32_t>(w.transfer_window, max_frame_);
    return w;
  }

  const ChannelOptions options_;
  const uint32_t max_frame_;  // max_frame_bytes, within what the u32 length prefix can say
  const size_t partial_cap_;  // max_partial_frame_bytes, at least one max-size frame
  Acceptor acceptor_;
  std::string unlink_path_;                          // ipc path to remove on stop
  runtime::LogRateLimit bounded_{absl::Seconds(1)};  // closes and refusals by the bounds

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

  // I/O thread only.
  boost::asio::steady_timer sweep_timer_;
  boost::asio::steady_timer retry_timer_;
  // A descriptor held in reserve: closed to accept-and-close pending connections at EMFILE.
  int reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  size_t partial_total_ = 0;  // the sum of the connections' partial_bytes_
  bool stopped_ = false;
  uint64_t connections_accepted_ = 0;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Session>> sessions_;
  absl::flat_hash_set<std::shared_ptr<Connection>> connections_;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<ServerCore> core, Socket socket, uint64_t number)
      : core_(std::move(core)),
        socket_(std::move(socket)),
        number_(number),
        accepted_at_(std::chrono::steady_clock::now()),
        last_read_(accepted_at_) {}

  void start() { read(); }

  uint64_t number() const { return number_; }
  size_t partial_bytes() const { return partial_bytes_; }

  // R-FLOW-4: closes the connection if it is past the handshake or partial-frame timeout.
  void check_timeouts(std::chrono::steady_clock::time_point now) {
    if (closed_ || state_ == State::kRejected) return;  // a REJECT lingers on its own timer
    if (state_ == State::kAwaitHello &&
        now - accepted_at_ >= to_chrono(core_->options_.handshake_timeout)) {
      core_->closed_handshake_timeout_.fetch_add(1, std::memory_order_relaxed);
      return close_bounded(absl::StrCat("no valid HELLO within handshake_timeout (",
                                        absl::FormatDuration(core_->options_.handshake_timeout),
                                        ")"));
    }
    if (splitter_.buffered() > 0 &&
        now - last_read_ >= to_chrono(core_->options_.partial_frame_timeout)) {
      core_->closed_partial_frame_timeout_.fetch_add(1, std::memory_order_relaxed);
      return close_bounded(absl::StrCat("nothing received for partial_frame_timeout (",
                                        absl::FormatDuration(core_->options_.partial_frame_timeout),
                                        ") in the middle of a ", splitter_.buffered(),
                                        "-byte partial frame"));
    }
  }

  // Closes for a bound (R-FLOW-4): the line is rate-limited, since input can repeat it.
  void close_bounded(std::string_view why) {
    if (closed_) return;
    core_->log_bounded(absl::StrCat("closing connection #", number_, ": ", sv(why)));
    close("");
  }

  // Closes the connection (idempotent); logs `why` unless it is empty.
  void close(std::string_view why) {
    if (closed_) return;
    closed_ = true;
    const auto self = shared_from_this();  // the set below may hold the last other reference
    if (!why.empty()) {
      log().info(absl::StrCat("channel server ", core_->text_, ": closing connection #", number_,
                              ": ", sv(why)));
    }
    // The counts first, so whoever sees the socket close sees them already updated.
    core_->partial_total_ -= partial_bytes_;
    partial_bytes_ = 0;
    core_->publish_partial();
    if (core_->connections_.erase(self) > 0) {
      core_->connections_open_.store(core_->connections_.size(), std::memory_order_relaxed);
    }
    boost::system::error_code ignored;
    socket_.close(ignored);
    if (linger_) linger_->cancel();
    if (session_ != nullptr && session_->owner == this) {
      session_->owner = nullptr;
      session_->orphaned = std::chrono::steady_clock::now();
    }
    session_ = nullptr;
  }

 private:
  enum class State { kAwaitHello, kUp, kRejected };

  void read() {
    // Straight into the splitter: no copy between the socket and the frame.
    socket_.async_read_some(boost::asio::buffer(splitter_.prepare(read_chunk_), read_chunk_),
                            [self = shared_from_this()](const boost::system::error_code& ec,
                                                        size_t n) { self->on_read(ec, n); });
  }

  void on_read(const boost::system::error_code& ec, size_t n) {
    if (closed_) return;
    if (ec) return close(hung_up(ec) ? "" : os_error(ec));
    last_read_ = std::chrono::steady_clock::now();
    if (state_ == State::kRejected) return read();  // discard until the client hangs up
    splitter_.commit(n);
    // R-FLOW-4: the reads grow only when the peer fills them.
    if (n == read_chunk_ && read_chunk_ < kReadChunk) read_chunk_ *= 2;
    for (;;) {
      absl::StatusOr<std::optional<v2::RawFrame>> frame = splitter_.next();
      if (!frame.ok()) {
        return protocol_error(absl::StrCat("protocol error: ", frame.status().message()));
      }
      if (!frame->has_value()) break;
      if (!on_frame((*frame)->kind, (*frame)->body)) return;
      if (closed_ || close_after_write_) return;
    }
    account_partial();
    if (closed_) return;  // the partial-frame bound closed this one
    flush();              // one cumulative ACK per batch read (§8 rule 20)
    read();
  }

  // One frame; false when the connection ends (or stops reading).
  bool on_frame(v2::Kind kind, std::string_view body) {
    if (kind == v2::Kind::kData) return on_data(body);
    if (kind == v2::Kind::kHello) {
      absl::StatusOr<v2::Hello> hello = v2::decode_hello(body);
      if (!hello.ok()) {
        if (state_ != State::kAwaitHello) {
          protocol_error("protocol error: a second HELLO on one connection");
        } else {
          reject(v2::RejectCode::kBadHello, std::string(hello.status().message()));
        }
        return false;
      }
      return on_hello(*hello);
    }
    if (kind == v2::Kind::kGoodbye && state_ == State::kUp) {
      // §11: client_closing (and protocol_error, and unknown codes) — the session is over.
      absl::StatusOr<v2::Goodbye> goodbye = v2::decode_goodbye(body);
      forget_session();
      close(goodbye.ok() && goodbye->code == static_cast<uint16_t>(v2::GoodbyeCode::kClientClosing)
                ? ""
                : "the client said goodbye: protocol error");
      return false;
    }
    protocol_error(absl::StrCat("protocol error: unexpected frame kind ", static_cast<int>(kind),
                                state_ == State::kUp ? " from a client" : " before HELLO"));
    return false;
  }

  // R-FLOW-4: counts what the splitter holds of an incomplete frame toward the listener's bound.
  void account_partial() {
    const size_t now = splitter_.buffered();
    core_->partial_total_ = core_->partial_total_ - partial_bytes_ + now;
    partial_bytes_ = now;
    core_->enforce_partial_cap();
  }

  // A protocol error ends the connection. What this connection already enqueued is acked first
  // (one ACK, then close), so the client neither counts it unacked nor retransmits it.
  void protocol_error(std::string why) {
    if (closed_) return;
    if (!ack_pending_ || session_ == nullptr) return close(why);
    log().info(absl::StrCat("channel server ", core_->text_, ": closing connection #", number_,
                            " after acking what it delivered: ", why));
    close_after_write_ = true;
    state_ = State::kRejected;  // read nothing more
    flush();
  }

  // §4.2's server rule.
  bool on_hello(const v2::Hello& hello) {
    if (state_ != State::kAwaitHello) {
      protocol_error("protocol error: a second HELLO on one connection");
      return false;
    }
    if (hello.version != v2::kVersion) {  // §15: the frozen layout, naming both versions
      reject(std::nullopt,
             absl::StrCat("wire version mismatch: the client speaks version ", hello.version,
                          ", this server version ", v2::kVersion, "; upgrade the older side"));
      return false;
    }
    if (hello.auth_mode != 0) {
      reject(v2::RejectCode::kAuthUnsupported,
             absl::StrCat("auth_mode ", hello.auth_mode, " is not supported by this server"));
      return false;
    }
    bool created = false;
    auto it = core_->sessions_.find(hello.client_session);
    if (it == core_->sessions_.end()) {
      if (hello.resuming) {
        reject(v2::RejectCode::kSessionUnknown,
               absl::StrCat("unknown session ", hello.client_session, " (first unacked seq ",
                            hello.first_unacked_seq,
                            "): this server restarted or forgot it; resume on a new session"));
        return false;
      }
      auto session = std::make_unique<Session>();
      session->decoder.emplace(core_->dict_limits());
      it = core_->sessions_.emplace(hello.client_session, std::move(session)).first;
      created = true;
      if (log().enabled(runtime::LogLevel::kDebug)) {
        log().debug(absl::StrCat("channel server ", core_->text_, ": new session ",
                                 hello.client_session, " on connection #", number_));
      }
    } else if (!hello.resuming) {
      reject(v2::RejectCode::kBadHello,
             absl::StrCat("session ", hello.client_session,
                          " exists: a new session (not resuming) needs a new id"));
      return false;
    } else if (it->second->next_expected < hello.first_unacked_seq) {
      reject(v2::RejectCode::kSessionOutOfSync,
             absl::StrCat("session ", hello.client_session, " out of sync: the client's first "
                          "unacked seq ", hello.first_unacked_seq, " is beyond this server's ",
                          it->second->next_expected, "; resume on a new session"));
      return false;
    }
    Session* session = it->second.get();
    if (session->owner != nullptr && session->owner != this) {
      session->owner->close("its session reconnected on a new connection");
    }
    session->owner = this;
    session_ = session;
    session_id_ = hello.client_session;
    if (created) {  // the new session is owned: only others can be forgotten for the bound
      if (core_->sessions_.size() > core_->options_.max_sessions) core_->bound_sessions();
      core_->sessions_open_.store(core_->sessions_.size(), std::memory_order_relaxed);
    }
    state_ = State::kUp;
    splitter_.set_limit(core_->max_frame_);
    v2::append(out_, core_->welcome(session->next_expected));
    flush();
    return true;
  }

  // §8 rules 17–19: deliver seq == next, drop seq < next, a gap is a stream error.
  bool on_data(std::string_view body) {
    if (state_ != State::kUp) {
      close("protocol error: DATA before HELLO");
      return false;
    }
    uint64_t seq = 0;
    if (body.size() < sizeof(seq)) {
      protocol_error("protocol error: a DATA frame shorter than its seq");
      return false;
    }
    std::memcpy(&seq, body.data(), sizeof(seq));
    if (seq < session_->next_expected) return true;  // a retransmit we already enqueued
    if (seq > session_->next_expected) {
      protocol_error(absl::StrCat("protocol error: DATA seq ", seq, " skips ahead of ",
                                  session_->next_expected));
      return false;
    }
    absl::StatusOr<EnvelopePtr> env = session_->decoder->decode(body, seq);
    if (!env.ok()) {
      protocol_error(absl::StrCat("protocol error: DATA seq ", seq, ": ", env.status().message()));
      return false;
    }
    ++session_->next_expected;
    ack_pending_ = true;
    core_->deliver_to_.post(*std::move(env), core_->ret_);
    return true;
  }

  // §5 rule 10: the client ended the session; its dictionary and counters go.
  void forget_session() {
    if (session_ == nullptr) return;
    session_ = nullptr;
    core_->sessions_.erase(session_id_);
    core_->sessions_open_.store(core_->sessions_.size(), std::memory_order_relaxed);
  }

  // REJECT (structured with a code; the frozen layout without one), then half-close and linger.
  void reject(std::optional<v2::RejectCode> code, const std::string& reason) {
    log().warn(absl::StrCat("channel server ", core_->text_, ": rejecting connection #", number_,
                            ": ", reason));
    state_ = State::kRejected;
    v2::Reject r;
    if (code) r.code = static_cast<uint16_t>(*code);
    r.text = reason;
    v2::append(out_, r);
    shutdown_after_write_ = true;
    flush();
    if (!closed_) read();
  }

  void flush() {
    if (writing_ || closed_) return;
    if (ack_pending_ && session_ != nullptr) {
      v2::append(out_, v2::Ack{session_->next_expected, {}});
      ack_pending_ = false;
    }
    if (out_.empty()) return;
    in_flight_.swap(out_);
    out_.clear();
    writing_ = true;
    boost::asio::async_write(socket_, boost::asio::buffer(in_flight_),
                             [self = shared_from_this()](const boost::system::error_code& ec,
                                                         size_t) { self->on_written(ec); });
  }

  void on_written(const boost::system::error_code& ec) {
    writing_ = false;
    in_flight_.clear();
    if (closed_) return;
    if (ec) return close(hung_up(ec) ? "" : os_error(ec));
    if (close_after_write_ && out_.empty()) return close("");
    if (shutdown_after_write_ && out_.empty()) {
      shutdown_after_write_ = false;
      boost::system::error_code ignored;
      socket_.shutdown(Socket::shutdown_send, ignored);
      linger_ = std::make_unique<boost::asio::steady_timer>(core_->io_.context(), kRejectLinger);
      linger_->async_wait([self = shared_from_this()](const boost::system::error_code& e) {
        if (!e) self->close("");
      });
      return;
    }
    flush();
  }

  std::shared_ptr<ServerCore> core_;
  Socket socket_;
  const uint64_t number_;
  v2::FrameSplitter splitter_{v2::kHandshakeFrameLimit};
  size_t read_chunk_ = kFirstReadChunk;  // what the next read asks for
  std::string out_;        // frames waiting for the next write
  std::string in_flight_;  // the write in flight
  State state_ = State::kAwaitHello;
  const std::chrono::steady_clock::time_point accepted_at_;
  std::chrono::steady_clock::time_point last_read_;
  size_t partial_bytes_ = 0;  // counted in core_->partial_total_
  Session* session_ = nullptr;
  uint64_t session_id_ = 0;
  bool writing_ = false;
  bool ack_pending_ = false;        // envelopes enqueued since the last ACK
  bool close_after_write_ = false;  // a protocol error: close once the final ACK is written
  bool shutdown_after_write_ = false;
  bool closed_ = false;
  std::unique_ptr<boost::asio::steady_timer> linger_;
};
absl::Status ServerCore::listen(const Endpoint& endpoint) {
  boost::system::error_code ec;
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec && local_.transport() == ChannelAddr::Transport::kTcp) {
    acceptor_.set_option(boost::asio::socket_base::reuse_address(true), ec);
  }
  if (!ec) set_cloexec(acceptor_.native_handle());
  if (!ec) acceptor_.bind(endpoint, ec);
  // R-SEC-3: a socket file gets an explicit mode, not the umask's: only its user may connect.
  if (!ec && local_.transport() == ChannelAddr::Transport::kIpc && !local_.is_abstract() &&
      ::chmod(std::string(local_.path()).c_str(), 0600) != 0) {
    ec = boost::system::error_code(errno, boost::system::system_category());
  }
  if (!ec) acceptor_.listen(boost::asio::socket_base::max_listen_connections, ec);
  if (!ec) acceptor_.non_blocking(true, ec);  // on_out_of_fds accepts with ::accept4
  if (ec) return absl::UnavailableError(absl::StrCat("serve ", text_, ": ", os_error(ec)));
  return absl::OkStatus();
}

void ServerCore::accept() {
  if (stopped_) return;
  acceptor_.async_accept(
      [self = shared_from_this()](const boost::system::error_code& ec, Socket socket) {
        if (self->stopped_ || ec == boost::asio::error::operation_aborted) return;
        if (out_of_fds(ec)) return self->on_out_of_fds(ec);
        if (ec) {  // log, and try again shortly
          self->accept_errors_.log(
              log(), runtime::LogLevel::kError,
              absl::StrCat("channel server ", self->text_, ": accept: ", os_error(ec)));
          self->retry_timer_.expires_after(kAcceptRetry);
          self->retry_timer_.async_wait([self](const boost::system::error_code& e) {
            if (!e) self->accept();
          });
          return;
        }
        self->on_accepted(std::move(socket));
        self->accept();
      });
}

void ServerCore::on_accepted(Socket socket) {
  if (connections_.size() >= options_.max_connections) {  // R-FLOW-4: refuse, keep serving
    refused_over_cap_.fetch_add(1, std::memory_order_relaxed);
    boost::system::error_code ignored;
    socket.close(ignored);
    log_bounded(absl::StrCat("refused a connection: ", connections_.size(),
                             " are open, the most ChannelOptions::max_connections allows"));
    return;
  }
  set_cloexec(socket.native_handle());
  tune(socket, local_);
  if (log().enabled(runtime::LogLevel::kDebug)) {
    log().debug(absl::StrCat("channel server ", text_, ": accepted connection #",
                             connections_accepted_ + 1));
  }
  auto connection =
      std::make_shared<Connection>(shared_from_this(), std::move(socket), ++connections_accepted_);
  connections_.insert(connection);
  connections_open_.store(connections_.size(), std::memory_order_relaxed);
  connection->start();
}

// R-FLOW-4: with no descriptor for a new connection, the pending ones are accepted on the
// reserved descriptor and closed at once (their clients see a close, not a hang), and the
// listener waits for the next connection instead of retrying the accept: a full fd table
// neither spins this thread nor stops the listener.
void ServerCore::on_out_of_fds(const boost::system::error_code& ec) {
  out_of_fds_.fetch_add(1, std::memory_order_relaxed);
  uint64_t shed = 0;
  if (reserve_fd_ >= 0) {
    ::close(reserve_fd_);
    for (;;) {
      const int fd =
          ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) break;  // EAGAIN: nothing more pending
      shed_out_of_fds_.fetch_add(1, std::memory_order_relaxed);
      ::close(fd);
      ++shed;
    }
    reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  accept_errors_.log(
      log(), runtime::LogLevel::kError,
      absl::StrCat("channel server ", text_, ": accept: ", os_error(ec), "; closed ", shed,
                   " pending connection(s) at once and keep listening; ", connections_.size(),
                   " connection(s) open here; raise the fd limit (ulimit -n) or lower "
                   "ChannelOptions::max_connections"));
  auto self = shared_from_this();
  if (reserve_fd_ < 0) {  // nothing to shed with: try again shortly
    reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    retry_timer_.expires_after(kAcceptRetry);
    retry_timer_.async_wait([self](const boost::system::error_code& e) {
      if (!e) self->accept();
    });
    return;
  }
  acceptor_.async_wait(Acceptor::wait_read, [self](const boost::system::error_code& e) {
    if (e == boost::asio::error::operation_aborted || self->stopped_) return;
    self->accept();
  });
}

void ServerCore::arm_sweep() {
  if (stopped_) return;
  const auto shorter = to_chrono(std::min(
      {options_.handshake_timeout, options_.partial_frame_timeout, options_.session_linger}));
  const auto period = std::clamp<std::chrono::steady_clock::duration>(shorter / 4, kMinSweepPeriod,
                                                                      kMaxSweepPeriod);
  sweep_timer_.expires_after(period);
  sweep_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
    if (e || self->stopped_) return;
    self->sweep();
    self->arm_sweep();
  });
}

void ServerCore::sweep() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<Connection>> all(connections_.begin(), connections_.end());
  for (const auto& connection : all) connection->check_timeouts(now);
  bound_sessions();
}

void ServerCore::bound_sessions() {
  const auto now = std::chrono::steady_clock::now();
  const auto linger = to_chrono(options_.session_linger);
  std::vector<std::pair<std::chrono::steady_clock::time_point, uint64_t>> orphans;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    const Session& s = *it->second;
    if (s.owner == nullptr && now - s.orphaned >= linger) {
      sessions_.erase(it++);
      sessions_forgotten_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (s.owner == nullptr) orphans.emplace_back(s.orphaned, it->first);
    ++it;
  }
  if (sessions_.size() > options_.max_sessions) {
    std::sort(orphans.begin(), orphans.end());
    for (const auto& [when, id] : orphans) {
      if (sessions_.size() <= options_.max_sessions) break;
      sessions_.erase(id);
      sessions_forgotten_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  sessions_open_.store(sessions_.size(), std::memory_order_relaxed);
}

void ServerCore::enforce_partial_cap() {
  while (partial_total_ > partial_cap_) {
    Connection* victim = nullptr;
    for (const auto& c : connections_) {
      if (c->partial_bytes() == 0) continue;
      if (victim == nullptr || c->partial_bytes() > victim->partial_bytes() ||
          (c->partial_bytes() == victim->partial_bytes() && c->number() > victim->number())) {
        victim = c.get();
      }
    }
    if (victim == nullptr) break;
    closed_over_partial_bytes_.fetch_add(1, std::memory_order_relaxed);
    victim->close_bounded(absl::StrCat(
        "its ", victim->partial_bytes(), "-byte partial frame is the largest, and partial frames ",
        "hold ", partial_total_, " bytes here, over ChannelOptions::max_partial_frame_bytes (",
        partial_cap_, ")"));
  }
  publish_partial();
}

void ServerCore::publish_partial() {
  partial_published_.store(partial_total_, std::memory_order_relaxed);
  if (partial_total_ > partial_peak_.load(std::memory_order_relaxed)) {
    partial_peak_.store(partial_total_, std::memory_order_relaxed);
  }
}

void ServerCore::log_bounded(std::string_view what) {
  bounded_.log(log(), runtime::LogLevel::kWarn,
               absl::StrCat("channel server ", text_, ": ", sv(what), " (R-FLOW-4)"));
}

ChannelServer::Stats ServerCore::stats() const {
  ChannelServer::Stats s;
  s.connections = connections_open_.load(std::memory_order_relaxed);
  s.partial_frame_bytes = partial_published_.load(std::memory_order_relaxed);
  s.partial_frame_bytes_peak = partial_peak_.load(std::memory_order_relaxed);
  s.refused_over_cap = refused_over_cap_.load(std::memory_order_relaxed);
  s.closed_handshake_timeout = closed_handshake_timeout_.load(std::memory_order_relaxed);
  s.closed_partial_frame_timeout = closed_partial_frame_timeout_.load(std::memory_order_relaxed);
  s.closed_over_partial_bytes = closed_over_partial_bytes_.load(std::memory_order_relaxed);
  s.out_of_fds = out_of_fds_.load(std::memory_order_relaxed);
  s.shed_out_of_fds = shed_out_of_fds_.load(std::memory_order_relaxed);
  s.sessions = sessions_open_.load(std::memory_order_relaxed);
  s.sessions_forgotten = sessions_forgotten_.load(std::memory_order_relaxed);
  return s;
}

void ServerCore::drop_connections() {
  absl::flat_hash_set<std::shared_ptr<Connection>> connections;
  connections.swap(connections_);
  for (const auto& connection : connections) connection->close("");
  connections_open_.store(connections_.size(), std::memory_order_relaxed);
}

void ServerCore::stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  sweep_timer_.cancel();
  retry_timer_.cancel();
  drop_connections();
  if (!unlink_path_.empty()) ::unlink(unlink_path_.c_str());
}

// An ipc path may hold the socket file of a server that died; remove it if nobody listens.
absl::Status prepare_ipc_path(IoThread& io, const ChannelAddr& addr, const Endpoint& endpoint) {
  const std::string path(addr.path());
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("serve ", addr.to_string(),
                     ": the path exists and is not a socket; remove it or choose another path"));
  }
  Socket probe(io.context());
  if (connect_blocking(probe, {endpoint}, absl::Seconds(1)).ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("serve ", addr.to_string(),
                     ": another process is listening there; stop it or choose another path"));
  }
  ::unlink(path.c_str());  // stale: its server is gone
  return absl::OkStatus();
}

class StreamChannelServer final : public ChannelServer {
 public:
  explicit StreamChannelServer(std::shared_ptr<ServerCore> core, IoThread& io)
      : core_(std::move(core)), io_(io) {}
  ~StreamChannelServer() override {
    run_in_io_thread(io_, [core = core_.get()] { core->stop(); });
  }

  const ChannelAddr& local_addr() const override { return core_->local_addr(); }
  Stats stats() const override { return core_->stats(); }
  void drop_connections() override {
    run_in_io_thread(io_, [core = core_.get()] { core->drop_connections(); });
  }

 private:
  std::shared_ptr<ServerCore> core_;
  IoThread& io_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ChannelServer>> serve_stream(IoThread& io, ChannelAddr addr,
                                                            runtime::MailboxSender& deliver_to,
                                                            runtime::ReturnHandle& ret,
                                                            ChannelOptions options) {
  absl::StatusOr<std::vector<Endpoint>> endpoints = endpoints_of(addr, /*passive=*/true);
  if (!endpoints.ok()) {
    return absl::UnavailableError(
        absl::StrCat("serve ", addr.to_string(), ": ", endpoints.status().message()));
  }
  const Endpoint& endpoint = endpoints->front();
  const bool ipc_path = addr.transport() == ChannelAddr::Transport::kIpc && !addr.is_abstract();
  if (ipc_path) {
    if (absl::Status s = prepare_ipc_path(io, addr, endpoint); !s.ok()) return s;
  }
  auto core = std::make_shared<ServerCore>(io, addr, deliver_to, ret, options);
  if (absl::Status s = core->listen(endpoint); !s.ok()) return s;
  if (ipc_path) core->set_unlink_path(std::string(addr.path()));
  if (addr.transport() == ChannelAddr::Transport::kTcp && addr.port() == 0) {
    boost::system::error_code ec;
    Endpoint bound = core->bound_endpoint(ec);
    absl::StatusOr<ChannelAddr> actual = ChannelAddr::tcp(addr.host(), tcp_port(bound));
    if (!actual.ok()) return actual.status();
    core->set_local_addr(*std::move(actual));
  }
  core->start();
  return std::unique_ptr<ChannelServer>(new StreamChannelServer(std::move(core), io));
}

}  // namespace postal::routing::internal
