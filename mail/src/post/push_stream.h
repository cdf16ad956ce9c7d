// PushStream: the pushes of one host subscription to its subscriber on another proc, in batches,
// and their settlements coming back in batches (internal).
//
// The mem provider starts up to a window of deliveries of the subscription (subscribe_async);
// each arrives here with its settle function. A delivery is sent at once while fewer than
// kBatchesInFlight batches are unsettled; past that it waits in the next batch, which goes out
// when a settlement comes back — so at low load a push is sent as soon as it starts, and under
// load the pushes that start while the subscriber works travel together (the ack clock of TCP's
// Nagle algorithm), one envelope and one settlement per batch instead of per message.
//
// Every settle function runs exactly once: with the subscriber's result; Retriable when the push
// came back undeliverable (the subscriber's proc or port is gone; then `on_gone` runs once, and
// every other delivery of the stream settles the same way); Retriable once its timeout has
// passed (one proc timer per stream, at the oldest deadline; the mem watchdog, which fires
// earlier, is what bounds a hung subscriber — this lets go of what it holds); Retriable at close.
//
// Settlements arrive on a port of the pusher's mailbox opened for the stream; one naming an
// unknown delivery (late, or from a stranger who learnt the port) changes nothing.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "postal/mail/mem_provider.h"
#include "postal/mail/post_messages.h"
#include "postal/runtime/client.h"

namespace postal::mail::post_internal {

class PushStream : public std::enable_shared_from_this<PushStream> {
 public:
  // Batches sent and not yet settled, at most.
  static constexpr size_t kBatchesInFlight = 2;
  // Body bytes one batch carries at most (a larger letter goes alone).
  static constexpr size_t kMaxBatchBytes = 1 << 20;

  using OnGone = absl::AnyInvocable<void() &&>;
  // Opens the settlement port on `pusher`'s mailbox. `timeout`: how long a push waits for its
  // settlement (absl::InfiniteDuration(): forever).
  static std::shared_ptr<PushStream> open(runtime::Client& pusher,
                                          runtime::PortRef<MailPush> subscriber,
                                          std::string subscription_id, absl::Duration timeout,
                                          OnGone on_gone);
  ~PushStream();

  // Sends `letter` (now or in the next batch); `settle` runs once with its outcome.
  void push(const Letter& letter, MemProvider::SettleFn settle);
  // Settles everything unsettled Retriable and closes the port; later pushes settle at once.
  void close();

  // Deliveries sent or waiting to be sent, and not settled.
  size_t unsettled() const;

 private:
  class Sink;
  struct Unsettled {
    MemProvider::SettleFn settle;
    absl::Time deadline;
  };
  PushStream(runtime::Client& pusher, runtime::PortRef<MailPush> subscriber, std::string id,
             absl::Duration timeout, OnGone on_gone);

  void on_settled(MailSettled settled);
  void on_failed(const std::string& why);
  // Sends the waiting batch while the window allows, one sender at a time, in order.
  void flush();
  // Takes the settle functions whose deadline passed (to run outside the lock), and keeps the
  // timer set for the oldest deadline left.
  void expire_locked(absl::Time now, std::vector<MemProvider::SettleFn>& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void on_timer();
  static void settle_expired(std::vector<MemProvider::SettleFn>& expired);

  runtime::Client& pusher_;
  const runtime::PortRef<MailPush> subscriber_;
  const std::string id_;
  const absl::Duration timeout_;
  std::shared_ptr<Sink> sink_;
  uint64_t port_ = 0;  // the settlement port on the pusher's mailbox
  runtime::PortRef<MailSettled> settle_to_;

  mutable absl::Mutex mu_;
  OnGone on_gone_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::string closed_why_ ABSL_GUARDED_BY(mu_);
  bool sending_ ABSL_GUARDED_BY(mu_) = false;  // a thread is in flush's send loop
  MailPush next_ ABSL_GUARDED_BY(mu_);         // the batch being filled
  size_t next_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // The last delivery id of each batch sent and not yet settled, oldest first.
  std::deque<uint64_t> batches_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Unsettled> unsettled_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<absl::Time, uint64_t>> deadlines_ ABSL_GUARDED_BY(mu_);
  uint64_t next_delivery_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t timer_ ABSL_GUARDED_BY(mu_) = 0;  // fires at deadlines_.front(), while there is one
};

}  // namespace postal::mail::post_internal
