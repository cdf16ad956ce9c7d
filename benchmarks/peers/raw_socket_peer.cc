// raw_socket_bench: the floor under postal's ipc and tcp channels — the smallest program that
// moves the same bytes over the same transport, between two processes.
//
//   raw_socket_bench --transport ipc|tcp --size BYTES --messages N [--rtt-messages N] [--batch 64]
//
// The process listens (a Unix socket in the abstract namespace, or TCP on 127.0.0.1 with
// TCP_NODELAY, as postal's channels use) and forks a receiver. A message is an 8-byte length
// header and `size` body bytes. Three measurements, each on its own connection:
//
//   stream_unbatched  one write() per message; the receiver reads everything and answers one
//                     byte at the end; messages/s from the first write to that byte.
//   stream_batched    the same with `batch` messages per writev().
//   stream_framed     batched, and the receiver parses what it reads as frames — walks the
//                     length headers, copies each body into its own heap buffer and touches it —
//                     which is the least any framed protocol does per message (issue 9 asks for
//                     this floor beside the byte floor).
//   round_trip        one message at a time, echoed back whole; latency percentiles.
//
// Except in stream_framed the receiver does not parse frames: it counts bytes. That is the
// floor — nothing is decoded.
// Prints one JSON line (peer_common.h).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "peer_common.h"

namespace {

using postal_peers::fail;
using postal_peers::now_ns;

constexpr uint64_t kHeader = 8;

enum Mode : uint64_t { kQuit = 0, kSink = 1, kEcho = 2, kFramedSink = 3 };

// What the client tells the receiver at the start of a connection.
struct Hello {
  uint64_t mode = kQuit;
  uint64_t message_bytes = 0;  // header + body
  uint64_t count = 0;
};

std::string g_transport;

[[noreturn]] void die(const std::string& what) {
  fail("raw_socket", what + ": " + std::strerror(errno));
}

void write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die("write");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void read_all(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die("read");
    p += r;
    n -= static_cast<size_t>(r);
  }
}

// writev until every byte of `iov` is written (advancing over partial writes).
void writev_all(int fd, std::vector<iovec> iov) {
  size_t first = 0;
  while (first < iov.size()) {
    const int n = static_cast<int>(std::min<size_t>(iov.size() - first, 1024));
    ssize_t w = ::writev(fd, iov.data() + first, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die("writev");
    size_t left = static_cast<size_t>(w);
    while (left > 0 && first < iov.size()) {
      if (left >= iov[first].iov_len) {
        left -= iov[first].iov_len;
        ++first;
      } else {
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
        left = 0;
      }
    }
  }
}

void tune(int fd) {
  if (g_transport == "tcp") {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
}

// Listens on a fresh address; fills `addr`/`len` for connect.
int listen_socket(sockaddr_storage& addr, socklen_t& len) {
  std::memset(&addr, 0, sizeof addr);
  int fd = -1;
  if (g_transport == "ipc") {
    auto* un = reinterpret_cast<sockaddr_un*>(&addr);
    un->sun_family = AF_UNIX;
    std::string name = "postal-raw-peer-" + std::to_string(::getpid());
    std::memcpy(un->sun_path + 1, name.data(), name.size());  // abstract: leading NUL
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(&addr);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    in->sin_port = 0;
    len = sizeof(sockaddr_in);
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  }
  if (fd < 0) die("socket");
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) die("bind");
  if (::listen(fd, 4) != 0) die("listen");
  if (g_transport == "tcp" && ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    die("getsockname");
  }
  return fd;
}

// Reads `h.count` frames (an 8-byte length, then that many bytes), copying each body into its own
// heap buffer as a decoder would, then answers one byte.
void framed_sink(int fd, const Hello& h, std::vector<char>& buf) {
  size_t have = 0;  // bytes in buf not yet parsed, from its start
  uint64_t frames = 0, checksum = 0;
  while (frames < h.count) {
    if (have == buf.size()) buf.resize(buf.size() * 2);
    ssize_t r = ::read(fd, buf.data() + have, buf.size() - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) _exit(1);
    have += static_cast<size_t>(r);
    size_t at = 0;
    while (have - at >= kHeader) {
      uint64_t len = 0;
      std::memcpy(&len, buf.data() + at, kHeader);
      if (have - at - kHeader < len) break;
      std::string body(buf.data() + at + kHeader, len);  // the decoded message
      checksum += static_cast<unsigned char>(body.empty() ? 0 : body.back());
      at += kHeader + len;
      ++frames;
    }
    std::memmove(buf.data(), buf.data() + at, have - at);
    have -= at;
  }
  static volatile uint64_t keep;  // the bodies are used: the copies cannot be optimized away
  keep = checksum;
  char done = 1;
  write_all(fd, &done, 1);
}

// The receiver: one connection per measurement until a kQuit hello.
[[noreturn]] void receiver(int listener) {
  std::vector<char> buf(1 << 20);
  for (;;) {
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) _exit(1);
    tune(fd);
    Hello h;
    read_all(fd, &h, sizeof h);
    if (h.mode == kQuit) _exit(0);
    if (h.mode == kFramedSink) {
      framed_sink(fd, h, buf);
    } else if (h.mode == kSink) {
      uint64_t left = h.message_bytes * h.count;
      while (left > 0) {
        ssize_t r = ::read(fd, buf.data(), std::min<uint64_t>(left, buf.size()));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) _exit(1);
        left -= static_cast<uint64_t>(r);
      }
      char done = 1;
      write_all(fd, &done, 1);
    } else {
      if (buf.size() < h.message_bytes) buf.resize(h.message_bytes);
      for (uint64_t i = 0; i < h.count; ++i) {
        read_all(fd, buf.data(), h.message_bytes);
        write_all(fd, buf.data(), h.message_bytes);
      }
    }
    ::close(fd);
  }
}

int dial(const sockaddr_storage& addr, socklen_t len, const Hello& hello) {
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0) die("connect");
  tune(fd);
  write_all(fd, &hello, sizeof hello);
  return fd;
}

// One-way stream of `count` messages, `batch` per writev; nanoseconds until the receiver is done.
int64_t stream(const sockaddr_storage& addr, socklen_t len, const std::vector<char>& message,
               uint64_t count, uint64_t batch, Mode mode = kSink) {
  int fd = dial(addr, len, Hello{mode, message.size(), count});
  const int64_t start = now_ns();
  for (uint64_t sent = 0; sent < count;) {
    const uint64_t n = std::min(batch, count - sent);
    if (n == 1) {
      write_all(fd, message.data(), message.size());
    } else {
      std::vector<iovec> iov(n, iovec{const_cast<char*>(message.data()), message.size()});
      writev_all(fd, std::move(iov));
    }
    sent += n;
  }
  char done = 0;
  read_all(fd, &done, 1);
  const int64_t elapsed = now_ns() - start;
  ::close(fd);
  return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = postal_peers::parse_flags(argc, argv);
  g_transport = postal_peers::flag_str(flags, "transport", "ipc");
  const uint64_t size = postal_peers::flag_u64(flags, "size", 64);
  const uint64_t messages = postal_peers::flag_u64(flags, "messages", 100000);
  const uint64_t rtt_messages = postal_peers::flag_u64(flags, "rtt-messages", 10000);
  const uint64_t batch = std::max<uint64_t>(1, postal_peers::flag_u64(flags, "batch", 64));
  if (g_transport != "ipc" && g_transport != "tcp") {
    fail("raw_socket", "--transport must be ipc or tcp, got " + g_transport);
  }
  if (messages == 0 || rtt_messages == 0)
    fail("raw_socket", "--messages and --rtt-messages must be > 0");

  ::signal(SIGPIPE, SIG_IGN);
  sockaddr_storage addr;
  socklen_t len = 0;
  int listener = listen_socket(addr, len);
  std::fflush(stdout);
  pid_t child = ::fork();
  if (child < 0) die("fork");
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the measuring parent
    receiver(listener);
  }
  ::close(listener);

  std::vector<char> message(kHeader + size, 'r');
  std::memcpy(message.data(), &size, sizeof size);

  const int64_t unbatched = stream(addr, len, message, messages, 1);
  const int64_t batched = stream(addr, len, message, messages, batch);
  const int64_t framed = stream(addr, len, message, messages, batch, kFramedSink);

  int fd = dial(addr, len, Hello{kEcho, message.size(), rtt_messages});
  std::vector<char> back(message.size());
  std::vector<int64_t> rtt;
  rtt.reserve(rtt_messages);
  const int64_t start = now_ns();
  for (uint64_t i = 0; i < rtt_messages; ++i) {
    const int64_t t = now_ns();
    write_all(fd, message.data(), message.size());
    read_all(fd, back.data(), back.size());
    rtt.push_back(now_ns() - t);
  }
  const int64_t rtt_elapsed = now_ns() - start;
  ::close(fd);

  ::close(dial(addr, len, Hello{kQuit, 0, 0}));
  int status = 0;
  ::waitpid(child, &status, 0);

  std::printf(
      "{\"peer\": \"raw_socket\", \"transport\": \"%s\", \"size\": %llu, \"batch\": %llu, "
      "\"stream_unbatched\": %s, \"stream_batched\": %s, \"stream_framed\": %s, "
      "\"round_trip\": %s}\n",
      g_transport.c_str(), static_cast<unsigned long long>(size),
      static_cast<unsigned long long>(batch),
      postal_peers::stream_json(messages, size, unbatched).c_str(),
      postal_peers::stream_json(messages, size, batched).c_str(),
      postal_peers::stream_json(messages, size, framed).c_str(),
      postal_peers::round_trip_json(std::move(rtt), rtt_elapsed).c_str());
  return 0;
}
