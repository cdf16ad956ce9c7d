// The tunnel of nats:// channels (nats_tunnel.h): virtual connections, and the server and client
// ends that make them.
#include "nats_tunnel.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <optional>
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
  Server(TunnelOptions options, SinkAdopter adopt)
      : options_(std::move(options)), adopt_(std::move(adopt)) {}
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
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      counters_.refused.fetch_add(1);
      nats_->respond(reply, message(kFin, 0));
      return;
    }
    auto conn = std::make_shared<Conn>(*nats_, fds[0], std::string(inbox), options_.window,
                                       counters_, /*opened=*/true);
    conns_.add(id, conn);
    conn->start();
    counters_.opened.fetch_add(1);
    adopt_(SinkLink{fds[1], std::make_shared<Sink>(conn)});
    nats_->respond(reply, message(kOpened, 0));
  }

  const TunnelOptions options_;
  const SinkAdopter adopt_;
  std::unique_ptr<Keeper> keeper_;
};

class Client final : public TunnelClient, private TunnelEnd {
 public:
  explicit Client(TunnelOptions options) : options_(std::move(options)) {}
  ~Client() override {
    keeper_.reset();
    if (nats_ != nullptr) nats_->unsubscribe_all();
    conns_.clear(true);
    nats_.reset();
  }

  absl::Status start() {
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

  // OPEN goes out with the connection's inbox as its reply subject: the server answers OPENED,
  // or FIN when it refuses; nats-server answers "no responders" when no proc serves the subject.
  // Until OPENED the sink takes nothing; a refusal closes the socket, which the stream client
  // takes as a refused connection.
  absl::StatusOr<SinkLink> dial() override {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      return absl::UnavailableError(absl::StrCat("socketpair: ", os_error(errno)));
    }
    const std::string id = random_id();
    const std::string to = absl::StrCat(options_.subject, ".t.", id);
    const std::string reply = absl::StrCat(inbox_, ".", id);
    auto conn = std::make_shared<Conn>(*nats_, fds[0], to, options_.window, counters_,
                                       /*opened=*/false);
    conns_.add(id, conn);  // before OPEN: the server may answer at once
    conn->start();
    const std::string open = message(kOpen, 0, reply);
    if (const natsStatus s = natsConnection_PublishRequest(
            nats_->nc(), to.c_str(), reply.c_str(), open.data(), static_cast<int>(open.size()));
        s != NATS_OK) {
      conns_.remove(id);
      ::close(fds[1]);
      return absl::UnavailableError(absl::StrCat("OPEN to ", options_.subject, " at ", options_.url,
                                                 ": ", natsStatus_GetText(s)));
    }
    return SinkLink{fds[1], std::make_shared<Sink>(conn)};
  }

  TunnelStats stats() const override { return counters_.get(); }

 private:
  void on_message(natsMsg* msg) {
    if (natsMsg_IsNoResponders(msg)) {  // the answer to an OPEN nobody serves
      if (std::shared_ptr<Conn> c = conns_.find(last_token(natsMsg_GetSubject(msg)))) c->refuse();
      return;
    }
    dispatch(msg, [](natsMsg*, const std::string&, std::string_view) {});  // OPENs go to servers
  }

  const TunnelOptions options_;
  std::string inbox_;
  std::unique_ptr<Keeper> keeper_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TunnelServer>> TunnelServer::start(const TunnelOptions& options,
                                                                  SinkAdopter adopt) {
  auto server = std::make_unique<Server>(options, std::move(adopt));
  if (absl::Status s = server->start(); !s.ok()) return s;
  return server;
}

absl::StatusOr<std::unique_ptr<TunnelClient>> TunnelClient::start(const TunnelOptions& options) {
  auto client = std::make_unique<Client>(options);
  if (absl::Status s = client->start(); !s.ok()) return s;
  return client;
}

absl::StatusOr<PrivateDir> PrivateDir::make() {
  std::string path = (std::filesystem::temp_directory_path() / "postal-nats-XXXXXX").string();
  if (::mkdtemp(path.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot make a private folder for nats-server's files: ", os_error(errno)));
  }
  return PrivateDir(std::move(path));
}

PrivateDir::~PrivateDir() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace postal::routing::internal::nats_tunnel
