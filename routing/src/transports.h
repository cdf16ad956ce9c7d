// The channel implementations behind ChannelClient::dial and ChannelServer::serve (routing
// internal): stream (ipc, tcp) in stream_client.cc / stream_server.cc, inproc in inproc.cc, nats
// in nats_channel.cc.
#pragma once

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "byte_sink.h"
#include "postal/routing/channel.h"
#include "postal/routing/channel_client.h"
#include "postal/routing/channel_server.h"

namespace postal::routing::internal {

// `in_background`: connect on the I/O thread (ChannelClient::dial_async) instead of now.
// `label`: how logs and errors name the channel; empty: `addr`.
// `dialer`: connections come from it, not from connecting to `addr` (nats://, byte_sink.h).
absl::StatusOr<std::unique_ptr<ChannelClient>> dial_stream(
    IoThread& io, runtime::ChannelAddr addr, runtime::ReturnHandle& returns, ChannelOptions options,
    bool in_background, std::string label = {}, SinkDialer dialer = {});
// `adopt` null: listens on `addr` (ipc, tcp). Otherwise nothing listens: `*adopt` is set to what
// hands the server its connections (nats://, byte_sink.h).
absl::StatusOr<std::unique_ptr<ChannelServer>> serve_stream(IoThread& io, runtime::ChannelAddr addr,
                                                            runtime::MailboxSender& deliver_to,
                                                            runtime::ReturnHandle& ret,
                                                            ChannelOptions options,
                                                            SinkAdopter* adopt = nullptr);
// nats:// (nats_channel.cc): the stream channel through a tunnel over NATS (nats_tunnel.h).
absl::StatusOr<std::unique_ptr<ChannelClient>> dial_nats(IoThread& io, runtime::ChannelAddr addr,
                                                         runtime::ReturnHandle& returns,
                                                         ChannelOptions options,
                                                         bool in_background);
absl::StatusOr<std::unique_ptr<ChannelServer>> serve_nats(IoThread& io, runtime::ChannelAddr addr,
                                                          runtime::MailboxSender& deliver_to,
                                                          runtime::ReturnHandle& ret,
                                                          ChannelOptions options);
absl::StatusOr<std::unique_ptr<ChannelClient>> dial_inproc(runtime::ChannelAddr addr);
absl::StatusOr<std::unique_ptr<ChannelServer>> serve_inproc(runtime::ChannelAddr addr,
                                                            runtime::MailboxSender& deliver_to,
                                                            runtime::ReturnHandle& ret);

// Runs `fn` on the I/O thread and waits for it (inline when already there).
void run_in_io_thread(IoThread& io, const std::function<void()>& fn);

}  // namespace postal::routing::internal
