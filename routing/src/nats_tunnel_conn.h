// nats_tunnel_conn.h — one virtual connection of a nats:// tunnel (nats_tunnel.h), the table of
// them, and the tunnel's message format (routing internal).
#pragma once

#include <nats/nats.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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
