// Socket helpers shared by the ipc/tcp channel client and server (routing internal).
//
// Both transports use asio's generic stream sockets, so one client and one server serve AF_UNIX
// (paths and abstract names) and TCP (IPv4 and IPv6) alike.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "postal/runtime/logger.h"
#include "absl/time/time.h"
#include "postal/runtime/location.h"

namespace postal::routing::internal {

// The routing layer's logger.
inline const runtime::Logger& log() { return runtime::Logger::routing(); }

using Socket = boost::asio::generic::stream_protocol::socket;
using Endpoint = boost::asio::generic::stream_protocol::endpoint;
using Acceptor = boost::asio::basic_socket_acceptor<boost::asio::generic::stream_protocol>;

// "connection refused (ECONNREFUSED)": the OS message, lowercased, and the errno name.
std::string os_error(const boost::system::error_code& ec);
std::string os_error(int err);

// The endpoints of an ipc or tcp address (tcp hosts are resolved now, synchronously; `passive`
// resolves for listening). InvalidArgument for inproc; Unavailable when a host does not resolve.
absl::StatusOr<std::vector<Endpoint>> endpoints_of(const runtime::ChannelAddr& addr, bool passive);

// Connects `socket` to the first endpoint that accepts, waiting at most `timeout` for each.
// The error names the OS error of the last attempt (the caller adds the address).
absl::Status connect_blocking(Socket& socket, const std::vector<Endpoint>& endpoints,
                              absl::Duration timeout);

// FD_CLOEXEC on a descriptor asio opened (asio does not ask for it): no exec'd child inherits it.
void set_cloexec(int fd);

// TCP_NODELAY on tcp sockets (frames are batched by the channel; Nagle only adds latency).
void tune(Socket& socket, const runtime::ChannelAddr& addr);
// A send buffer of kIpcSendBuffer on an ipc socket (tcp autotunes its own). Only for a channel
// that carries large payloads: with it, a stream of small ones is written by the sending worker
// alone, since the socket never fills and hands the writes to the I/O thread (measured ~10 %
// fewer 64 B msgs/s, docs/benchmarks.md, issue 9).
void widen_send_buffer(Socket& socket, const runtime::ChannelAddr& addr);
inline constexpr int kIpcSendBuffer = 2 << 20;

// The port of a bound tcp endpoint.
uint16_t tcp_port(const Endpoint& endpoint);

// Whether an endpoint never leaves the host: 127.0.0.0/8, ::1, ::ffff:127.x, or a unix socket.
// R-SEC-1: a tcp connection whose peer is on loopback may run without TLS in mode auto.
bool is_loopback(const Endpoint& endpoint);

}  // namespace postal::routing::internal
