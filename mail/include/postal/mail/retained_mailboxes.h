// retained_mailboxes.h — `RetainedMailboxes`: retained mailboxes served from a `MailStore`
// (M-KIND-2): store, then push.
//
// A publish is stored first (`MailStore::append`, durable per M-PRIO-2) and only then pushed to
// the mailbox's live subscriptions. Each new subscription first replays what the mailbox holds —
// critical, urgent, normal, FIFO within each (M-PRIO-1) — and then continues live. The switch is
// atomic: registering the subscription and taking the store's highest sequence number S happen
// under one lock; the replay reads the store up to S with no lock held; live messages routed to
// the subscription meanwhile wait on its strand and are delivered after the replay, skipping the
// ones the replay already delivered. No message is lost or doubled (tests: concurrent publishes
// during replays). The server keeps no per-consumer position: every new subscription replays.
//
// Queue groups (M-RECV-4): subscriptions of one mailbox with the same non-empty `queue_group`
// compete; each message goes to exactly one member (live ones round robin). Settlement is
// tracked per (mailbox, group, message) in the store (`MailStore::settle`): what a member's
// handler returns — `kHandled`, `kDiscard` or `kTerminate` — settles the message for its group,
// which never receives it again: not in this lifetime of the group, not when the group forms
// anew after its last member left, not after the store is reopened (SQLite: durable messages'
// marks are durable). `kUnhandled` (or a member that ends before returning, a crash) leaves it
// unsettled: the group gets it again the next time it forms, never sooner (no hot loop on a
// message no member can handle). The member that forms the group replays what is stored and
// not settled by the group; members joining an existing group get live messages only; when the
// replaying member leaves before its replay is done, another member takes the replay over and
// delivers only what no member of the group was handed yet. Plain subscriptions and other
// groups are unaffected: each group sees every message once, every plain subscription replays
// everything.
//
// Lifetime (M-BOX-3): a mailbox whose TTL ends is removed with its messages, by a timer on the
// clock at its expiry and by a periodic sweep; each of its subscriptions is told through its
// `on_end` callback (with `MailboxNotFound`) and receives nothing more. `remove` does the same at
// once. Public mailboxes are listed (`list_public`, a snapshot) and watched (`watch_public`: the
// snapshot, then `created`/`expired`/`removed` events, no event lost or doubled against the
// snapshot) (M-BOX-4). Private mailboxes never appear in either.
//
// Receive re-checks the byte bound (M-BOX-6): a stored message larger than its mailbox's
// `max_message_bytes` (possible only if the store file was changed behind the store's back) is
// not delivered and is left in the store untouched.
//
// Threads: handlers run on a small executor the object owns, one strand per subscription (never
// concurrently with themselves, in order). Destroying a `RetainedSubscription` or `ListingWatch`
// unsubscribes and waits for a running callback of it to return, except from inside that
// callback.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/clock.h"
#include "postal/mail/deliver_policy.h"
#include "postal/mail/disposition.h"
#include "postal/mail/mail_store.h"

namespace postal::mail {

struct RetainedMessage {
  std::string mailbox{};
  uint64_t seq = 0;  // the store's id: pass it to `erase` (M-RECV-5)
  Priority priority = Priority::kNormal;
  absl::Time stored_at{};
  std::string body{};
};

// A subscription's callback. What it returns settles the message for a queue group (M-RECV-4,
// see above; plain subscriptions ignore it); a callback returning void handles every message.
class RetainedHandler {
 public:
  RetainedHandler() = default;
  template <class F>
    requires(!std::same_as<std::decay_t<F>, RetainedHandler> &&
             std::invocable<F&, const RetainedMessage&>)
  RetainedHandler(F f) {  // NOLINT(google-explicit-constructor): any callable is a handler
    using R = std::invoke_result_t<F&, const RetainedMessage&>;
    if constexpr (std::is_void_v<R>) {
      fn_ = [f = std::move(f)](const RetainedMessage& m) mutable {
        f(m);
        return Disposition::kHandled;
      };
    } else {
      static_assert(std::is_convertible_v<R, Disposition>, "a handler returns void or Disposition");
      fn_ = std::move(f);
    }
  }
  Disposition operator()(const RetainedMessage& m) const { return fn_(m); }
  explicit operator bool() const { return static_cast<bool>(fn_); }

 private:
  std::function<Disposition(const RetainedMessage&)> fn_;
};

struct RetainedSubscribeOptions {
  // Empty: this subscription gets every message. Else 1–255 bytes without NUL (InvalidArgument
  // otherwise); at most `StoreLimits::max_settling_groups` groups of a mailbox hold settlement
  // marks at once (one more: subscribe fails with BudgetExhausted).
  std::string queue_group{};
  // For the subscription that forms its group (members joining a group get live messages only).
  DeliverPolicy deliver = DeliverPolicy::kAll;
  // Told once when the subscription ends because the mailbox expired or was removed.
  std::function<void(const absl::Status&)> on_end{};
};

enum class MailboxEventKind { kCreated, kExpired, kRemoved };

struct MailboxEvent {
  MailboxEventKind kind = MailboxEventKind::kCreated;
  MailboxInfo mailbox{};  // for expired/removed: as it was stored
};

// Where RetainedMailboxes::publish_async commits and completes (see there).
struct RetainedPublishAsync {
  bool commit_here_if_idle = false;   // MailStore::AppendAsync
  bool done_where_committed = false;  // `done` before the routing, where the commit completed
};

class RetainedMailboxes;

namespace retained_internal {
struct Core;
struct Sub;

// What a subscription and a listing watch share: RAII, destroying it closes it.
class Handle {
 public:
  Handle() = default;
  ~Handle() { close(); }
  Handle(Handle&&) noexcept = default;
  Handle& operator=(Handle&& other) noexcept;
  // Idempotent; waits for a running callback of it, except from inside that callback.
  void close();

 protected:
  friend class postal::mail::RetainedMailboxes;
  std::weak_ptr<Core> core_;
  std::shared_ptr<Sub> sub_;
};
}  // namespace retained_internal

class RetainedSubscription : public retained_internal::Handle {
 public:
  void unsubscribe() { close(); }
  // Messages handed to the handler so far (replayed and live).
  uint64_t delivered() const;
};

// A watch of the public listing.
class ListingWatch : public retained_internal::Handle {
 public:
  void stop() { close(); }
};

struct RetainedOptions {
  std::shared_ptr<MailStore> store{};  // required
  std::shared_ptr<Clock> clock{};      // null: a SystemClock; must be the store's clock
  absl::Duration sweep_interval = absl::Seconds(1);  // zero: only the per-mailbox timers
  size_t max_delivery_threads = 16;
};

class RetainedMailboxes {
 public:
  static absl::StatusOr<std::unique_ptr<RetainedMailboxes>> create(RetainedOptions options);
  ~RetainedMailboxes();
  RetainedMailboxes(const RetainedMailboxes&) = delete;
  RetainedMailboxes& operator=(const RetainedMailboxes&) = delete;

  absl::StatusOr<CreateResult> create_mailbox(const MailboxSpec& spec);
  absl::Status remove(std::string_view mailbox);
  absl::StatusOr<std::vector<MailboxInfo>> list_public();
  absl::StatusOr<MailboxInfo> mailbox(std::string_view mailbox);

  // Stores, then pushes (M-KIND-2); the message's sequence number.
  absl::StatusOr<uint64_t> publish(std::string_view mailbox, Priority priority, std::string body);
  // `publish` without waiting for the store: `done` gets its result once the message is stored.
  // Publishers that do not wait share commits (group commit). By default `done` runs on a
  // delivery thread after the message was routed to live subscriptions, so it may call anything.
  // With `done_where_committed` it runs where the commit completed — the store's writer thread,
  // or the caller's with `commit_here_if_idle` (MailStore::AppendAsync) — before the routing,
  // which saves a thread hand-off: `done` must then be short, must not block and must not call
  // into these mailboxes or their store. The destructor waits for every pending `done`.
  using PublishDone = absl::AnyInvocable<void(absl::StatusOr<uint64_t>) &&>;
  using PublishAsync = RetainedPublishAsync;
  void publish_async(std::string_view mailbox, Priority priority, std::string body,
                     PublishDone done, PublishAsync how = {});
  // M-RECV-5: the message never replays again. False when there is no such message.
  absl::StatusOr<bool> erase(std::string_view mailbox, uint64_t seq);

  // Returns once registered; the replay runs on the subscription's strand.
  absl::StatusOr<RetainedSubscription> subscribe(
      std::string_view mailbox, RetainedHandler handler, RetainedSubscribeOptions options = {});

  // `snapshot` receives the current public listing, then `on_event` every later change.
  absl::StatusOr<ListingWatch> watch_public(std::vector<MailboxInfo>* snapshot,
                                            std::function<void(const MailboxEvent&)> on_event);

  // Removes every mailbox whose TTL has ended now and tells its subscribers (the timers call it).
  absl::Status sweep();

  // Waits until every strand is idle (tests).
  bool wait_idle(absl::Duration timeout);

 private:
  explicit RetainedMailboxes(std::shared_ptr<retained_internal::Core> core);
  std::shared_ptr<retained_internal::Core> core_;
};

}  // namespace postal::mail
