// The transport-picking factories of ChannelClient and ChannelServer (IoThread: io_thread.cc).
#include "postal/routing/channel.h"

#include <future>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "postal/routing/channel_client.h"
#include "postal/routing/channel_server.h"
#include "postal/runtime/mailbox_bound.h"
#include "postal/runtime/thread_name.h"
#include "postal/wire/absl_compat.h"
#include "socket_util.h"
#include "transports.h"

namespace postal::routing {

using runtime::ChannelAddr;

std::string_view to_string(TlsMode mode) {
  switch (mode) {
    case TlsMode::kOn:
      return "on";
    case TlsMode::kOff:
      return "off";
    case TlsMode::kAuto:
      break;
  }
  return "auto";
}

absl::StatusOr<TlsMode> parse_tls_mode(std::string_view text) {
  for (TlsMode m : {TlsMode::kAuto, TlsMode::kOn, TlsMode::kOff}) {
    if (text == to_string(m)) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("tls mode \"", sv(text), "\": expected auto, on or off (R-SEC-1)"));
}

absl::StatusOr<std::unique_ptr<ChannelClient>> ChannelClient::dial(IoThread& io, ChannelAddr addr,
                                                                   runtime::ReturnHandle& returns,
                                                                   ChannelOptions options) {
  if (addr.transport() == ChannelAddr::Transport::kInproc) return internal::dial_inproc(addr);
  if (addr.transport() == ChannelAddr::Transport::kNats) {
    return internal::dial_nats(io, std::move(addr), returns, options, /*in_background=*/false);
  }
  return internal::dial_stream(io, std::move(addr), returns, options, /*in_background=*/false);
}

absl::StatusOr<std::unique_ptr<ChannelClient>> ChannelClient::dial_async(
    IoThread& io, ChannelAddr addr, runtime::ReturnHandle& returns, ChannelOptions options) {
  if (addr.transport() == ChannelAddr::Transport::kInproc) return internal::dial_inproc(addr);
  if (addr.transport() == ChannelAddr::Transport::kNats) {
    return internal::dial_nats(io, std::move(addr), returns, options, /*in_background=*/true);
  }
  return internal::dial_stream(io, std::move(addr), returns, options, /*in_background=*/true);
}

absl::StatusOr<std::unique_ptr<ChannelServer>> ChannelServer::serve(
    IoThread& io, ChannelAddr addr, runtime::MailboxSender& deliver_to, runtime::ReturnHandle& ret,
    ChannelOptions options) {
  if (addr.transport() == ChannelAddr::Transport::kInproc) {
    return internal::serve_inproc(std::move(addr), deliver_to, ret);
  }
  if (addr.transport() == ChannelAddr::Transport::kNats) {
    return internal::serve_nats(io, std::move(addr), deliver_to, ret, options);
  }
  return internal::serve_stream(io, std::move(addr), deliver_to, ret, options);
}

namespace internal {

void run_in_io_thread(IoThread& io, const std::function<void()>& fn) {
  if (io.in_io_thread()) {
    fn();
    return;
  }
  std::promise<void> done;
  boost::asio::post(io.context(), [&] {
    fn();
    done.set_value();
  });
  done.get_future().wait();
}

}  // namespace internal
}  // namespace postal::routing
