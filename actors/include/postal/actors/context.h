// Context: what a handler can do — send as this actor, spawn children, make requests, set
// timers, stop.
//
// Timers (R-SUP-3) belong to the actor that set them: `send_after(delay, to, m)` sends `m` to
// `to` as this actor once `delay` has passed, `send_every(period, to, m)` every `period` (the
// first after one period); `cancel(handle)` stops one (true when it was still pending). All of an
// actor's timers are cancelled when it is asked to stop, when it ends, and when it restarts
// (R-SUP-1). Time is the proc's clock: virtual on a deterministic proc (advance the clock, then
// step). The message is copied for each firing.
//
// Stash (what CAF's `skip` and Akka's Stash give): a handler not ready for its message gives it
// back with `cx.stash(std::move(m))` and returns OK; the message is kept with its envelope
// (sender, headers) and handled again after `cx.unstash_all()`, before anything newer, in the
// order stashed. A restart (R-SUP-1) unstashes everything for the new incarnation; when the actor
// ends, stashed messages go back to their senders like any unhandled ones (ActorStopped /
// ActorFailed). The stash counts against the mailbox bound (R-FLOW-1, runtime/mailbox_bound.h):
// what the actor keeps leaves less room for new messages.
//
// Selective receive (CAF's `become` with `skip` as the default handler, Akka's `become` with a
// Stash): `cx.receive_only<A, B>()` makes the actor handle only handler messages of those types
// until `cx.receive_all()`; any other handler message is stashed as it comes, without running a
// handler, exactly as if its handler had stashed it. `receive_all()` ends that and unstashes
// (everything put aside comes first, in order). Replies to the actor's own requests (R-ACT-10),
// `Down` and supervision messages are never held back. A restart starts the new incarnation
// receiving everything.
//
// A Context is handed to every handler and hook; it is valid during that call. It is a
// runtime::SendContext, so ports and actor refs send "as" this actor: the envelope's sender is
// this actor and undeliverables come back to it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/statusor.h"
#include "postal/actors/actor_handle.h"
#include "postal/actors/actor_type.h"
#include "postal/actors/pending_request.h"
#include "postal/runtime/port.h"
#include "postal/runtime/send_context.h"

namespace postal::actors {

// Names one timer of one actor (R-SUP-3); default: no timer.
class TimerHandle {
 public:
  TimerHandle() = default;
  explicit TimerHandle(uint64_t id) : id_(id) {}
  bool valid() const { return id_ != 0; }
  uint64_t id() const { return id_; }

 private:
  uint64_t id_ = 0;
};

class Context : public runtime::SendContext, public internal::ReplyPorts {
 public:
  // The envelope being handled (nullptr in init / on_stop).
  virtual const runtime::MessageEnvelope* envelope() const = 0;
  virtual ActorStatus status() const = 0;

  // R-ACT-5: refuse new handler messages, finish those already queued, then stop.
  virtual void stop(std::string reason = "stopped") = 0;

  // Spawns a child named `name` (a label; the child's uid is a fresh instance with that label).
  // The child stops when this actor stops or fails; its failure reaches `on_child_failed`
  // (escalate, R-ACT-3).
  template <ActorClass A, class... Args>
  absl::StatusOr<ActorHandle<A>> spawn(std::string_view name, Args&&... args) {
    return spawn<A>(SpawnOptions{}, name, std::forward<Args>(args)...);
  }
  // The same with a supervision strategy (R-SUP-1) or detached (supervision.h).
  template <ActorClass A, class... Args>
  absl::StatusOr<ActorHandle<A>> spawn(const SpawnOptions& options, std::string_view name,
                                       Args&&... args) {
    absl::StatusOr<runtime::Label> label = runtime::Label::parse(name);
    if (!label.ok()) return label.status();
    absl::StatusOr<std::shared_ptr<ActorControl>> control = internal::spawn_as<A>(
        proc(), this, runtime::Uid::random(*label), options, std::forward<Args>(args)...);
    if (!control.ok()) return control.status();
    return ActorHandle<A>(*std::move(control));
  }

  // R-SUP-3 (see the header comment).
  template <wire::RegisteredMessage M>
    requires std::copy_constructible<M>
  TimerHandle send_after(absl::Duration delay, const runtime::PortRef<M>& to, M message) {
    return start_timer(delay, absl::ZeroDuration(), timer_envelope(to, std::move(message)));
  }
  template <wire::RegisteredMessage M>
    requires std::copy_constructible<M>
  TimerHandle send_every(absl::Duration period, const runtime::PortRef<M>& to, M message) {
    return start_timer(period, period, timer_envelope(to, std::move(message)));
  }
  virtual bool cancel(TimerHandle timer) = 0;

  // R-SUP-2 (down.h): watch a local actor; exactly one Down reaches `on_down` when it ends.
  virtual absl::Status watch(const runtime::ActorAddr& who) = 0;
  // True when `who` was watched; no Down for it arrives afterwards.
  virtual bool unwatch(const runtime::ActorAddr& who) = 0;

  // R-ACT-10: event-based request/reply (pending_request.h): `.then(fn)` sends, nothing blocks.
  template <wire::RegisteredMessage Req>
    requires requires(Req r) { r.reply_to; typename Req::Reply; }
  PendingRequest<Req> request(runtime::PortRef<Req> to, Req req, absl::Duration timeout) {
    return PendingRequest<Req>(*this, *this, std::move(to), std::move(req), timeout);
  }

  // Stash (see the header comment). Only the message being handled, of its own type, once.
  template <wire::RegisteredMessage M>
  absl::Status stash(M message) {
    wire::Any* slot = nullptr;
    if (absl::Status s = stash_current(wire::type_hash<M>(), &slot); !s.ok()) return s;
    // The envelope still holds the (moved-from) message the handler took: it takes it back in
    // place, so re-stashing a replayed message allocates nothing.
    M* held = nullptr;
    if constexpr (std::is_move_assignable_v<M>) held = slot->get<M>();
    if (held != nullptr) {
      *held = std::move(message);
    } else {
      *slot = wire::Any::make(std::move(message));
    }
    return absl::OkStatus();
  }
  virtual void unstash_all() = 0;
  virtual size_t stashed() const = 0;
  // Selective receive (see the header comment). Each call replaces the last one's types.
  template <wire::RegisteredMessage... Ms>
    requires(sizeof...(Ms) > 0)
  void receive_only() {
    const uint64_t types[] = {wire::type_hash<Ms>()...};
    set_receive_only(types, sizeof...(Ms));
  }
  virtual void receive_all() = 0;
  virtual bool receiving_all() const = 0;
  // Handler messages queued for this actor behind the one being handled (not the stashed
  // ones): 0 when nothing else waits — a handler may then spend its time on this one (e.g. do
  // inline what it would otherwise hand to another thread to batch).
  virtual uint64_t queued_behind() const = 0;

  // The ActorRef of this actor, typed as A (A must be this actor's class).
  template <ActorClass A>
  ActorRef<A> self() {
    return ActorRef<A>(self_addr(), mailbox());
  }

 protected:
  // Marks the handler message being handled as stashed; `*slot` is its envelope's data.
  virtual absl::Status stash_current(uint64_t type_hash, wire::Any** slot) = 0;
  virtual void set_receive_only(const uint64_t* type_hashes, size_t n) = 0;
  using EnvelopeMaker = std::function<runtime::EnvelopePtr()>;
  // `period` zero: once. The maker runs on the timer's thread at each firing.
  virtual TimerHandle start_timer(absl::Duration delay, absl::Duration period,
                                  EnvelopeMaker make) = 0;

 private:
  template <class M>
  EnvelopeMaker timer_envelope(const runtime::PortRef<M>& to, M message) {
    return [from = self_addr(), dest = to.addr(), ttl = proc().default_ttl(),
            message = std::move(message)] {
      return runtime::MessageEnvelope::make(from, dest, wire::Any::make(M(message)), ttl);
    };
  }
};

}  // namespace postal::actors
