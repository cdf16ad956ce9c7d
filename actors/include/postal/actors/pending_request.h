// PendingRequest<R>: event-based request/reply (R-ACT-10), beside the blocking `request`.
//
//   cx.request(store.port<Get>(), Get{key}, absl::Seconds(1))
//       .then([](postal::Context& cx, absl::StatusOr<Value> v) -> absl::Status { ... });
//
// `then` sends the request and returns at once; no fiber waits. The continuation runs later on
// the actor, one message at a time like a handler (R-ACT-2), with exactly one outcome: the reply,
// DeadlineExceeded after `timeout` (the proc's clock, virtual on a deterministic proc), or
// Unavailable at once when the request comes back undeliverable (its failure line is the
// message). A reply after the timeout gets PortGone. An error from the continuation fails the
// actor as a handler's would. Continuations belong to the incarnation that made them: a restart
// (R-SUP-1) or the actor's end drops them (and replies then get PortGone).
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/runtime/port.h"

namespace postal::actors {

class Context;

// What the runtime hands a continuation: the decoded reply, or why there is none.
using ReplyContinuation = std::function<absl::Status(Context&, wire::Any* reply, absl::Status)>;

// An outcome other than a reply, delivered to the actor like one (actors internal).
struct ReplyFailed {
  int code = 0;  // absl::StatusCode
  std::string message;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(code, message);
  }
};

namespace internal {
// Implemented by the actor cell: opens a once reply port whose outcome runs `cont`; returns the
// port's address (and its index in `*index`).
class ReplyPorts {
 public:
  virtual ~ReplyPorts() = default;
  virtual runtime::PortAddr open_reply(uint64_t type_hash, runtime::DecodeFn decode,
                                       absl::Duration timeout, ReplyContinuation cont,
                                       uint64_t* index) = 0;
};
}  // namespace internal

template <wire::RegisteredMessage Req>
class [[nodiscard]] PendingRequest {
 public:
  using Reply = typename Req::Reply;
  PendingRequest(runtime::SendContext& cx, internal::ReplyPorts& ports, runtime::PortRef<Req> to,
                 Req req, absl::Duration timeout)
      : cx_(cx), ports_(ports), to_(std::move(to)), req_(std::move(req)), timeout_(timeout) {}

  // `fn(Context&, absl::StatusOr<Reply>) -> absl::Status`. Sends the request.
  template <class F>
  void then(F&& fn) && {
    uint64_t index = 0;
    runtime::PortAddr reply = ports_.open_reply(
        wire::type_hash<Reply>(), &runtime::decode_as<Reply>, timeout_,
        [fn = std::forward<F>(fn)](Context& cx, wire::Any* any, absl::Status failed) {
          if (any == nullptr) return fn(cx, absl::StatusOr<Reply>(std::move(failed)));
          return fn(cx, absl::StatusOr<Reply>(std::move(*any->get<Reply>())));
        },
        &index);
    req_.reply_to = runtime::OncePortRef<Reply>(std::move(reply), cx_.mailbox());
    wire::Headers headers;
    headers.set(runtime::kReplyPortHeader, index);  // a bounced request fails it at once
    to_.send(cx_, std::move(req_), std::move(headers));
  }

 private:
  runtime::SendContext& cx_;
  internal::ReplyPorts& ports_;
  runtime::PortRef<Req> to_;
  Req req_;
  absl::Duration timeout_;
};

}  // namespace postal::actors

POSTAL_MESSAGE(postal::actors::ReplyFailed, "postal.ReplyFailed");
