// R-SEC-1: which connections run TLS (tls_policy.h).
#include "tls_policy.h"

#include "absl/strings/str_cat.h"

namespace postal::routing::internal {

absl::StatusOr<std::shared_ptr<const TlsContext>> tls_context_for(const ChannelOptions& options,
                                                                  const runtime::ChannelAddr& addr,
                                                                  TlsContext::Role role) {
  if (addr.transport() != runtime::ChannelAddr::Transport::kTcp) return nullptr;
  if (options.tls == TlsMode::kOff) return nullptr;
  if (options.key == nullptr) {
    if (options.tls == TlsMode::kAuto) return nullptr;  // as before issue 10: said once, in auth
    return absl::InvalidArgumentError(absl::StrCat(
        role == TlsContext::Role::kClient ? "dial " : "serve ", addr.to_string(),
        ": tls on needs the topology key (ChannelOptions::key): the TLS PSK is derived from it "
        "(R-SEC-1); give the proc its secret (--secret-fd) or set tls to auto"));
  }
  return TlsContext::make(role, *options.key);
}

bool client_uses_tls(const ChannelOptions& options, const Endpoint& peer) {
  return options.tls == TlsMode::kOn || (options.tls == TlsMode::kAuto && !is_loopback(peer));
}

TlsUse server_tls_use(const ChannelOptions& options, bool has_context, const Endpoint& peer) {
  if (!has_context) return TlsUse::kNever;
  if (options.tls == TlsMode::kOn || !is_loopback(peer)) return TlsUse::kMust;
  return TlsUse::kMay;  // auto on loopback: a local client may run either
}

}  // namespace postal::routing::internal
