#include "postal/runtime/delivery_failure.h"

#include "absl/strings/str_cat.h"
#include "postal/wire/absl_compat.h"

namespace postal::runtime {

std::string_view to_string(FailureKind kind) {
  switch (kind) {
    case FailureKind::kInvalidReference: return "invalid reference";
    case FailureKind::kTransport: return "undeliverable: transport";
    case FailureKind::kPortGone: return "undeliverable: port gone";
    case FailureKind::kExpired: return "expired";
  }
  return "unknown failure";
}

std::string_view to_string(InvalidReason reason) {
  switch (reason) {
    case InvalidReason::kNone: return "none";
    case InvalidReason::kActorNotExist: return "actor does not exist";
    case InvalidReason::kHandlerNotBound: return "handler not bound";
    case InvalidReason::kActorStopped: return "actor stopped";
    case InvalidReason::kActorFailed: return "actor failed";
    case InvalidReason::kPortNeverAllocated: return "port never allocated";
    case InvalidReason::kProtocolMismatch: return "protocol mismatch";
    case InvalidReason::kWrongMailboxOwner: return "wrong mailbox owner";
  }
  return "unknown reason";
}

std::string_view to_string(TransportReason reason) {
  switch (reason) {
    case TransportReason::kNone: return "none";
    case TransportReason::kChannelClosed: return "channel closed";
    case TransportReason::kAckTimedOut: return "ack timed out";
    case TransportReason::kDialFailed: return "dial failed";
    case TransportReason::kNoRoute: return "no route";
    case TransportReason::kOversizedFrame: return "oversized frame";
    case TransportReason::kLinkUnavailable: return "link unavailable";
    case TransportReason::kOverloaded: return "overloaded";
  }
  return "unknown reason";
}

std::string_view to_string(OverloadBound bound) {
  switch (bound) {
    case OverloadBound::kNone: return "a bound";
    case OverloadBound::kMailboxMessages: return "mailbox messages";
    case OverloadBound::kMailboxBytes: return "mailbox bytes";
    case OverloadBound::kChannelMessages: return "channel queue messages";
    case OverloadBound::kChannelBytes: return "channel queue bytes";
    case OverloadBound::kDestinationMessages: return "channel queue messages for the destination";
    case OverloadBound::kDestinationBytes: return "channel queue bytes for the destination";
  }
  return "a bound";
}

DeliveryFailure DeliveryFailure::invalid_reference(std::string target, InvalidReason reason,
                                                   std::string detail) {
  DeliveryFailure f;
  f.kind = FailureKind::kInvalidReference;
  f.invalid = reason;
  f.target = std::move(target);
  f.detail = std::move(detail);
  return f;
}

DeliveryFailure DeliveryFailure::transport_failure(std::string target, TransportReason reason,
                                                   std::string detail) {
  DeliveryFailure f;
  f.kind = FailureKind::kTransport;
  f.transport = reason;
  f.target = std::move(target);
  f.detail = std::move(detail);
  return f;
}

DeliveryFailure DeliveryFailure::oversized_frame(std::string target, uint64_t len, uint64_t max) {
  DeliveryFailure f = transport_failure(std::move(target), TransportReason::kOversizedFrame);
  f.len = len;
  f.max = max;
  return f;
}

DeliveryFailure DeliveryFailure::overloaded(std::string target, OverloadBound bound, uint64_t len,
                                            uint64_t max, std::string detail) {
  DeliveryFailure f =
      transport_failure(std::move(target), TransportReason::kOverloaded, std::move(detail));
  f.bound = bound;
  f.len = len;
  f.max = max;
  return f;
}

DeliveryFailure DeliveryFailure::port_gone(std::string port, std::string message_type) {
  DeliveryFailure f;
  f.kind = FailureKind::kPortGone;
  f.target = std::move(port);
  f.message_type = std::move(message_type);
  return f;
}

DeliveryFailure DeliveryFailure::expired(std::string target) {
  DeliveryFailure f;
  f.kind = FailureKind::kExpired;
  f.target = std::move(target);
  f.detail = "ttl reached 0";
  return f;
}

namespace {

// Cuts `text` to at most `max` bytes (ending "..."), never inside a UTF-8 character.
void cut_at(std::string& text, size_t max) {
  if (text.size() <= max) return;
  size_t cut = max - 3;
  // Back up over UTF-8 continuation bytes so that no character is split.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  text.resize(cut);
  text += "...";
}

}  // namespace

std::string DeliveryFailure::clip_detail(std::string_view text) {
  std::string out(text.substr(0, kMaxDetail + 4));  // enough to find a boundary
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  cut_at(out, kMaxDetail);
  return out;
}

std::string DeliveryFailure::to_string() const {
  std::string line = absl::StrCat("deliver to ", target, ": ", sv(runtime::to_string(kind)));
  switch (kind) {
    case FailureKind::kInvalidReference:
      absl::StrAppend(&line, ": ", sv(runtime::to_string(invalid)));
      break;
    case FailureKind::kTransport:
      absl::StrAppend(&line, ": ", sv(runtime::to_string(transport)));
      if (transport == TransportReason::kOversizedFrame) {
        absl::StrAppend(&line, " (", len, " bytes > max ", max, ")");
      } else if (transport == TransportReason::kOverloaded) {
        absl::StrAppend(&line, " (", sv(runtime::to_string(bound)), ": ", len, " of max ", max, ")");
      }
      break;
    case FailureKind::kPortGone:
      absl::StrAppend(&line, " (", message_type, ")");
      break;
    case FailureKind::kExpired:
      break;
  }
  if (!detail.empty()) absl::StrAppend(&line, " (", detail, ")");
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  cut_at(line, kMaxLine);
  return line;
}

absl::Status DeliveryFailure::to_status() const {
  absl::StatusCode code = absl::StatusCode::kUnknown;
  switch (kind) {
    case FailureKind::kInvalidReference:
      switch (invalid) {
        case InvalidReason::kActorNotExist:
        case InvalidReason::kPortNeverAllocated:
          code = absl::StatusCode::kNotFound;
          break;
        case InvalidReason::kHandlerNotBound:
          code = absl::StatusCode::kUnimplemented;
          break;
        case InvalidReason::kActorStopped:
        case InvalidReason::kActorFailed:
          code = absl::StatusCode::kFailedPrecondition;
          break;
        case InvalidReason::kProtocolMismatch:
        case InvalidReason::kWrongMailboxOwner:
          code = absl::StatusCode::kInvalidArgument;
          break;
        case InvalidReason::kNone:
          break;
      }
      break;
    case FailureKind::kPortGone:
      code = absl::StatusCode::kFailedPrecondition;
      break;
    case FailureKind::kExpired:
      code = absl::StatusCode::kDeadlineExceeded;
      break;
    case FailureKind::kTransport:
      code = transport == TransportReason::kOverloaded ? absl::StatusCode::kResourceExhausted
                                                       : absl::StatusCode::kUnavailable;
      break;
  }
  return absl::Status(code, to_string());
}

}  // namespace postal::runtime
