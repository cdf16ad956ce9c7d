#include "postal/routing/return_kinds.h"

namespace postal::routing {

using runtime::FailureKind;

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
  return root.kind == FailureKind::kTransport && root.maybe_delivered;
}

}  // namespace postal::routing
