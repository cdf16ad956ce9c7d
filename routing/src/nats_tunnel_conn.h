// nats_tunnel_conn.h — one virtual connection of a nats:// tunnel (nats_tunnel.h), the table of
// them, and the tunnel's message format (routing internal).
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nats/nats.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "byte_sink.h"
#include "nats_conn.h"
#include "nats_tunnel.h"

namespace postal::routing::internal::nats_tunnel {

enum Kind : uint8_t { kOpen = 1, kOpened = 2, kData = 3, kAck = 4, kFin = 5, kProbe = 6 };
inline constexpr size_t kHeader = 9;

inline void put_u64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (8 * i));
}
inline uint64_t get_u64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return v;
}
inline std::string message(Kind kind, uint64_t seq, std::string_view payload = {}) {
  std::string m(kHeader, '\0');
  m[0] = static_cast<char>(kind);
  put_u64(m.data() + 1, seq);
  m.append(payload);
  return m;
}

inline std::string last_token(std::string_view subject) {
  const size_t dot = subject.rfind('.');
  return std::string(dot == std::string_view::npos ? subject : subject.substr(dot + 1));
}

inline std::string random_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrCat(absl::Hex(rng(), absl::kZeroPad16), absl::Hex(rng(), absl::kZeroPad16));
}

struct Counters {
  std::atomic<uint64_t> opened{0}, cut_gap{0}, cut_nats{0}, cut_gone{0}, refused{0};
  TunnelStats get() const {
    return {opened.load(), cut_gap.load(), cut_nats.load(), cut_gone.load(), refused.load()};
  }
};

// One virtual connection. Bytes from the peer are written to a socket whose other end the stream
// side reads; the stream side's own bytes come in through `take` (its ByteSink, `Sink` below) and
// go out as DATA messages on the writing thread itself.
class Conn {
 public:
  // `opened`: false on the dialing side until the peer answers the OPEN.
  Conn(NatsConn& nats, int fd, std::string peer, size_t window, Counters& counters, bool opened)
      : nats_(nats),
        fd_(fd),
        peer_(std::move(peer)),
        window_(window),
        max_chunk_(nats.max_payload() - kHeader),
        counters_(counters),
        opened_(opened) {}
  ~Conn() {
    cut(false);
    if (writer_.joinable()) writer_.join();
    ::close(fd_);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  void start() {
    writer_ = std::thread([this] { write_loop(); });
  }
  bool done() const { return writer_done_.load(); }
  const std::string& peer() const { return peer_; }

  // From the NATS callback: never blocks.
  void deliver(Kind kind, uint64_t seq, std::string_view payload) {
    if (kind == kOpened || kind == kFin) {
      bool answer = false;  // to our OPEN
      std::function<void()> ready;
      {
        absl::MutexLock lock(&mu_);
        if (stopped_) return;
        if (!opened_) {
          answer = true;
          opened_ = kind == kOpened;
          ready = std::move(waiter_);
        } else if (kind == kFin) {
          peer_fin_ = true;  // the writer ends once it wrote what came before
        }
      }
      if (answer && kind == kFin) return refuse();
      if (answer) counters_.opened.fetch_add(1);
      if (ready) ready();
      return;
    }
    if (kind == kAck && payload.size() == 8) {
      std::function<void()> ready;
      {
        absl::MutexLock lock(&mu_);
        acked_ = std::max(acked_, std::min(get_u64(payload.data()), sent_));
        if (sent_ - acked_ < window_) ready = std::move(waiter_);
      }
      if (ready) ready();
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
      const ssize_t n =
          ::send(fd_, payload.data() + off, payload.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
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

  // The OPEN was refused, or nobody serves the subject.
  void refuse() {
    counters_.refused.fetch_add(1);
    cut(false);
  }

  // ByteSink::writev for the stream side (one writer at a time): DATA messages of at most
  // max_chunk_ bytes, as far as the window allows.
  ssize_t take(const iovec* iov, int count) {
    // Published under mu_: once cut, nothing more is (the tunnel closes NATS after cutting).
    absl::MutexLock lock(&mu_);
    if (stopped_) {
      errno = opened_ ? EPIPE : ECONNREFUSED;  // never opened: refused, or nobody serves it
      return -1;
    }
    if (!opened_ || sent_ - acked_ >= window_) return 0;
    const size_t room = window_ - (sent_ - acked_);
    std::string& out = out_buf();
    size_t taken = 0, off = 0;
    int i = 0;
    while (taken < room && i < count) {
      const size_t chunk = std::min(max_chunk_, room - taken);
      out.assign(kHeader, '\0');
      out[0] = static_cast<char>(kData);
      for (; i < count && out.size() - kHeader < chunk; off = 0, ++i) {
        const size_t n = std::min(iov[i].iov_len - off, chunk - (out.size() - kHeader));
        out.append(static_cast<const char*>(iov[i].iov_base) + off, n);
        if (off + n < iov[i].iov_len) {
          off += n;
          break;
        }
      }
      const size_t n = out.size() - kHeader;
      if (n == 0) break;
      put_u64(out.data() + 1, ++out_seq_);
      sent_ += n;
      if (natsConnection_Publish(nats_.nc(), peer_.c_str(), out.data(),
                                 static_cast<int>(out.size())) != NATS_OK) {
        // The peer may miss these bytes: the connection ends, and the stream side reconnects
        // and resends.
        stop_locked(true);
        break;
      }
      taken += n;
    }
    if (taken == 0 && stopped_) {
      errno = EPIPE;
      return -1;
    }
    return static_cast<ssize_t>(taken);
  }

  // ByteSink::when_writable.
  void when_writable(std::function<void()> ready) {
    {
      absl::MutexLock lock(&mu_);
      if (!stopped_ && (!opened_ || sent_ - acked_ >= window_)) {
        waiter_ = std::move(ready);
        return;
      }
    }
    ready();
  }

  // ByteSink::ended_by.
  int ended_by() {
    absl::MutexLock lock(&mu_);
    return stopped_ && !opened_ ? ECONNREFUSED : 0;
  }

  // The stream side is done with the connection: the peer is told, unless it ended it.
  void finish() {
    bool tell = false;
    {
      absl::MutexLock lock(&mu_);
      tell = !stopped_ && !peer_fin_ && opened_;
    }
    cut(tell);
  }

  // Ends the connection now: the socket is shut down (the stream side sees it lost), what waits
  // is dropped. `fin`: tell the peer.
  void cut(bool fin) {
    std::function<void()> ready;
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      stop_locked(fin);
      ready = std::move(waiter_);
    }
    if (ready) ready();  // the stream side finds the sink broken
  }

 private:
  static std::string& out_buf() {
    static thread_local std::string buf;
    return buf;
  }

  void stop_locked(bool fin) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (fin) publish_locked(message(kFin, 0));
    stopped_ = true;
    queue_.clear();
    queued_ = 0;
    ::shutdown(fd_, SHUT_RDWR);  // the stream side reads the end of the stream
  }

  // Nothing is published once the connection is cut: its NATS connection may be closing.
  void publish(const std::string& m) {
    absl::MutexLock lock(&mu_);
    if (!stopped_) publish_locked(m);
  }
  void publish_locked(const std::string& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    natsConnection_Publish(nats_.nc(), peer_.c_str(), m.data(), static_cast<int>(m.size()));
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
  bool opened_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool peer_fin_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t sent_ ABSL_GUARDED_BY(mu_) = 0;             // DATA bytes published
  uint64_t acked_ ABSL_GUARDED_BY(mu_) = 0;            // of them, consumed by the peer
  std::function<void()> waiter_ ABSL_GUARDED_BY(mu_);  // the stream side waits for room
  uint64_t out_seq_ ABSL_GUARDED_BY(mu_) = 0;          // the last DATA published
  uint64_t in_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;     // a send to the socket is under way
  uint64_t consumed_ ABSL_GUARDED_BY(mu_) = 0;    // DATA bytes written to the socket
  uint64_t acked_sent_ ABSL_GUARDED_BY(mu_) = 0;  // of them, acked to the peer
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> writer_done_{false};
  std::thread writer_;
};

// The stream side's handle on a connection: its writes, and — when it lets go — the end of it.
class Sink final : public ByteSink {
 public:
  explicit Sink(std::weak_ptr<Conn> conn) : conn_(std::move(conn)) {}
  ~Sink() override {
    if (const std::shared_ptr<Conn> c = conn_.lock()) c->finish();
  }
  ssize_t writev(const iovec* iov, int count) override {
    if (const std::shared_ptr<Conn> c = conn_.lock()) return c->take(iov, count);
    errno = EPIPE;
    return -1;
  }
  void when_writable(std::function<void()> ready) override {
    if (const std::shared_ptr<Conn> c = conn_.lock()) return c->when_writable(std::move(ready));
    ready();
  }
  int ended_by() const override {
    const std::shared_ptr<Conn> c = conn_.lock();
    return c != nullptr ? c->ended_by() : 0;
  }

 private:
  std::weak_ptr<Conn> conn_;
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
inline bool parse(natsMsg* msg, Kind* kind, uint64_t* seq, std::string_view* payload) {
  const int len = natsMsg_GetDataLength(msg);
  if (len < static_cast<int>(kHeader)) return false;
  const char* data = natsMsg_GetData(msg);
  *kind = static_cast<Kind>(data[0]);
  *seq = get_u64(data + 1);
  *payload = std::string_view(data + kHeader, static_cast<size_t>(len) - kHeader);
  return true;
}

}  // namespace postal::routing::internal::nats_tunnel
