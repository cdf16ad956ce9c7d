// The tunnel of nats:// channels (nats_tunnel.h): virtual connections, and the server and client
// ends that make them.
#include "nats_tunnel.h"

#include <fcntl.h>
#include <nats/nats.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "nats_conn.h"
#include "postal/wire/absl_compat.h"
#include "socket_util.h"

namespace postal::routing::internal::nats_tunnel {
namespace {

enum Kind : uint8_t { kOpen = 1, kOpened = 2, kData = 3, kAck = 4, kFin = 5, kProbe = 6 };
constexpr size_t kHeader = 9;

void put_u64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (8 * i));
}
uint64_t get_u64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return v;
}
std::string message(Kind kind, uint64_t seq, std::string_view payload = {}) {
  std::string m(kHeader, '\0');
  m[0] = static_cast<char>(kind);
  put_u64(m.data() + 1, seq);
  m.append(payload);
  return m;
}

std::string last_token(std::string_view subject) {
  const size_t dot = subject.rfind('.');
  return std::string(dot == std::string_view::npos ? subject : subject.substr(dot + 1));
}

std::string random_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrCat(absl::Hex(rng(), absl::kZeroPad16), absl::Hex(rng(), absl::kZeroPad16));
}

struct Counters {
  std::atomic<uint64_t> opened{0}, cut_gap{0}, cut_nats{0}, cut_gone{0}, refused{0};
  TunnelStats get() const {
    return {opened.load(), cut_gap.load(), cut_nats.load(), cut_gone.load(), refused.load()};
  }
};

// One virtual connection: a Unix socket on this side, the peer's subject on the other.
class Conn {
 public:
  Conn(NatsConn& nats, int fd, std::string peer, size_t window, Counters& counters)
      : nats_(nats),
        fd_(fd),
        peer_(std::move(peer)),
        window_(window),
        max_chunk_(nats.max_payload() - kHeader),
        counters_(counters) {}
  ~Conn() {
    cut(false);
    if (reader_.joinable()) reader_.join();
    if (writer_.joinable()) writer_.join();
    ::close(fd_);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  void start() {
    reader_ = std::thread([this] { read_loop(); });
    writer_ = std::thread([this] { write_loop(); });
  }
  bool done() const { return reader_done_.load() && writer_done_.load(); }
  const std::string& peer() const { return peer_; }

  // From the NATS callback: never blocks.
  void deliver(Kind kind, uint64_t seq, std::string_view payload) {
    if (kind == kFin) {
      absl::MutexLock lock(&mu_);
      peer_fin_ = true;
      return;
    }
    if (kind == kAck && payload.size() == 8) {
      absl::MutexLock lock(&mu_);
      acked_ = std::max(acked_, std::min(get_u64(payload.data()), sent_));
      return;
    }
    if (kind != kData) return;
    bool gap = false;
    bool here = false;  // write it on this thread: nothing waits before it
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      gap = seq != in_seq_ + 1 || queued_ + payload.size() > window_ + max_chunk_;
      if (!gap) {
        in_seq_ = seq;
        if (queue_.empty() && !writing_) {
          writing_ = here = true;
        } else {
          queued_ += payload.size();
          queue_.emplace_back(payload);
        }
      }
    }
    if (gap) {
      counters_.cut_gap.fetch_add(1);
      return cut(true);
    }
    if (!here) return;
    // The fast path: one non-blocking send saves the writer thread's wake-up on the round trip.
    // What the socket does not take now goes to the front of the queue, for the writer.
    size_t off = 0;
    bool broken = false;
    while (off < payload.size()) {
      const ssize_t n = ::send(fd_, payload.data() + off, payload.size() - off,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        off += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        broken = !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        break;
      }
    }
    if (broken) return cut(true);
    std::optional<std::string> ack;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (off < payload.size() && !stopped_) {
        queued_ += payload.size() - off;
        queue_.emplace_front(payload.substr(off));
      }
      ack = wrote_locked(off);
    }
    if (ack) publish(*ack);
  }

  // Ends the connection now: the socket is shut down (the stream side sees it lost), what waits
  // is dropped. `fin`: tell the peer.
  void cut(bool fin) {
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      stopped_ = true;
      queue_.clear();
      queued_ = 0;
    }
    ::shutdown(fd_, SHUT_RDWR);
    if (fin) publish(message(kFin, 0));
  }

 private:
  void publish(const std::string& m) {
    natsConnection_Publish(nats_.nc(), peer_.c_str(), m.data(), static_cast<int>(m.size()));
  }

  void read_loop() {
    std::string buf(kHeader + max_chunk_, '\0');
    buf[0] = static_cast<char>(kData);
    uint64_t seq = 0;
    for (;;) {
      size_t room = 0;
      {
        absl::MutexLock lock(&mu_);
        auto may_read = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopped_ || sent_ - acked_ < window_;
        };
        mu_.Await(absl::Condition(&may_read));
        if (stopped_) break;
        room = std::min(max_chunk_, window_ - (sent_ - acked_));
      }
      const ssize_t n = ::read(fd_, buf.data() + kHeader, room);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      put_u64(buf.data() + 1, ++seq);
      {
        absl::MutexLock lock(&mu_);
        sent_ += static_cast<uint64_t>(n);
      }
      natsConnection_Publish(nats_.nc(), peer_.c_str(), buf.data(), static_cast<int>(kHeader + n));
    }
    bool tell = false;
    {
      absl::MutexLock lock(&mu_);
      tell = !stopped_ && !peer_fin_;  // our side closed: the peer's side must close too
    }
    cut(tell);
    reader_done_.store(true);
  }

  // Counts `n` bytes written to the socket; the ACK to publish when a quarter window is due.
  std::optional<std::string> wrote_locked(size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    consumed_ += n;
    if (consumed_ - acked_sent_ < window_ / 4) return std::nullopt;
    acked_sent_ = consumed_;
    char v[8];
    put_u64(v, consumed_);
    return message(kAck, 0, std::string_view(v, 8));
  }

  void write_loop() {
    for (;;) {
      std::string chunk;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopped_ || (!writing_ && (peer_fin_ || !queue_.empty()));
        };
        mu_.Await(absl::Condition(&ready));
        if (stopped_ || queue_.empty()) break;  // or the peer finished and all is written
        chunk = std::move(queue_.front());
        queue_.pop_front();
        queued_ -= chunk.size();
        writing_ = true;
      }
      size_t off = 0;
      while (off < chunk.size()) {
        const ssize_t n = ::send(fd_, chunk.data() + off, chunk.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      std::optional<std::string> ack;
      {
        absl::MutexLock lock(&mu_);
        writing_ = false;
        ack = wrote_locked(off);
      }
      if (ack) publish(*ack);
      if (off < chunk.size()) break;
    }
    cut(false);
    writer_done_.store(true);
  }

  NatsConn& nats_;
  const int fd_;
  const std::string peer_;
  const size_t window_;
  const size_t max_chunk_;
  Counters& counters_;
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool peer_fin_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t sent_ ABSL_GUARDED_BY(mu_) = 0;   // DATA bytes published
  uint64_t acked_ ABSL_GUARDED_BY(mu_) = 0;  // of them, consumed by the peer
  uint64_t in_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;      // a send to the socket is under way
  uint64_t consumed_ ABSL_GUARDED_BY(mu_) = 0;     // DATA bytes written to the socket
  uint64_t acked_sent_ ABSL_GUARDED_BY(mu_) = 0;   // of them, acked to the peer
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> reader_done_{false};
  std::atomic<bool> writer_done_{false};
  std::thread reader_;
  std::thread writer_;
};

// The virtual connections of one tunnel end, by id.
class Conns {
 public:
  void add(const std::string& id, std::shared_ptr<Conn> conn) {
    std::vector<std::shared_ptr<Conn>> finished;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = map_.begin(); it != map_.end();) {
        if (it->second->done()) {
          finished.push_back(std::move(it->second));
          map_.erase(it++);
        } else {
          ++it;
        }
      }
      map_[id] = std::move(conn);
    }
    // `finished` joins here, outside the lock.
  }
  std::shared_ptr<Conn> find(const std::string& id) {
    absl::MutexLock lock(&mu_);
    auto it = map_.find(id);
    return it == map_.end() ? nullptr : it->second;
  }
  void remove(const std::string& id) {
    std::shared_ptr<Conn> gone;
    absl::MutexLock lock(&mu_);
    if (auto it = map_.find(id); it != map_.end()) {
      gone = std::move(it->second);
      map_.erase(it);
    }
  }
  size_t live() {
    absl::MutexLock lock(&mu_);
    size_t n = 0;
    for (const auto& [id, c] : map_) n += c->done() ? 0 : 1;
    return n;
  }
  std::vector<std::shared_ptr<Conn>> live_conns() {
    absl::MutexLock lock(&mu_);
    std::vector<std::shared_ptr<Conn>> out;
    for (const auto& [id, c] : map_) {
      if (!c->done()) out.push_back(c);
    }
    return out;
  }
  void cut_all(bool fin) {
    absl::MutexLock lock(&mu_);
    for (auto& [id, c] : map_) c->cut(fin);
  }
  // Cuts and joins every connection.
  void clear(bool fin) {
    absl::flat_hash_map<std::string, std::shared_ptr<Conn>> all;
    {
      absl::MutexLock lock(&mu_);
      all.swap(map_);
    }
    for (auto& [id, c] : all) c->cut(fin);
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Conn>> map_ ABSL_GUARDED_BY(mu_);
};

// Splits a tunnel message; false when it is too short to be one.
bool parse(natsMsg* msg, Kind* kind, uint64_t* seq, std::string_view* payload) {
  const int len = natsMsg_GetDataLength(msg);
  if (len < static_cast<int>(kHeader)) return false;
  const char* data = natsMsg_GetData(msg);
  *kind = static_cast<Kind>(data[0]);
  *seq = get_u64(data + 1);
  *payload = std::string_view(data + kHeader, static_cast<size_t>(len) - kHeader);
  return true;
}

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
            for (const std::shared_ptr<Conn>& c : conns.live_conns()) {
              const std::string probe = message(kProbe, 0);
              natsMsg* reply = nullptr;
              const natsStatus s = natsConnection_Request(
                  &reply, nats.nc(), c->peer().c_str(), probe.data(),
                  static_cast<int>(probe.size()), absl::ToInt64Milliseconds(interval));
              Kind kind = kFin;
              uint64_t seq;
              std::string_view payload;
              const bool answered = s == NATS_OK && parse(reply, &kind, &seq, &payload);
              if (reply != nullptr) natsMsg_Destroy(reply);
              if (answered && kind == kOpened) {
                missed.erase(c.get());
              } else if (answered || s == NATS_NO_RESPONDERS || ++missed[c.get()] >= 3) {
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

class Server final : public TunnelServer {
 public:
  Server(TunnelOptions options, std::string target)
      : options_(std::move(options)), target_(std::move(target)) {}
  ~Server() override { stop(true); }

  absl::Status start() {
    absl::StatusOr<std::unique_ptr<NatsConn>> nats = NatsConn::connect(
        {options_.url, options_.timeout, absl::StrCat("postal channel server ", options_.subject),
         [this] { on_lost(); }});
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

  void on_lost() {
    counters_.cut_nats.fetch_add(1);
    conns_.cut_all(false);
  }

  void on_message(natsMsg* msg) {
    Kind kind;
    uint64_t seq;
    std::string_view payload;
    if (!parse(msg, &kind, &seq, &payload)) return;
    const std::string id = last_token(natsMsg_GetSubject(msg));
    if (kind == kOpen) return open(msg, id, payload);
    if (kind == kProbe) return answer_probe(*nats_, conns_, msg, id);
    if (std::shared_ptr<Conn> c = conns_.find(id)) c->deliver(kind, seq, payload);
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
  Counters counters_;
  Conns conns_;
  std::unique_ptr<NatsConn> nats_;
  std::unique_ptr<Keeper> keeper_;
};

class Client final : public TunnelClient {
 public:
  Client(TunnelOptions options, PrivateDir dir) : options_(std::move(options)), dir_(std::move(dir)) {}
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
      return absl::InternalError(absl::StrCat("the nats:// tunnel cannot listen on ", path, ": ",
                                              os_error(errno)));
    }
    absl::StatusOr<std::unique_ptr<NatsConn>> nats = NatsConn::connect(
        {options_.url, options_.timeout, absl::StrCat("postal channel client ", options_.subject),
         [this] { on_lost(); }});
    if (!nats.ok()) return nats.status();
    nats_ = *std::move(nats);
    inbox_ = absl::StrCat("_INBOX.", random_id());
    if (absl::Status s = nats_->subscribe(absl::StrCat(inbox_, ".*"),
                                          [this](natsMsg* msg) { on_message(msg); });
        !s.ok()) {
      return s;
    }
    keeper_ = std::make_unique<Keeper>(*nats_, conns_, options_.keepalive, counters_);
    acceptor_ = std::thread([this] { accept_loop(); });
    return absl::OkStatus();
  }

  absl::Status probe() override {
    const std::string probe = message(kProbe, 0);
    const std::string to = absl::StrCat(options_.subject, ".t.probe");
    natsMsg* reply = nullptr;
    const natsStatus s =
        natsConnection_Request(&reply, nats_->nc(), to.c_str(), probe.data(),
                               static_cast<int>(probe.size()),
                               absl::ToInt64Milliseconds(options_.timeout));
    if (reply != nullptr) natsMsg_Destroy(reply);
    if (s == NATS_OK) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(
        "no proc serves subject ", options_.subject, " at ", options_.url, " (",
        s == NATS_NO_RESPONDERS ? "no responders" : natsStatus_GetText(s),
        "); check that the proc is up and serves that address"));
  }

  const runtime::ChannelAddr& local_addr() const override { return local_; }
  TunnelStats stats() const override { return counters_.get(); }

 private:
  void on_lost() {
    counters_.cut_nats.fetch_add(1);
    conns_.cut_all(false);
  }

  void on_message(natsMsg* msg) {
    Kind kind;
    uint64_t seq;
    std::string_view payload;
    if (!parse(msg, &kind, &seq, &payload)) return;
    const std::string id = last_token(natsMsg_GetSubject(msg));
    if (kind == kProbe) return answer_probe(*nats_, conns_, msg, id);
    if (std::shared_ptr<Conn> c = conns_.find(id)) c->deliver(kind, seq, payload);
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
    const std::string open = message(kOpen, 0, absl::StrCat(inbox_, ".", id));
    natsMsg* reply = nullptr;
    const natsStatus s =
        natsConnection_Request(&reply, nats_->nc(), to.c_str(), open.data(),
                               static_cast<int>(open.size()),
                               absl::ToInt64Milliseconds(options_.timeout));
    Kind kind = kFin;
    uint64_t seq;
    std::string_view payload;
    if (s == NATS_OK && !parse(reply, &kind, &seq, &payload)) kind = kFin;
    if (reply != nullptr) natsMsg_Destroy(reply);
    if (s != NATS_OK || kind != kOpened) {
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
  Counters counters_;
  Conns conns_;
  std::unique_ptr<NatsConn> nats_;
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
