// When a channel connection runs TLS (R-SEC-1, ChannelOptions::tls; routing internal). The
// mechanism is tls_filter.h; this file is the policy, decided per connection from the actual
// peer address (not from a host name), so "off loopback" means what the kernel says.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "postal/routing/channel.h"
#include "postal/runtime/location.h"
#include "socket_util.h"
#include "tls_filter.h"

namespace postal::routing::internal {

// What a server lets a tcp connection speak: plaintext only, either (told apart by the first
// byte: wire.md §2.1), or TLS only.
enum class TlsUse { kNever, kMay, kMust };

// The TLS context one side of `addr` needs: null when it never uses TLS (ipc, nats tunnels,
// mode off, mode auto without a key); InvalidArgument for mode on without a key (the PSK comes
// from the key), naming what to set.
absl::StatusOr<std::shared_ptr<const TlsContext>> tls_context_for(const ChannelOptions& options,
                                                                  const runtime::ChannelAddr& addr,
                                                                  TlsContext::Role role);
// A client's connection to `peer`: TLS in mode on, and in mode auto off loopback (a context
// exists only when the mode allows TLS at all).
bool client_uses_tls(const ChannelOptions& options, const Endpoint& peer);
// A server's connection from `peer` (with `has_context`: the server can do TLS).
TlsUse server_tls_use(const ChannelOptions& options, bool has_context, const Endpoint& peer);

}  // namespace postal::routing::internal
