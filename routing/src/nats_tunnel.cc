// The tunnel of nats:// channels (nats_tunnel.h): virtual connections, and the server and client
// ends that make them.
#include "nats_tunnel.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <nats/nats.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "nats_conn.h"
#include "nats_tunnel_conn.h"
#include "postal/wire/absl_compat.h"
#include "socket_util.h"

namespace postal::routing::internal::nats_tunnel {
namespace {

int connect_unix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Answers a PROBE: OPENED while connection `id` lives here, FIN when it does not.
void answer_probe(NatsConn& nats, Conns& conns, natsMsg* msg, const std::string& id) {
  const char* reply = natsMsg_GetReply(msg);
  if (reply == nullptr) return;
  std::shared_ptr<Conn> c = conns.find(id);
  nats.respond(reply, message(c != nullptr && !c->done() ? kOpened : kFin, 0));
}

// A request of one tunnel message; the kind of the answer, or nullopt (then `*status` says why:
// NATS_NO_RESPONDERS, a timeout, ...) when none came or it was not a tunnel message.
std::optional<Kind> ask(NatsConn& nats, const std::string& subject, const std::string& m,
                        absl::Duration timeout, natsStatus* status) {
  natsMsg* reply = nullptr;
  *status = natsConnection_Request(&reply, nats.nc(), subject.c_str(), m.data(),
                                   static_cast<int>(m.size()), absl::ToInt64Milliseconds(timeout));
  Kind kind;
  uint64_t seq;
  std::string_view payload;
  const bool answered = *status == NATS_OK && parse(reply, &kind, &seq, &payload);
  if (reply != nullptr) natsMsg_Destroy(reply);
  return answered ? std::optional<Kind>(kind) : std::nullopt;
}

// What both ends of a tunnel share: the NATS connection, the virtual connections, the counters.
class TunnelEnd {
 protected:
  // The NATS connection was lost or came back: what was in flight may be gone, so every
  // connection is cut (the stream channel reconnects and resumes).
  void on_lost() {
    counters_.cut_nats.fetch_add(1);
    conns_.cut_all(false);
  }
  // Routes one message: a PROBE is answered, an OPEN goes to `open`, the rest to its connection.
  template <typename Open>
  void dispatch(natsMsg* msg, Open open) {
    Kind kind;
    uint64_t seq;
    std::string_view payload;
    if (!parse(msg, &kind, &seq, &payload)) return;
    const std::string id = last_token(natsMsg_GetSubject(msg));
    if (kind == kOpen) return open(msg, id, payload);
    if (kind == kProbe) return answer_probe(*nats_, conns_, msg, id);
    if (std::shared_ptr<Conn> c = conns_.find(id)) c->deliver(kind, seq, payload);
  }

  Counters counters_;
  Conns conns_;
  std::unique_ptr<NatsConn> nats_;
};

// Heartbeats: every `interval` each live connection's peer is asked (a PROBE request) whether it
// still has the connection. A FIN or "no responders" (the peer's process is gone: a killed proc
// sends no FIN) cuts it at once; three unanswered probes in a row cut it too. The stream channel
// then reconnects — to a restarted peer, on a fresh session — as it does after a lost socket.
class Keeper {
 public:
  Keeper(NatsConn& nats, Conns& conns, absl::Duration interval, Counters& counters)
      : thread_([this, &nats, &conns, interval, &counters] {
          absl::flat_hash_map<Conn*, int> missed;
          while (!stop_.WaitForNotificationWithTimeout(interval)) {
            const std::vector<std::shared_ptr<Conn>> live = conns.live_conns();
            absl::erase_if(missed, [&](const auto& m) {  // forget connections that are gone
              return std::none_of(live.begin(), live.end(),
                                  [&](const auto& c) { return c.get() == m.first; });
            });
            for (const std::shared_ptr<Conn>& c : live) {
              natsStatus s;
              const std::optional<Kind> kind =
                  ask(nats, c->peer(), message(kProbe, 0), interval, &s);
              if (kind == kOpened) {
                missed.erase(c.get());
              } else if (kind || s == NATS_NO_RESPONDERS || ++missed[c.get()] >= 3) {
                counters.cut_gone.fetch_add(1);
                missed.erase(c.get());
                c->cut(false);
              }
            }
          }
        }) {}
  ~Keeper() {
    stop_.Notify();
    thread_.join();
  }

 private:
  absl::Notification stop_;
  std::thread thread_;
};

class Server final : public TunnelServer, private TunnelEnd {
 public:
  Server(TunnelOptions options, std::string target)
      : options_(std::move(options)), target_(std::move(target)) {}
  ~Server() override { stop(true); }

  absl::Status start() {
    absl::StatusOr<std::unique_ptr<NatsConn>> nats = NatsConn::connect(
        {options_.url, options_.timeout, absl::StrCat("postal channel server ", options_.subject),
         options_.credentials, options_.tls, [this] { on_lost(); }});
    if (!nats.ok()) return nats.status();
    nats_ = *std::move(nats);
    if (absl::Status s = nats_->subscribe(absl::StrCat(options_.subject, ".t.*"),
                                          [this](natsMsg* msg) { on_message(msg); });
        !s.ok()) {
      return s;
    }
    keeper_ = std::make_unique<Keeper>(*nats_, conns_, options_.keepalive, counters_);
    return absl::OkStatus();
  }

  TunnelStats stats() const override { return counters_.get(); }
  void vanish() override { stop(false); }

 private:
  void stop(bool fin) {
    if (nats_ == nullptr) return;
    keeper_.reset();
    nats_->unsubscribe_all();  // no callback runs after this
    conns_.clear(fin);
    nats_.reset();
  }

  void on_message(natsMsg* msg) {
    dispatch(msg, [this](natsMsg* m, const std::string& id, std::string_view inbox) {
      open(m, id, inbox);
    });
  }

  void open(natsMsg* msg, const std::string& id, std::string_view inbox) {
    const char* reply = natsMsg_GetReply(msg);
    if (reply == nullptr || inbox.empty() || conns_.find(id) != nullptr ||
        conns_.live() >= options_.max_connections) {
      counters_.refused.fetch_add(1);
      if (reply != nullptr) nats_->respond(reply, message(kFin, 0));
      return;
    }
    const int fd = connect_unix(target_);
    if (fd < 0) {
      counters_.refused.fetch_add(1);
      nats_->respond(reply, message(kFin, 0));
      return;
    }
    auto conn = std::make_shared<Conn>(*nats_, fd, std::string(inbox), options_.window, counters_);
    conns_.add(id, conn);
    conn->start();
    counters_.opened.fetch_add(1);
    nats_->respond(reply, message(kOpened, 0));
  }

  const TunnelOptions options_;
  const std::string target_;
  std::unique_ptr<Keeper> keeper_;
};

class Client final : public TunnelClient, private TunnelEnd {
 public:
  Client(TunnelOptions options, PrivateDir dir)
      : options_(std::move(options)), dir_(std::move(dir)) {}
  ~Client() override {
    stopping_.store(true);
    if (listener_ >= 0) ::shutdown(listener_, SHUT_RDWR);
    if (acceptor_.joinable()) acceptor_.join();
    keeper_.reset();
    if (nats_ != nullptr) nats_->unsubscribe_all();
    conns_.clear(true);
    nats_.reset();
    if (listener_ >= 0) ::close(listener_);
  }

  absl::Status start() {
    const std::string path = dir_.path() + "/c.sock";
    absl::StatusOr<runtime::ChannelAddr> addr = runtime::ChannelAddr::ipc(path);
    if (!addr.ok()) return addr.status();
    local_ = *std::move(addr);
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::listen(listener_, 64) != 0) {
      return absl::InternalError(
          absl::StrCat("the nats:// tunnel cannot listen on ", path, ": ", os_error(errno)));
    }
    absl::StatusOr<std::unique_ptr<NatsConn>> nats = NatsConn::connect(
        {options_.url, options_.timeout, absl::StrCat("postal channel client ", options_.subject),
         options_.credentials, options_.tls, [this] { on_lost(); }});
    if (!nats.ok()) return nats.status();
    nats_ = *std::move(nats);
    inbox_ = absl::StrCat(nats_->inbox_prefix(), ".", random_id());
    if (absl::Status s =
            nats_->subscribe(absl::StrCat(inbox_, ".*"), [this](natsMsg* msg) { on_message(msg); });
        !s.ok()) {
      return s;
    }
    keeper_ = std::make_unique<Keeper>(*nats_, conns_, options_.keepalive, counters_);
    acceptor_ = std::thread([this] { accept_loop(); });
    return absl::OkStatus();
  }

  absl::Status probe() override {
    natsStatus s;
    // The server answers a PROBE for a connection it does not have with FIN: it is there.
    if (ask(*nats_, absl::StrCat(options_.subject, ".t.probe"), message(kProbe, 0),
            options_.timeout, &s)) {
      return absl::OkStatus();
    }
    return absl::UnavailableError(
        absl::StrCat("no proc serves subject ", options_.subject, " at ", options_.url, " (",
                     s == NATS_NO_RESPONDERS ? "no responders" : natsStatus_GetText(s),
                     "); check that the proc is up and serves that address"));
  }

  const runtime::ChannelAddr& local_addr() const override { return local_; }
  TunnelStats stats() const override { return counters_.get(); }

 private:
  void on_message(natsMsg* msg) {
    dispatch(msg, [](natsMsg*, const std::string&, std::string_view) {});  // OPENs go to servers
  }

  void accept_loop() {
    while (!stopping_.load()) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (stopping_.load()) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // EMFILE: let fds free up
        continue;
      }
      ucred peer{};
      socklen_t len = sizeof(peer);
      if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != ::getuid()) {
        ::close(fd);  // the folder is 0700; this is a second lock on the door
        continue;
      }
      open(fd);
    }
  }

  // OPEN as a request: answered OPENED by the server, FIN when it refuses, nothing (no
  // responders, a timeout) when no proc serves the subject — then the socket closes, and the
  // stream client takes it as a refused connection.
  void open(int fd) {
    const std::string id = random_id();
    const std::string to = absl::StrCat(options_.subject, ".t.", id);
    auto conn = std::make_shared<Conn>(*nats_, fd, to, options_.window, counters_);
    conns_.add(id, conn);  // before OPEN: the server may answer at once
    natsStatus s;
    if (ask(*nats_, to, message(kOpen, 0, absl::StrCat(inbox_, ".", id)), options_.timeout, &s) !=
        kOpened) {
      counters_.refused.fetch_add(1);
      conns_.remove(id);  // closes the socket: the stream client sees the refusal
      return;
    }
    counters_.opened.fetch_add(1);
    conn->start();
  }

  const TunnelOptions options_;
  PrivateDir dir_;
  runtime::ChannelAddr local_;
  std::string inbox_;
  int listener_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::unique_ptr<Keeper> keeper_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TunnelServer>> TunnelServer::start(const TunnelOptions& options,
                                                                  std::string target) {
  auto server = std::make_unique<Server>(options, std::move(target));
  if (absl::Status s = server->start(); !s.ok()) return s;
  return server;
}

absl::StatusOr<std::unique_ptr<TunnelClient>> TunnelClient::start(const TunnelOptions& options) {
  absl::StatusOr<PrivateDir> dir = PrivateDir::make();
  if (!dir.ok()) return dir.status();
  auto client = std::make_unique<Client>(options, *std::move(dir));
  if (absl::Status s = client->start(); !s.ok()) return s;
  return client;
}

absl::StatusOr<PrivateDir> PrivateDir::make() {
  std::string path = (std::filesystem::temp_directory_path() / "postal-nats-XXXXXX").string();
  if (::mkdtemp(path.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot make a private folder for a nats:// tunnel: ", os_error(errno)));
  }
  return PrivateDir(std::move(path));
}

PrivateDir::~PrivateDir() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace postal::routing::internal::nats_tunnel
