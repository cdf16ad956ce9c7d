// Typed ports (R-PORT-3).
//
//   PortRef<T>       an addressable reference to a port of type T: serializable, sendable inside
//                    messages, usable from any proc. `send(cx, value)` posts an envelope.
//   OncePortRef<T>   the same for a port that accepts exactly one message (replies).
//   PortHandle<T>    the local, typed handle of a port in this process: sends move the value
//                    into the mailbox with no serialization and no routing. `bind()` → PortRef.
//   PortReceiver<T>  receives what arrives at an ephemeral port; dropping it makes the port gone
//                    (later sends fail with PortGone, R-MBX-2).
//   OnceReceiver<T>  receives the one message of a once port.
//
// `open_port<T>(cx)` / `open_once_port<T>(cx)` allocate an ephemeral port on the context's
// mailbox (R-PORT-1) and return its handle and receiver.
//
// `send` never fails at the call: what cannot be delivered comes back to the sender as an
// `UndeliverableEnvelope` (R-FAIL-3). `try_send` (R-FAIL-6, `Proc::try_post`) reports a refusal
// this proc can see at once — actor does not exist / stopped / failed, handler not bound, port
// never allocated or gone, TTL expired, no route — as its `absl::Status` instead, and then the
// envelope is not returned; a send to another proc is OK once handed to the forwarder.
#pragma once

#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "postal/runtime/mailbox.h"
#include "postal/runtime/proc.h"
#include "postal/runtime/receiver_queue.h"
#include "postal/runtime/send_context.h"

namespace postal::runtime {

namespace internal {

inline EnvelopePtr make_envelope(SendContext& cx, const PortAddr& dest, wire::Any data,
                                 wire::Headers headers) {
  auto env = MessageEnvelope::make(cx.self_addr(), dest, std::move(data), cx.proc().default_ttl());
  if (!headers.empty()) env->headers() = std::move(headers);
  return env;
}

}  // namespace internal

// T is checked when a send is compiled, so a message may hold a PortRef to its own type.
template <class T>
class PortRef {
 public:
  PortRef() = default;
  explicit PortRef(PortAddr addr, std::shared_ptr<Mailbox> local = nullptr)
      : addr_(std::move(addr)), local_(std::move(local)) {}

  const PortAddr& addr() const { return addr_; }

  void send(SendContext& cx, T value, wire::Headers headers = {}) const {
    cx.proc().send(internal::make_envelope(cx, addr_, wire::Any::make(std::move(value)),
                                           std::move(headers)),
                   local_.get());
  }
  // R-FAIL-6: a local refusal is the result (see the header comment).
  absl::Status try_send(SendContext& cx, T value, wire::Headers headers = {}) const {
    return cx.proc().try_post(internal::make_envelope(cx, addr_, wire::Any::make(std::move(value)),
                                                      std::move(headers)),
                              local_.get());
  }

  bool operator==(const PortRef& o) const { return addr_ == o.addr_; }

  template <class Archive>
  void save(Archive& ar) const {
    ar(addr_);
  }
  template <class Archive>
  void load(Archive& ar) {
    ar(addr_);
    local_.reset();
  }

 private:
  PortAddr addr_;
  std::shared_ptr<Mailbox> local_;  // resolved destination, when it lives in this process
};

template <class T>
class OncePortRef {
 public:
  OncePortRef() = default;
  explicit OncePortRef(PortAddr addr, std::shared_ptr<Mailbox> local = nullptr)
      : ref_(std::move(addr), std::move(local)) {}
  const PortAddr& addr() const { return ref_.addr(); }
  bool valid() const { return !(ref_.addr() == PortAddr{}); }
  void send(SendContext& cx, T value) const { ref_.send(cx, std::move(value)); }
  absl::Status try_send(SendContext& cx, T value) const {
    return ref_.try_send(cx, std::move(value));
  }

  template <class Archive>
  void serialize(Archive& ar) {
    ar(ref_);
  }

 private:
  PortRef<T> ref_;
};

template <wire::RegisteredMessage T>
class PortHandle {
 public:
  PortHandle(std::shared_ptr<Mailbox> mailbox, Port port)
      : mailbox_(std::move(mailbox)), port_(port) {}

  PortRef<T> bind() const { return PortRef<T>(mailbox_->port_addr(port_), mailbox_); }

  // Sends from the mailbox's owner to itself; local only.
  void send(T value) const { mailbox_->proc().send(make(std::move(value)), mailbox_.get()); }
  // R-FAIL-6: PortGone (the receiver was dropped) and the like are the result, not a return.
  absl::Status try_send(T value) const {
    return mailbox_->proc().try_post(make(std::move(value)), mailbox_.get());
  }

 private:
  EnvelopePtr make(T value) const {
    return MessageEnvelope::make(mailbox_->owner(), mailbox_->port_addr(port_),
                                 wire::Any::make(std::move(value)),
                                 mailbox_->proc().default_ttl());
  }

  std::shared_ptr<Mailbox> mailbox_;
  Port port_;
};

template <wire::RegisteredMessage T>
class PortReceiver {
 public:
  PortReceiver(std::shared_ptr<ReceiverQueue> queue, std::shared_ptr<Mailbox> mailbox,
               uint64_t index)
      : queue_(std::move(queue)), mailbox_(std::move(mailbox)), index_(index) {}
  PortReceiver(PortReceiver&&) noexcept = default;
  PortReceiver& operator=(PortReceiver&& other) noexcept {
    if (this != &other) {
      close();
      queue_ = std::move(other.queue_);
      mailbox_ = std::move(other.mailbox_);
      index_ = other.index_;
    }
    return *this;
  }
  ~PortReceiver() { close(); }

  // The next message's envelope (payload already decoded as T).
  absl::StatusOr<EnvelopePtr> recv_envelope(absl::Duration timeout = absl::InfiniteDuration()) {
    return queue_->wait(timeout);
  }

  absl::StatusOr<T> recv(absl::Duration timeout = absl::InfiniteDuration()) {
    absl::StatusOr<EnvelopePtr> env = queue_->wait(timeout);
    if (!env.ok()) return env.status();
    return std::move(*(*env)->data().template get<T>());
  }

  uint64_t index() const { return index_; }
  // Whether a message (or the failure of the request behind this port) is waiting.
  bool ready() const { return queue_->ready(); }

 private:
  void close() {
    if (mailbox_) mailbox_->close_port(index_);
    mailbox_.reset();
  }

  std::shared_ptr<ReceiverQueue> queue_;
  std::shared_ptr<Mailbox> mailbox_;
  uint64_t index_;
};

template <wire::RegisteredMessage T>
using OnceReceiver = PortReceiver<T>;  // a once port delivers once; its receiver is the same

template <wire::RegisteredMessage T>
struct OpenPort {
  PortHandle<T> handle;
  PortReceiver<T> receiver;
};

template <wire::RegisteredMessage T>
struct OpenOncePort {
  OncePortRef<T> ref;
  OnceReceiver<T> receiver;
};

namespace internal {
template <wire::RegisteredMessage T>
std::pair<uint64_t, std::shared_ptr<ReceiverQueue>> open(Mailbox& mailbox, bool once) {
  auto queue = std::make_shared<ReceiverQueue>(mailbox.proc().scheduler());
  uint64_t index = mailbox.open_port(wire::type_hash<T>(), &decode_as<T>, queue, once);
  return {index, std::move(queue)};
}
}  // namespace internal

template <wire::RegisteredMessage T>
OpenPort<T> open_port(SendContext& cx) {
  std::shared_ptr<Mailbox> mailbox = cx.mailbox();
  auto [index, queue] = internal::open<T>(*mailbox, /*once=*/false);
  return OpenPort<T>{PortHandle<T>(mailbox, Port::ephemeral(index)),
                     PortReceiver<T>(std::move(queue), mailbox, index)};
}

template <wire::RegisteredMessage T>
OpenOncePort<T> open_once_port(SendContext& cx) {
  std::shared_ptr<Mailbox> mailbox = cx.mailbox();
  auto [index, queue] = internal::open<T>(*mailbox, /*once=*/true);
  return OpenOncePort<T>{OncePortRef<T>(mailbox->port_addr(Port::ephemeral(index)), mailbox),
                         OnceReceiver<T>(std::move(queue), mailbox, index)};
}

// Request/reply: fills `req.reply_to` with a fresh once port, sends (with `headers`, e.g. a
// stable message id), and waits for the reply
// on the calling fiber (a handler's worker keeps running other actors meanwhile). Fails with
// DeadlineExceeded after `timeout`, or at once with Unavailable when the request comes back
// undeliverable (its failure line is the message).
//
// R-ACT-8: on a deterministic proc nothing runs unless someone steps the scheduler. A request
// made outside a step (a test's Client) therefore drives `scheduler().step()` itself until the
// reply or a failure arrives or nothing is runnable, then waits as usual (what is left of the
// wait can only end with a reply from another thread, or DeadlineExceeded). A request made by a
// handler that a step is running keeps the step's rule (R-ACT-2): the step returns and the test
// keeps stepping.
template <wire::RegisteredMessage Req>
  requires requires(Req r) { r.reply_to; typename Req::Reply; }
absl::StatusOr<typename Req::Reply> request(SendContext& cx, const PortRef<Req>& to, Req req,
                                            absl::Duration timeout, wire::Headers headers = {}) {
  auto [reply_to, receiver] = open_once_port<typename Req::Reply>(cx);
  req.reply_to = std::move(reply_to);
  headers.set(kReplyPortHeader, receiver.index());
  to.send(cx, std::move(req), std::move(headers));
  Scheduler& sched = cx.proc().scheduler();
  if (sched.manual() && !sched.stepping()) {  // R-ACT-8
    while (!receiver.ready() && sched.step()) {
    }
  }
  return receiver.recv(timeout);
}

}  // namespace postal::runtime
