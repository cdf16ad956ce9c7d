// TcpRelay: an on-path attacker for the TLS tests (R-SEC-1). It listens on a tcp address and
// relays every connection to a target, recording the bytes each way; on demand it changes one
// byte of what the client sends next, or cuts every relayed connection (RST), as a network (or
// an attacker on it) would. One thread, poll(2), blocking writes; bounded by what a test sends.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace postal::routing::channel_test {

class TcpRelay {
 public:
  // Listens on `host`:0 (IPv4) and relays to `host`:`target_port`.
  TcpRelay(const std::string& host, uint16_t target_port) : host_(host) {
    target_ = sockaddr_in{};
    target_.sin_family = AF_INET;
    target_.sin_port = htons(target_port);
    ::inet_pton(AF_INET, host.c_str(), &target_.sin_addr);
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in at = target_;
    at.sin_port = 0;
    ::bind(listener_, reinterpret_cast<sockaddr*>(&at), sizeof(at));
    ::listen(listener_, 16);
    socklen_t len = sizeof(at);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&at), &len);
    port_ = ntohs(at.sin_port);
    ::pipe2(wake_, O_CLOEXEC);
    thread_ = std::thread([this] { run(); });
  }
  ~TcpRelay() {
    stop_.store(true);
    poke();
    thread_.join();
    for (const Pair& p : pairs_) close_pair(p, /*reset=*/false);
    ::close(listener_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  std::string addr() const { return "tcp://" + host_ + ":" + std::to_string(port_); }
  // Everything clients sent (upstream) and servers answered (downstream), over all connections.
  std::string upstream() const {
    absl::MutexLock lock(&mu_);
    return up_;
  }
  std::string downstream() const {
    absl::MutexLock lock(&mu_);
    return down_;
  }
  size_t accepted() const { return accepted_.load(); }
  // Flips one bit in the middle of the next bytes a client sends.
  void corrupt_next_upstream() { corrupt_.store(true); }
  bool corrupted() const { return corrupted_.load(); }
  // Resets every relayed connection now (both ends see ECONNRESET or EOF).
  void cut() {
    cut_.store(true);
    poke();
  }

 private:
  struct Pair {
    int client;
    int server;
  };

  void poke() { [[maybe_unused]] ssize_t n = ::write(wake_[1], "x", 1); }

  static void close_pair(const Pair& p, bool reset) {
    if (reset) {  // RST, not FIN: a connection the network lost
      linger l{1, 0};
      ::setsockopt(p.client, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
      ::setsockopt(p.server, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    ::close(p.client);
    ::close(p.server);
  }

  static bool write_all(int fd, const char* data, size_t n) {
    while (n > 0) {
      const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
      if (w <= 0) return false;
      data += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }

  void accept_one() {
    const int c = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(s, reinterpret_cast<const sockaddr*>(&target_), sizeof(target_)) != 0) {
      ::close(c);
      ::close(s);
      return;
    }
    const int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    pairs_.push_back({c, s});
    accepted_.fetch_add(1);
  }

  // Relays one read from `from` to `to`; false when the pair is done.
  bool relay(int from, int to, bool upstream) {
    char buf[64 << 10];
    const ssize_t n = ::recv(from, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    if (upstream && corrupt_.exchange(false)) {
      buf[n / 2] ^= 0x01;
      corrupted_.store(true);
    }
    {
      absl::MutexLock lock(&mu_);
      (upstream ? up_ : down_).append(buf, static_cast<size_t>(n));
    }
    return write_all(to, buf, static_cast<size_t>(n));
  }

  void run() {
    while (!stop_.load()) {
      if (cut_.exchange(false)) {
        for (const Pair& p : pairs_) close_pair(p, /*reset=*/true);
        pairs_.clear();
      }
      std::vector<pollfd> fds{{listener_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      for (const Pair& p : pairs_) {
        fds.push_back({p.client, POLLIN, 0});
        fds.push_back({p.server, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 1000) <= 0) continue;
      if (fds[1].revents != 0) {
        char drain[64];
        [[maybe_unused]] ssize_t n = ::read(wake_[0], drain, sizeof(drain));
      }
      std::vector<Pair> alive;
      for (size_t i = 0; i < pairs_.size(); ++i) {
        const Pair& p = pairs_[i];
        bool ok = true;
        if (fds[2 + 2 * i].revents != 0) ok = relay(p.client, p.server, /*upstream=*/true);
        if (ok && fds[3 + 2 * i].revents != 0) ok = relay(p.server, p.client, /*upstream=*/false);
        if (ok) {
          alive.push_back(p);
        } else {
          close_pair(p, /*reset=*/false);
        }
      }
      pairs_.swap(alive);
      if (fds[0].revents != 0) accept_one();
    }
  }

  const std::string host_;
  sockaddr_in target_{};
  int listener_ = -1;
  uint16_t port_ = 0;
  int wake_[2] = {-1, -1};
  std::vector<Pair> pairs_;  // the relay thread's
  std::atomic<bool> stop_{false};
  std::atomic<bool> cut_{false};
  std::atomic<bool> corrupt_{false};
  std::atomic<bool> corrupted_{false};
  std::atomic<size_t> accepted_{0};
  mutable absl::Mutex mu_;
  std::string up_, down_;
  std::thread thread_;
};

}  // namespace postal::routing::channel_test
