// The ipc/tcp ChannelServer: accept, handshake, deliver in seq order, ack cumulatively
// (R-CHAN-1, R-CHAN-2; channel_server.h has the contract, docs/wire-v1.md the protocol).
//
// Everything here runs on the I/O thread, except `serve` (which binds and listens on the
// caller's thread before the I/O thread sees the acceptor) and the owner's destructor and
// drop_connections (which run their work on the I/O thread and wait for it).
#include <sys/stat.h>
#include <unistd.h>

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
#include "postal/routing/frame.h"
#include "postal/runtime/log_rate_limit.h"
#include "postal/wire/absl_compat.h"
#include "socket_util.h"
#include "transports.h"

namespace postal::routing::internal {
namespace {

using runtime::ChannelAddr;
using runtime::EnvelopePtr;

constexpr size_t kReadChunk = 64 << 10;
// After a REJECT the server half-closes and waits this long for the client to hang up, so the
// REJECT is read before the connection is reset.
constexpr auto kRejectLinger = std::chrono::seconds(5);

class Connection;

// A client that went away (closed, reset, or gone mid-write) is routine, not worth a log line.
bool hung_up(const boost::system::error_code& ec) {
  return ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset ||
         ec == boost::asio::error::broken_pipe;
}

struct Session {
  uint64_t next_expected = 0;   // R-CHAN-1: every seq below was enqueued here
  Connection* owner = nullptr;  // the connection currently carrying this session
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
        acceptor_(io.context()) {}

  absl::Status listen(const Endpoint& endpoint);
  void start() {
    boost::asio::post(io_.context(), [self = shared_from_this()] { self->accept(); });
  }
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

  IoThread& io_;
  ChannelAddr local_;
  std::string text_;
  runtime::LogRateLimit accept_errors_{absl::Seconds(1)};  // an fd shortage repeats every 100 ms
  runtime::MailboxSender& deliver_to_;
  runtime::ReturnHandle& ret_;
  const ChannelOptions options_;
  Acceptor acceptor_;
  std::string unlink_path_;  // ipc path to remove on stop

  // I/O thread only.
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
        decoder_(core_->options_.max_frame_bytes),
        read_buf_(kReadChunk) {}

  void start() { read(); }

  // Closes the connection (idempotent); logs `why` unless it is empty.
  void close(std::string_view why) {
    if (closed_) return;
    closed_ = true;
    if (!why.empty()) {
      log().info(absl::StrCat("channel server ", core_->text_, ": closing connection #", number_,
                            ": ", sv(why)));
    }
    boost::system::error_code ignored;
    socket_.close(ignored);
    if (linger_) linger_->cancel();
    if (session_ != nullptr && session_->owner == this) session_->owner = nullptr;
    session_ = nullptr;
    core_->connections_.erase(shared_from_this());
  }

 private:
  enum class State { kAwaitHello, kUp, kRejected };

  void read() {
    socket_.async_read_some(boost::asio::buffer(read_buf_),
                            [self = shared_from_this()](const boost::system::error_code& ec,
                                                        size_t n) { self->on_read(ec, n); });
  }

  void on_read(const boost::system::error_code& ec, size_t n) {
    if (closed_) return;
    if (ec) return close(hung_up(ec) ? "" : os_error(ec));
    if (state_ == State::kRejected) return read();  // discard until the client hangs up
    decoder_.feed(std::string_view(read_buf_.data(), n));
    for (;;) {
      absl::StatusOr<std::optional<Frame>> frame = decoder_.next();
      if (!frame.ok()) {
        if (absl::IsFailedPrecondition(frame.status()) && state_ == State::kAwaitHello) {
          return reject(
              std::string(frame.status().message()));  // another wire version: tell it why
        }
        return protocol_error(absl::StrCat("protocol error: ", frame.status().message()));
      }
      if (!frame->has_value()) break;
      if (auto* data = std::get_if<DataFrame>(&**frame)) {
        if (!on_data(*data)) return;
      } else if (auto* hello = std::get_if<HelloFrame>(&**frame)) {
        if (!on_hello(*hello)) return;
      } else {
        return protocol_error(absl::StrCat("protocol error: unexpected ",
                                           sv(to_string(kind_of(**frame))), " from a client"));
      }
      if (closed_ || close_after_write_) return;
    }
    flush();  // one cumulative ACK per batch read (on_data marked it pending)
    read();
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

  bool on_hello(const HelloFrame& hello) {
    if (state_ != State::kAwaitHello) {
      close("protocol error: a second HELLO on one connection");
      return false;
    }
    auto it = core_->sessions_.find(hello.client_session);
    if (it == core_->sessions_.end()) {
      if (hello.first_unacked_seq != 0) {
        reject(absl::StrCat("unknown session ", hello.client_session, " (first unacked seq ",
                            hello.first_unacked_seq,
                            "): this server restarted and lost its sessions; redial"));
        return false;
      }
      it = core_->sessions_.emplace(hello.client_session, std::make_unique<Session>()).first;
      if (log().enabled(runtime::LogLevel::kDebug)) {
        log().debug(absl::StrCat("channel server ", core_->text_, ": new session ",
                                 hello.client_session, " on connection #", number_));
      }
    } else if (it->second->next_expected < hello.first_unacked_seq) {
      reject(absl::StrCat("session ", hello.client_session,
                          " out of sync: the client's first "
                          "unacked seq ",
                          hello.first_unacked_seq, " is beyond this server's ",
                          it->second->next_expected, "; redial"));
      return false;
    }
    Session* session = it->second.get();
    if (session->owner != nullptr && session->owner != this) {
      session->owner->close("its session reconnected on a new connection");
    }
    session->owner = this;
    session_ = session;
    state_ = State::kUp;
    append_welcome(out_, WelcomeFrame{kWireVersion, session->next_expected});
    flush();
    return true;
  }

  // R-CHAN-1: deliver seq == next, drop seq < next, reject seq > next.
  bool on_data(const DataFrame& data) {
    if (state_ != State::kUp) {
      close("protocol error: DATA before HELLO");
      return false;
    }
    if (data.seq < session_->next_expected) return true;  // a retransmit we already enqueued
    if (data.seq > session_->next_expected) {
      protocol_error(absl::StrCat("protocol error: DATA seq ", data.seq, " skips ahead of ",
                                  session_->next_expected));
      return false;
    }
    absl::StatusOr<EnvelopePtr> env = decode_envelope(data.envelope);
    if (!env.ok()) {
      protocol_error(
          absl::StrCat("protocol error: DATA seq ", data.seq, ": ", env.status().message()));
      return false;
    }
    ++session_->next_expected;
    ack_pending_ = true;
    core_->deliver_to_.post(*std::move(env), core_->ret_);
    return true;
  }

  void reject(const std::string& reason) {
    log().warn(absl::StrCat("channel server ", core_->text_, ": rejecting connection #", number_,
                          ": ", reason));
    state_ = State::kRejected;
    append_reject(out_, RejectFrame{kWireVersion, reason});
    shutdown_after_write_ = true;
    flush();
    if (!closed_) read();
  }

  void flush() {
    if (writing_ || closed_) return;
    if (ack_pending_ && session_ != nullptr) {
      append_ack(out_, AckFrame{session_->next_expected});
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
  FrameDecoder decoder_;
  std::vector<char> read_buf_;
  std::string out_;        // frames waiting for the next write
  std::string in_flight_;  // the write in flight
  State state_ = State::kAwaitHello;
  Session* session_ = nullptr;
  bool writing_ = false;
  bool ack_pending_ = false;       // envelopes enqueued since the last ACK
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
  if (ec) return absl::UnavailableError(absl::StrCat("serve ", text_, ": ", os_error(ec)));
  return absl::OkStatus();
}

void ServerCore::accept() {
  if (stopped_) return;
  acceptor_.async_accept(
      [self = shared_from_this()](const boost::system::error_code& ec, Socket socket) {
        if (self->stopped_ || ec == boost::asio::error::operation_aborted) return;
        if (ec) {  // e.g. out of file descriptors: log, and try again shortly
          self->accept_errors_.log(log(), runtime::LogLevel::kError,
                                   absl::StrCat("channel server ", self->text_, ": accept: ",
                                                os_error(ec)));
          auto timer = std::make_shared<boost::asio::steady_timer>(self->io_.context(),
                                                                   std::chrono::milliseconds(100));
          timer->async_wait([self, timer](const boost::system::error_code&) { self->accept(); });
          return;
        }
        set_cloexec(socket.native_handle());
        tune(socket, self->local_);
        if (log().enabled(runtime::LogLevel::kDebug)) {
          log().debug(absl::StrCat("channel server ", self->text_, ": accepted connection #",
                                   self->connections_accepted_ + 1));
        }
        auto connection =
            std::make_shared<Connection>(self, std::move(socket), ++self->connections_accepted_);
        self->connections_.insert(connection);
        connection->start();
        self->accept();
      });
}

void ServerCore::drop_connections() {
  absl::flat_hash_set<std::shared_ptr<Connection>> connections;
  connections.swap(connections_);
  for (const auto& connection : connections) connection->close("");
}

void ServerCore::stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
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
