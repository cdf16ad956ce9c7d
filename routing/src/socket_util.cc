#include "socket_util.h"

#include <fcntl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include "absl/strings/str_cat.h"
#include "postal/wire/absl_compat.h"

namespace postal::routing::internal {
namespace {

std::string_view errno_name(int err) {
  switch (err) {
    case ECONNREFUSED:
      return "ECONNREFUSED";
    case ECONNRESET:
      return "ECONNRESET";
    case ECONNABORTED:
      return "ECONNABORTED";
    case ETIMEDOUT:
      return "ETIMEDOUT";
    case EHOSTUNREACH:
      return "EHOSTUNREACH";
    case ENETUNREACH:
      return "ENETUNREACH";
    case ENETDOWN:
      return "ENETDOWN";
    case ENOENT:
      return "ENOENT";
    case EACCES:
      return "EACCES";
    case EPERM:
      return "EPERM";
    case EADDRINUSE:
      return "EADDRINUSE";
    case EADDRNOTAVAIL:
      return "EADDRNOTAVAIL";
    case EAGAIN:
      return "EAGAIN";
    case EPIPE:
      return "EPIPE";
    case ENOTDIR:
      return "ENOTDIR";
    case ENAMETOOLONG:
      return "ENAMETOOLONG";
    case EMFILE:
      return "EMFILE";
    case ENFILE:
      return "ENFILE";
    case ENOBUFS:
      return "ENOBUFS";
    case EINVAL:
      return "EINVAL";
    case EAFNOSUPPORT:
      return "EAFNOSUPPORT";
    case ENOTCONN:
      return "ENOTCONN";
    case ECANCELED:
      return "ECANCELED";
    default:
      return {};
  }
}

std::string lowercase_first(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

}  // namespace

std::string os_error(int err) {
  std::string text = lowercase_first(std::strerror(err));
  std::string_view name = errno_name(err);
  if (name.empty()) return absl::StrCat(text, " (errno ", err, ")");
  return absl::StrCat(text, " (", sv(name), ")");
}

std::string os_error(const boost::system::error_code& ec) {
  if (ec.category() == boost::system::system_category() ||
      ec.category() == boost::system::generic_category()) {
    return os_error(ec.value());
  }
  return lowercase_first(ec.message());  // e.g. "end of file"
}

absl::StatusOr<std::vector<Endpoint>> endpoints_of(const runtime::ChannelAddr& addr, bool passive) {
  using runtime::ChannelAddr;
  switch (addr.transport()) {
    case ChannelAddr::Transport::kInproc:
    case ChannelAddr::Transport::kNats:
      return absl::InvalidArgumentError(absl::StrCat(
          addr.to_string(), " is an ", addr.transport() == ChannelAddr::Transport::kNats ? "nats" : "inproc",
          " address; it has no socket endpoint"));
    case ChannelAddr::Transport::kIpc: {
      std::string path(addr.path());
      if (addr.is_abstract()) path.insert(path.begin(), '\0');
      if (path.size() > runtime::ChannelAddr::kMaxIpcPath) {
        return absl::InvalidArgumentError(
            absl::StrCat(addr.to_string(), ": an abstract name is at most ",
                         runtime::ChannelAddr::kMaxIpcPath - 1, " bytes"));
      }
      return std::vector<Endpoint>{Endpoint(boost::asio::local::stream_protocol::endpoint(path))};
    }
    case ChannelAddr::Transport::kTcp: {
      boost::asio::io_context resolver_context;
      boost::asio::ip::tcp::resolver resolver(resolver_context);
      boost::system::error_code ec;
      auto flags = passive ? boost::asio::ip::resolver_base::passive
                           : boost::asio::ip::resolver_base::flags();
      auto results = resolver.resolve(std::string(addr.host()), std::to_string(addr.port()),
                                      flags | boost::asio::ip::resolver_base::numeric_service, ec);
      if (ec || results.empty()) {
        return absl::UnavailableError(absl::StrCat("cannot resolve ", sv(addr.host()), " of ",
                                                   addr.to_string(), ": ",
                                                   ec ? os_error(ec) : "no address"));
      }
      std::vector<Endpoint> endpoints;
      for (const auto& entry : results) endpoints.emplace_back(entry.endpoint());
      return endpoints;
    }
  }
  return absl::InvalidArgumentError("unknown transport");
}

void set_cloexec(int fd) {
  if (fd < 0) return;
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

absl::Status connect_blocking(Socket& socket, const std::vector<Endpoint>& endpoints,
                              absl::Duration timeout) {
  int last_error = EINVAL;
  for (const Endpoint& endpoint : endpoints) {
    boost::system::error_code ec;
    socket.close(ec);
    socket.open(endpoint.protocol(), ec);
    if (!ec) set_cloexec(socket.native_handle());
    if (!ec) socket.native_non_blocking(true, ec);
    if (ec) {
      last_error = ec.value();
      continue;
    }
    const int fd = socket.native_handle();
    int rc = ::connect(fd, endpoint.data(), static_cast<socklen_t>(endpoint.size()));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout));
      do {
        rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
      } while (rc < 0 && errno == EINTR);
      if (rc == 0) {
        err = ETIMEDOUT;
      } else if (rc < 0) {
        err = errno;
      } else {
        socklen_t len = sizeof(err);
        if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    if (err == 0) return absl::OkStatus();
    last_error = err;
  }
  boost::system::error_code ignored;
  socket.close(ignored);
  return absl::UnavailableError(os_error(last_error));
}

void tune(Socket& socket, const runtime::ChannelAddr& addr) {
  if (addr.transport() != runtime::ChannelAddr::Transport::kTcp) return;
  boost::system::error_code ec;
  socket.set_option(boost::asio::ip::tcp::no_delay(true), ec);  // best effort
}

void widen_send_buffer(Socket& socket, const runtime::ChannelAddr& addr) {
  if (addr.transport() != runtime::ChannelAddr::Transport::kIpc) return;
  // A Unix socket queues at most its send buffer (208 KiB by default, three 64 KiB messages):
  // each write round then waits for the reader. A larger one lets the writer run ahead by a
  // read's worth and more (issue 9); the kernel caps it at net.core.wmem_max.
  boost::system::error_code ec;
  socket.set_option(boost::asio::socket_base::send_buffer_size(kIpcSendBuffer), ec);  // best effort
}

uint16_t tcp_port(const Endpoint& endpoint) {
  const sockaddr* sa = endpoint.data();
  if (sa->sa_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  }
  if (sa->sa_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  }
  return 0;
}

bool is_loopback(const Endpoint& endpoint) {
  const sockaddr* sa = endpoint.data();
  if (sa->sa_family == AF_INET) {
    const uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr);
    return (a >> 24) == 127;  // 127.0.0.0/8
  }
  if (sa->sa_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;  // ::ffff:127.0.0.0/104
  }
  return sa->sa_family == AF_UNIX;
}

}  // namespace postal::routing::internal
