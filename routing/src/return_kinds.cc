#include "postal/routing/return_kinds.h"

#include "absl/strings/match.h"

namespace postal::routing {

using runtime::FailureKind;
using runtime::TransportReason;

std::string return_kind(const runtime::DeliveryFailure& root) {
  switch (root.kind) {
    case FailureKind::kTransport: return std::string(runtime::to_string(root.transport));
    case FailureKind::kInvalidReference: return std::string(runtime::to_string(root.invalid));
    case FailureKind::kPortGone: return "port gone";
    case FailureKind::kExpired: return "expired";
  }
  return "unknown";
}

bool possibly_delivered(const runtime::DeliveryFailure& root) {
  if (root.kind != FailureKind::kTransport) return false;
  if (root.transport == TransportReason::kAckTimedOut) return true;
  // stream_client_session.cc marks the server_stopping GOODBYE "(the server stopped)".
  return root.transport == TransportReason::kChannelClosed &&
         !absl::StrContains(root.detail, "(the server stopped)");
}

}  // namespace postal::routing
