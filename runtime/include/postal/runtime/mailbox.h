// Mailbox: an actor's bound-port table and its local delivery (R-MBX-1…5, R-PORT-1…2).
//
// `post_unchecked` delivers an envelope only to a port of its owner:
//   - dest actor ≠ owner                       → InvalidReference(WrongMailboxOwner)   R-MBX-1
//   - closed (actor stopped / failed)          → ActorStopped / ActorFailed            R-MBX-3
//     (detail: the stop reason or the actor's error, bounded)                          R-ACT-6
//   - handler port not bound                   → HandlerNotBound                       R-MBX-2
//   - ephemeral index never allocated          → PortNeverAllocated                    R-MBX-2
//   - allocated but its receiver is gone       → PortGone                              R-MBX-2
//   - payload does not decode as the port type → ProtocolMismatch; port stays bound    R-MBX-4
// otherwise the decoded envelope goes to the port's sink; a once port is removed after its one
// delivery (R-MBX-5).
//
// Handler ports are keyed by type hash (R-PORT-2) and fixed when the mailbox is created, so the
// hot path reads them without a lock. Ephemeral ports (R-PORT-1) get indices 0, 1, 2, … never
// reused, and live in a small table behind a mutex that only mailboxes using them allocate.
// While stopping (R-ACT-5) handler ports refuse new messages but ephemeral ports (replies to the
// stopping actor's own requests) still deliver.
//
// Bounds (R-FLOW-1, mailbox_bound.h): the handler sink reserves room (`PortSink::admit`) inside
// the admission; a full sink refuses with Overloaded, and a kBlock sender that may wait waits for
// room *outside* the admission, then starts again from the state check.
//
// Admission (R-ACT-5): a handler-port delivery registers itself (`admitting_`) *before* it reads
// the state, and leaves once the envelope is on the sink. `begin_stopping` moves the state away
// from kOpen first; a sink that sees `admitting()` false after that knows every later delivery
// will be refused, so it may close without bouncing a message the mailbox already counted
// delivered. (Both sides use sequentially consistent operations: one of them always sees the
// other.)
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "postal/runtime/address.h"
#include "postal/runtime/mailbox_sender.h"
#include "postal/runtime/port_sink.h"

namespace postal::runtime {

class Proc;

// The handler ports of a mailbox: one per message type. Actor types share one table.
struct HandlerPort {
  uint64_t type_hash;
  DecodeFn decode;
};
using HandlerTable = std::vector<HandlerPort>;

enum class MailboxState : uint8_t { kOpen, kStopping, kStopped, kFailed };

class Mailbox final : public MailboxSender, public std::enable_shared_from_this<Mailbox> {
 public:
  // `handlers` must outlive the mailbox (a per-type static table) and hold distinct hashes;
  // `handler_sink` receives every handler-port delivery. The mailbox keeps the sink alive until
  // the sink has finished (release_finished_sink), so a delivery racing with the actor's end
  // never touches freed memory.
  Mailbox(Proc& proc, ActorAddr owner, const HandlerTable* handlers,
          std::shared_ptr<PortSink> handler_sink);
  ~Mailbox() override;

  const ActorAddr& owner() const { return owner_; }
  Proc& proc() const { return proc_; }

  // R-PORT-2: checks a table before it is used: one port per type.
  static absl::Status validate(const HandlerTable& table);
  bool has_handler(uint64_t type_hash) const;

  // R-PORT-1: allocates the next ephemeral index for a receiver. The mailbox keeps only a weak
  // reference: when the receiver goes away, sends get PortGone.
  uint64_t open_port(uint64_t type_hash, DecodeFn decode, std::weak_ptr<PortSink> sink, bool once);
  void close_port(uint64_t index);
  // R-SUP-1: closes every ephemeral port allocated so far (an actor's incarnation ended): later
  // sends to them get PortGone; indices stay used (R-PORT-1).
  void close_ephemeral_ports();
  PortAddr port_addr(Port port) const;

  MailboxState state() const { return state_.load(std::memory_order_acquire); }
  void set_state(MailboxState s);
  // R-ACT-5: kOpen → kStopping; false when the mailbox was no longer open (stopping or closed).
  // R-ACT-6: `why` (the stop reason) goes into the detail of the failures of refused messages.
  bool begin_stopping(std::string_view why = {});
  // Closes the mailbox for good (kStopped or kFailed) and detaches the handler sink; `why` (the
  // stop reason or the actor's error, R-ACT-6) goes into the detail of every later failure.
  void close(MailboxState final_state, std::string_view why);
  // R-ACT-6: the bounded detail of an ActorStopped / ActorFailed failure in the current state
  // ("the actor is stopping: …", "the actor stopped: …", "the actor failed: …"; empty if none).
  std::string closed_detail() const;
  // R-ACT-7: when the mailbox closed (the proc's clock); nullopt while open or stopping.
  std::optional<absl::Time> closed_at() const;
  // R-ACT-7: closed, and its handler sink is done with it: freeing it touches nothing live.
  bool reapable() const;
  // R-ACT-5: whether a handler-port delivery that may have seen the mailbox open is still
  // between its state check and its sink. A stopping sink closes only when this is false.
  bool admitting() const { return admitting_.load(std::memory_order_seq_cst) != 0; }
  // Detaches the handler sink: handler ports then fail as ActorStopped.
  void detach_handler_sink();
  // What the handler sink (the actor) reports about itself.
  SinkInfo sink_info() const {
    std::shared_ptr<PortSink> sink = handler_sink_owner();
    return sink ? sink->info() : SinkInfo{};
  }
  // The handler sink, set at construction (an actor's cell; a client's queue, or null), and
  // null once released (below). The actors layer reaches a local actor's cell through it
  // (R-SUP-2 watches).
  std::shared_ptr<PortSink> handler_sink_owner() const;
  // R-ACT-7: the tombstone lets go of its handler sink once the mailbox is closed and the sink
  // is finished (a sink says so only after it waited out the deliveries admitted before the
  // close, which hold its raw pointer), so a stopped actor's cell is freed as it ends (unless a
  // handle still holds it) and the tombstone is the mailbox alone. False when it is too early.
  bool release_finished_sink();
  // Whether release_finished_sink() let the sink go; with `closed_why()` (the stop reason or
  // the actor's error, as given to close) what a watch of the ended actor reports (R-SUP-2).
  bool sink_released() const;
  std::string closed_why() const;

  void post_unchecked(EnvelopePtr env, ReturnHandle& ret) override;

 private:
  friend class Proc;  // sets attached_ and reaped_
  struct EphemeralPort {
    uint64_t type_hash;
    DecodeFn decode;
    std::weak_ptr<PortSink> sink;
    bool once;
  };
  struct EphemeralTable {
    absl::Mutex mu;
    uint64_t next = 0;
    absl::flat_hash_map<uint64_t, EphemeralPort> ports ABSL_GUARDED_BY(mu);
  };

  void fail(EnvelopePtr env, DeliveryFailure f, ReturnHandle& ret);
  void deliver_handler(EnvelopePtr env, ReturnHandle& ret);
  void return_dropped(EnvelopePtr env, DeliveryFailure why);
  void deliver_ephemeral(EnvelopePtr env, uint64_t index, ReturnHandle& ret);
  bool complete_failed_request(const MessageEnvelope& returned);

  Proc& proc_;
  ActorAddr owner_;
  const HandlerTable* handlers_;
  std::shared_ptr<PortSink> sink_owner_ ABSL_GUARDED_BY(why_mu_);
  std::atomic<PortSink*> handler_sink_;
  std::atomic<MailboxState> state_{MailboxState::kOpen};
  std::atomic<bool> attached_{false};  // R-ACT-7: in its proc's muxer (set by Proc::attach)
  std::atomic<bool> reaped_{false};    // R-ACT-7: taken out of the muxer (set by Proc)
  std::atomic<uint32_t> admitting_{0};  // handler deliveries in flight (R-ACT-5)
  // R-ACT-6: why the mailbox stopped / is stopping. Read only on the failure path. Also guards
  // `sink_owner_` and `sink_released_` (R-ACT-7), which the delivery path does not read.
  mutable absl::Mutex why_mu_;
  bool sink_released_ ABSL_GUARDED_BY(why_mu_) = false;
  std::string stopping_why_ ABSL_GUARDED_BY(why_mu_);
  std::string closed_why_ ABSL_GUARDED_BY(why_mu_);
  std::optional<absl::Time> closed_at_ ABSL_GUARDED_BY(why_mu_);
  std::atomic<EphemeralTable*> ephemeral_{nullptr};
};

// Header on a request envelope naming the requester's once reply port. When the request comes
// back undeliverable, the waiting request fails at once with the failure instead of timing out.
inline constexpr wire::HeaderKey<uint64_t> kReplyPortHeader{"postal.reply-port"};

}  // namespace postal::runtime
