// RawPeer: a peer speaking wire v2 frames by hand over a Unix or tcp socket, for the protocol edges and
// the listener bounds of a ChannelServer and the client's handshake (routing/src/frames_v2.h,
// docs/wire.md).
//
// It blocks the calling thread (with a deadline on every wait), and never throws: a send to a
// connection the peer closed reports false. Needs postal_routing linked and routing/src on the
// include path.
#pragma once

#include <poll.h>

#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <unistd.h>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "envelope_codec.h"
#include "frames_v2.h"
#include "le_bytes.h"
#include "postal/runtime/location.h"

namespace postal::test_support {

class RawPeer {
 public:
  using LocalSocket = boost::asio::local::stream_protocol::socket;
  static constexpr absl::Duration kWait = absl::Seconds(20);

  using TcpSocket = boost::asio::ip::tcp::socket;
  explicit RawPeer(LocalSocket socket)
      : socket_(socket.get_executor(), boost::asio::generic::stream_protocol(AF_UNIX, 0),
                socket.release()) {}
  explicit RawPeer(TcpSocket socket)
      : socket_(socket.get_executor(), boost::asio::generic::stream_protocol(AF_INET, IPPROTO_TCP),
                socket.release()) {}

  // Whether every byte was written (false: the connection is gone).
  bool send(std::string_view bytes) {
    boost::system::error_code ec;
    boost::asio::write(socket_, boost::asio::buffer(bytes.data(), bytes.size()), ec);
    return !ec;
  }
  // Any frame v2::append encodes.
  template <class F>
    requires(!std::is_convertible_v<const F&, std::string_view>)
  bool send(const F& frame) {
    std::string bytes;
    routing::internal::v2::append(bytes, frame);
    return send(bytes);
  }
  void close() { socket_.close(); }

  // A frame as received: its kind and a copy of its body.
  struct Received {
    routing::internal::v2::Kind kind;
    std::string body;
  };

  // The next frame, or nullopt at end of stream / after `timeout`.
  std::optional<Received> next(absl::Duration timeout = kWait) {
    const absl::Time give_up = absl::Now() + timeout;
    for (;;) {
      auto f = splitter_.next();
      if (!f.ok()) return std::nullopt;
      if (f->has_value()) return Received{(*f)->kind, std::string((*f)->body)};
      if (!read_some(give_up)) return std::nullopt;
    }
  }

  // Whether the server closed the connection within `timeout` (frames it sent are skipped).
  bool closed_within(absl::Duration timeout = kWait) {
    const absl::Time give_up = absl::Now() + timeout;
    while (read_some(give_up)) {
    }
    return eof_;
  }

 private:
  // Reads what is there; false at end of stream, on an error or past `give_up`.
  bool read_some(absl::Time give_up) {
    pollfd p{socket_.native_handle(), POLLIN, 0};
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(give_up - absl::Now()));
    if (ms <= 0 || ::poll(&p, 1, ms) <= 0) return false;
    char buf[4096];
    boost::system::error_code ec;
    const size_t n = socket_.read_some(boost::asio::buffer(buf), ec);
    if (ec) {
      eof_ = true;  // end of stream or reset: the server closed it
      return false;
    }
    splitter_.feed(std::string_view(buf, n));
    return true;
  }

  boost::asio::generic::stream_protocol::socket socket_;
  routing::internal::v2::FrameSplitter splitter_{1 << 20};
  bool eof_ = false;
};

// `env` as the whole DATA frame `seq` of the session whose sending dictionary is `encoder`
// (frames must be made in seq order: a frame defines what later ones refer to).
inline std::string data_frame(routing::internal::v2::EnvelopeEncoder& encoder, uint64_t seq,
                              runtime::MessageEnvelope& env) {
  namespace v2 = routing::internal::v2;
  std::string frame;
  v2::put<uint32_t>(frame, 0);
  v2::put<uint8_t>(frame, static_cast<uint8_t>(v2::Kind::kData));
  if (!encoder.encode(seq, env, frame).ok()) return std::string();
  const uint32_t length = static_cast<uint32_t>(frame.size() - 4);
  std::memcpy(frame.data(), &length, sizeof(length));
  return frame;
}

// The Unix socket endpoint of the ipc address `addr` (a path or an abstract name).
inline boost::asio::local::stream_protocol::endpoint local_endpoint(
    const runtime::ChannelAddr& addr) {
  const std::string path(addr.path());
  return boost::asio::local::stream_protocol::endpoint(
      addr.is_abstract() ? std::string(1, '\0') + path : path);
}

// A RawPeer connected to the ipc or (numeric) tcp address `addr`.
inline RawPeer connect_raw(boost::asio::io_context& ctx, const runtime::ChannelAddr& addr) {
  if (addr.transport() == runtime::ChannelAddr::Transport::kTcp) {
    RawPeer::TcpSocket socket(ctx);
    socket.connect(boost::asio::ip::tcp::endpoint(
        boost::asio::ip::make_address(std::string(addr.host())), addr.port()));
    return RawPeer(std::move(socket));
  }
  RawPeer::LocalSocket socket(ctx);
  socket.connect(local_endpoint(addr));
  return RawPeer(std::move(socket));
}

}  // namespace postal::test_support
