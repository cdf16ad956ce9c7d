// The ipc/tcp ChannelServer: accept, handshake, deliver in seq order, ack cumulatively
// (R-CHAN-1, R-CHAN-2; channel_server.h has the contract, docs/wire.md the protocol, version 2).
// This file: ServerCore's functions (listen, accept, the listener bounds, the session table,
// stop) and `serve_stream`; stream_server_core.h declares ServerCore, stream_connection.h is one
// connection.
//
// Everything here runs on the I/O thread, except `serve` (which binds and listens on the
// caller's thread before the I/O thread sees the acceptor) and the owner's destructor and
// drop_connections (which run their work on the I/O thread and wait for it).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stream_connection.h"

namespace postal::routing::internal {
namespace stream_server {

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
  if (stopped_ || !acceptor_.is_open()) return;  // not open: connections come through adopt
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

// R-SEC-1: an abstract unix socket has no file mode, so anyone on the host may connect to it;
// the kernel's record of the peer's credentials (SO_PEERCRED, taken at connect) decides instead.
bool ServerCore::peer_allowed(Socket& socket) {
  if (local_.transport() != ChannelAddr::Transport::kIpc) return true;
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return false;  // no credentials: refuse rather than guess
  }
  const std::vector<uint32_t>& allowed = options_.allowed_uids;
  const bool ok = allowed.empty()
                      ? cred.uid == ::geteuid()
                      : std::find(allowed.begin(), allowed.end(), cred.uid) != allowed.end();
  if (!ok) {
    refused_peer_uid_.fetch_add(1, std::memory_order_relaxed);
    refusals_.log(log(), runtime::LogLevel::kWarn,
                  absl::StrCat("channel server ", text_, ": refused a connection from uid ",
                               cred.uid, " (pid ", cred.pid, "): only ",
                               allowed.empty() ? absl::StrCat("this server's uid ", ::geteuid())
                                               : "ChannelOptions::allowed_uids",
                               " may connect (R-SEC-1)"));
  }
  return ok;
}

void ServerCore::on_accepted(Socket socket, std::shared_ptr<ByteSink> sink) {
  if (connections_.size() >= options_.max_connections) {  // R-FLOW-4: refuse, keep serving
    refused_over_cap_.fetch_add(1, std::memory_order_relaxed);
    boost::system::error_code ignored;
    socket.close(ignored);
    log_bounded(absl::StrCat("refused a connection: ", connections_.size(),
                             " are open, the most ChannelOptions::max_connections allows"));
    return;
  }
  set_cloexec(socket.native_handle());
  if (!peer_allowed(socket)) {  // before a byte is read
    boost::system::error_code ignored;
    socket.close(ignored);
    return;
  }
  tune(socket, local_);
  if (log().enabled(runtime::LogLevel::kDebug)) {
    log().debug(absl::StrCat("channel server ", text_, ": accepted connection #",
                             connections_accepted_.load(std::memory_order_relaxed) + 1));
  }
  // R-SEC-1: what this peer may speak, by its address (tls_policy.h).
  const bool tcp = local_.transport() == ChannelAddr::Transport::kTcp;
  boost::system::error_code ec;
  const Endpoint peer = socket.remote_endpoint(ec);
  const TlsUse use = tcp && !ec ? server_tls_use(options_, tls_ctx_ != nullptr, peer)
                                : (tls_ctx_ != nullptr && tcp ? TlsUse::kMust : TlsUse::kNever);
  auto connection = std::make_shared<Connection>(
      shared_from_this(), std::move(socket),
      connections_accepted_.fetch_add(1, std::memory_order_relaxed) + 1,
      ConnectionWire(tcp, use, tls_ctx_), std::move(sink));
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
  const auto shorter =
      to_chrono(std::min({options_.handshake_timeout, options_.partial_frame_timeout,
                          options_.session_linger, options_.transfer_idle_timeout}));
  const auto period = std::clamp<std::chrono::steady_clock::duration>(shorter / 4, kMinSweepPeriod,
                                                                      kMaxSweepPeriod);
  sweep_timer_.expires_after(period);
  sweep_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
    if (e || self->stopped_) return;
    self->sweep();
    self->arm_sweep();
  });
}

void ServerCore::arm_heartbeat() {
  if (stopped_ || offered_features() == 0) return;
  heartbeat_timer_.expires_after(heartbeat_interval());
  heartbeat_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
    if (e || self->stopped_) return;
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<Connection>> all(self->connections_.begin(),
                                                 self->connections_.end());
    for (const auto& connection : all) connection->heartbeat(now);
    self->arm_heartbeat();
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
  // A session holding partial payloads goes sooner: its client returns them (§9.5 rule 29).
  const auto transfer_linger = std::min(linger, to_chrono(options_.transfer_idle_timeout));
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    const Session& s = *it->second;
    if (s.owner == nullptr &&
        now - s.orphaned >= (s.transfers.empty() ? linger : transfer_linger)) {
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
  s.closed_heartbeat_timeout = closed_heartbeat_timeout_.load(std::memory_order_relaxed);
  s.refused_unauthenticated = refused_unauthenticated_.load(std::memory_order_relaxed);
  s.auth_failed = auth_failed_.load(std::memory_order_relaxed);
  s.refused_peer_uid = refused_peer_uid_.load(std::memory_order_relaxed);
  s.connections_accepted = connections_accepted_.load(std::memory_order_relaxed);
  s.credit_pauses = credit_pauses_.load(std::memory_order_relaxed);
  s.credit_opens = credit_opens_.load(std::memory_order_relaxed);
  s.tls_failed = tls_failed_.load(std::memory_order_relaxed);
  s.refused_plaintext = refused_plaintext_.load(std::memory_order_relaxed);
  return s;
}

std::function<void()> ServerCore::room_waker(uint64_t session, const runtime::ActorId& actor) {
  // Runs on the thread that freed the room (a worker); the I/O thread does the rest. A server
  // gone by then has nothing to open.
  return [weak = weak_from_this(), session, actor] {
    if (std::shared_ptr<ServerCore> core = weak.lock()) {
      boost::asio::post(core->io_.context(),
                        [core, session, actor] { core->room_again(session, actor); });
    }
  };
}

void ServerCore::room_again(uint64_t session, const runtime::ActorId& actor) {
  auto it = sessions_.find(session);
  if (it == sessions_.end() || !it->second->credit.open(actor)) return;
  credit_opens_.fetch_add(1, std::memory_order_relaxed);
  if (Connection* owner = it->second->owner) {
    owner->send_open(actor);
  } else {
    it->second->credit.open_later(actor);  // said after the next WELCOME
  }
}

void ServerCore::drop_connections() {
  absl::flat_hash_set<std::shared_ptr<Connection>> connections;
  connections.swap(connections_);
  for (const auto& connection : connections) connection->close("");
  connections_open_.store(connections_.size(), std::memory_order_relaxed);
}

void ServerCore::watch(PayloadStream& stream, uint64_t session, uint64_t seq) {
  stream.set_producer_wake([weak = weak_from_this(), session, seq] {
    if (std::shared_ptr<ServerCore> core = weak.lock()) {
      boost::asio::post(core->io_.context(),
                        [core, session, seq] { core->stream_moved(session, seq); });
    }
  });
}

void ServerCore::stream_moved(uint64_t session, uint64_t seq) {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  Session& s = *it->second;
  if (s.owner != nullptr) return s.owner->stream_moved(seq);
  // Not connected: the news waits for the session's next WELCOME (§9.5).
  auto t = s.transfers.find(seq);
  if (t == s.transfers.end() || !t->second.stream) return;
  t->second.advance(welcome(0).transfer_window);
  if (t->second.taken == t->second.payload_len) {
    t->second.stream->taken_whole();
    s.transfers.erase(t);
  }
}

void ServerCore::stop(bool goodbye) {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  sweep_timer_.cancel();
  retry_timer_.cancel();
  heartbeat_timer_.cancel();
  // R-CHAN-2: this handler runs between two reads, so no frame is being processed; from here
  // on none is (every connection stops reading frames), and each GOODBYE's ACK is final.
  std::vector<std::shared_ptr<Connection>> all(connections_.begin(), connections_.end());
  for (const auto& connection : all) {
    if (goodbye) {
      connection->say_goodbye_stopping();
    } else {
      connection->close("");
    }
  }
  if (!goodbye) {
    sessions_.clear();
    sessions_open_.store(0, std::memory_order_relaxed);
  }
  note_drained();
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
    // R-CHAN-2: give each client the time to read its GOODBYE and hang up (bounded by the
    // connections' own linger), then close whatever is left. On the I/O thread itself nobody
    // could answer meanwhile: the goodbyes are best effort there.
    if (!io_.in_io_thread()) {
      core_->wait_drained(absl::FromChrono(kStopLinger) + absl::Milliseconds(500));
    }
    run_in_io_thread(io_, [core = core_.get()] { core->drop_connections(); });
  }

  const ChannelAddr& local_addr() const override { return core_->local_addr(); }
  Stats stats() const override { return core_->stats(); }
  void drop_connections() override {
    run_in_io_thread(io_, [core = core_.get()] { core->drop_connections(); });
  }
  void vanish() override {
    run_in_io_thread(io_, [core = core_.get()] { core->stop(/*goodbye=*/false); });
  }

 private:
  std::shared_ptr<ServerCore> core_;
  IoThread& io_;
};

}  // namespace stream_server

absl::StatusOr<std::unique_ptr<ChannelServer>> serve_stream(IoThread& io, runtime::ChannelAddr addr,
                                                            runtime::MailboxSender& deliver_to,
                                                            runtime::ReturnHandle& ret,
                                                            ChannelOptions options,
                                                            SinkAdopter* adopt) {
  using runtime::ChannelAddr;
  using stream_server::ServerCore;
  if (adopt != nullptr) {  // nothing listens: a nats:// tunnel hands the connections over
    if (options.key == nullptr) auth::note_unauthenticated("channel server");
    auto core = std::make_shared<ServerCore>(io, addr, deliver_to, ret, options);
    *adopt = [weak = std::weak_ptr<ServerCore>(core)](SinkLink link) {
      if (const std::shared_ptr<ServerCore> c = weak.lock()) return c->adopt(std::move(link));
      ::close(link.fd);
    };
    core->start();
    return std::unique_ptr<ChannelServer>(
        new stream_server::StreamChannelServer(std::move(core), io));
  }
  absl::StatusOr<std::vector<Endpoint>> endpoints = endpoints_of(addr, /*passive=*/true);
  if (!endpoints.ok()) {
    return absl::UnavailableError(
        absl::StrCat("serve ", addr.to_string(), ": ", endpoints.status().message()));
  }
  const Endpoint& endpoint = endpoints->front();
  const bool ipc_path = addr.transport() == ChannelAddr::Transport::kIpc && !addr.is_abstract();
  if (ipc_path) {
    if (absl::Status s = stream_server::prepare_ipc_path(io, addr, endpoint); !s.ok()) return s;
  }
  if (options.key == nullptr) auth::note_unauthenticated("channel server");
  // R-SEC-1: the TLS context, or the error of a mode that cannot work (tls on without a key).
  absl::StatusOr<std::shared_ptr<const TlsContext>> tls =
      tls_context_for(options, addr, TlsContext::Role::kServer);
  if (!tls.ok()) return tls.status();
  auto core = std::make_shared<ServerCore>(io, addr, deliver_to, ret, options);
  core->set_tls(*std::move(tls));
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
  return std::unique_ptr<ChannelServer>(
      new stream_server::StreamChannelServer(std::move(core), io));
}

}  // namespace postal::routing::internal
