// mem_provider.h — `MemProvider`, the in-process provider of the `mem:` scheme: queue mailboxes
// (M-KIND-1) on a MemBus, with everything in M-RECV-1…3, M-ACK-1…5, M-RETRY-1…4, M-DLQ-1…3 and
// M-STAT-1…2. docs/mail.md is the user's guide; this is the contract.
//
//   auto provider = MemProvider::create({.bus = MemBus::isolated(),
//                                        .retry = RetryPolicy{.max_attempts = 3},
//                                        .dead_letter = DeadLetterOptions{}});
//
// Push deliveries. Callbacks run on a small executor the provider owns (threads started on
// demand, at most `max_delivery_threads`); each subscription is a serial strand, so one
// subscription's callback is never run concurrently with itself and sees first attempts in post
// order. `post` returns at dispatch. A broadcast is settled once every delivery has settled,
// retries included (M-RETRY-1):
//   some delivery handled            → not requeued; the failed deliveries are given up (one
//                                      dead-letter record for the letter)
//   none handled, one or more failed retriably (or cancelled)
//                                    → one copy back at the head of the queue
//   every delivery failed fatally    → given up (dead-lettered when enabled, else dropped)
// The configuration of the subscriber's provider governs its delivery (retry policy, watchdog);
// the configuration of the posting provider governs the broadcast's give-up (dead letters).
//
// Leases. A manual fetch takes out a lease of its own `ack_timeout` (0 = never expires). Expired
// leases are reclaimed — back to the head of the queue, or given up with reason `expired-lease`
// past `max_delivery_rounds` — by the next manual fetch of that mailbox, by recover(), or by the
// opt-in sweeper (`lease_sweep_interval`). A settlement after the lease's expiry returns false and
// changes nothing; the copy then waits, overdue, for its reclaim.
//
// Dead letters (opt-in: `dead_letter`). A give-up from mailbox X at dead-letter depth d (d = how
// many times the suffix ends X's path) writes one record to X + suffix at depth d + 1, or, when
// d + 1 > max_nesting, parks it in X (`mbx-dead-letter-terminal: true`; never fetched, counted by
// `mem.parkedCount`, read by admin::PeekParked, removed by admin::PurgeParked). `create` refuses a suffix that
// canonicalization would rewrite. Without it, a give-up drops the copy and counts it in
// `mem.droppedCount`.
//
// Status extension keys: mem.subscriberCount, mem.parkedCount, mem.overdueInFlightCount,
// mem.oldestOverdueMs, mem.pendingDeliveryCount, mem.droppedCount, mem.watchdogCancelledCount.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/mail_admin.h"
#include "postal/mail/mail_provider.h"
#include "postal/mail/mem_bus.h"
#include "postal/mail/retained_mailboxes.h"
#include "postal/mail/retry_policy.h"

namespace postal::mail {

namespace mem_internal {
class CoreState;
struct SubscriberState;
struct AdminVerbs;
}

struct DeadLetterOptions {
  static constexpr size_t kUnlimitedNesting = std::numeric_limits<size_t>::max();
  std::string suffix = "_dlq";  // appended to the path; must already be canonical (M-DLQ-3)
  size_t max_nesting = 1;       // dead-letter depth cap; records past it are parked (M-DLQ-2)
};

struct MemOptions {
  std::shared_ptr<MemBus> bus = nullptr;            // null: MemBus::shared()
  std::optional<RetryPolicy> retry = std::nullopt;  // null: a retriable failure only requeues
  std::optional<DeadLetterOptions> dead_letter = std::nullopt;  // null: give-ups are dropped
  absl::Duration delivery_settle_timeout = kDefaultDeliverySettleTimeout;  // 0: no watchdog
  absl::Duration lease_sweep_interval = absl::ZeroDuration();              // 0: no sweeper
  uint64_t max_delivery_rounds = 0;  // 0: unlimited; else a copy past it is given up, not requeued
  size_t max_delivery_threads = 16;
  // Non-null: the provider also serves retained mailboxes from it (kRetained, M-KIND-2). The
  // RetainedMailboxes must use the provider's clock.
  std::shared_ptr<RetainedMailboxes> retained = nullptr;
};

class MemProvider final : public MailProvider, private MailAdmin {
 public:
  static constexpr std::string_view kScheme = "mem";

  // InvalidArgument for a bad retry policy, a negative duration, zero threads; a dead-letter
  // suffix that is not canonical fails with InvalidMailboxAddress.
  static absl::StatusOr<std::unique_ptr<MemProvider>> create(MemOptions options = {});
  ~MemProvider() override;  // stop() without purge

  const MemOptions& options() const { return options_; }
  MemBus& bus() const { return *options_.bus; }

  std::string_view scheme() const override { return kScheme; }
  bool can(Capability op, const MailAddress* address = nullptr) const override;

  // The store's name for a retained mailbox's address: its canonical form without `scheme://`,
  // or a private mailbox's drawn id (`<scheme>://<id>@private`). The same for every scheme.
  static std::string store_name(const MailAddress& address);

  absl::Status start() override;
  void stop(const StopOptions& options) override;

  absl::StatusOr<PostReceipt> post(const MailAddress& to, Letter letter) override;
  absl::StatusOr<Subscription> subscribe(const MailAddress& address, MailHandler handler,
                                         const SubscribeOptions& options) override;
  // A push consumer that settles later — a MailboxHost forwarding pushes to another proc keeps a
  // window of them in flight instead of one round trip each. `handler` starts a delivery and
  // returns; `settle` runs exactly once, from any thread, with what a MailHandler would return
  // (M-ACK-4). Up to `max_in_flight` deliveries of the subscription are unsettled at once; the
  // rest wait their turn in order. The settle watchdog (M-RETRY-4) covers each; unsubscribing
  // waits until every started delivery has settled (or its watchdog fired). On a retained
  // mailbox deliveries run one at a time, each waiting for its settlement.
  using SettleFn = absl::AnyInvocable<void(absl::Status) &&>;
  using AsyncMailHandler = absl::AnyInvocable<void(const Letter&, SettleFn)>;
  absl::StatusOr<Subscription> subscribe_async(const MailAddress& address,
                                               AsyncMailHandler handler,
                                               const SubscribeOptions& options,
                                               size_t max_in_flight);
  absl::StatusOr<std::optional<Delivery>> fetch(const MailAddress& address,
                                                const FetchOptions& options) override;
  absl::StatusOr<MailboxStatus> status(const MailAddress& address) override;
  // Batches and the long poll (M-RECV-6); waiting fetches are answered in arrival order, and at
  // most 1,024 wait on one mailbox (more → ResourceExhausted). Their time runs on the bus clock.
  absl::StatusOr<std::vector<Delivery>> fetch_batch(const MailAddress& address,
                                                    const FetchOptions& options) override;
  void fetch_batch_async(const MailAddress& address, const FetchOptions& options,
                         FetchDone done) override;
  // Lease control by key, as a Delivery's handle does it (delivery.h); a MailboxHost settles its
  // remote consumers' batches and leases through these.
  std::vector<bool> settle_all(std::span<const CopyKey> keys, Disposition disposition);
  std::optional<std::optional<absl::Time>> renew(const CopyKey& key);
  bool nack(const CopyKey& key, absl::Duration delay);
  absl::Status wait_idle(absl::Time deadline) override;
  // Every admin verb (mail_admin.h): peek, list_status, recover(_all), clear, locate, settle by
  // key, dead letters and parking, mailbox policies, and the retained-mailbox verbs when
  // MemOptions::retained is set (mem_admin.cc).
  MailAdmin* admin() override { return this; }

  // `post` without waiting for the store: `done` gets what `post` would return — for a retained
  // mailbox once its store has the message (on a delivery thread, after the commit), for any
  // other address at once on the calling thread. Posts that do not wait share the store's
  // commits; a MailboxHost serves posts from other procs this way, so one host actor does not
  // serialize their commits.
  void post_async(const MailAddress& to, Letter letter, PostDone done) override;
  // The same, with RetainedMailboxes::publish_async's choices of where the commit and `done` run
  // for a retained mailbox (`done_where_committed`: `done` must be short and must not call into
  // this provider).
  void post_async(const MailAddress& to, Letter letter, PostDone done,
                  RetainedMailboxes::PublishAsync how);

 private:
  friend struct mem_internal::AdminVerbs;
  explicit MemProvider(MemOptions options);
  absl::StatusOr<AdminResult> run(const AdminRequest& request) override;
  // kRetained, when MemOptions::retained is set (mem_retained.cc); else UnsupportedCapability.
  absl::StatusOr<CreateResult> create_private_mailbox(const MailboxSpec& spec);
  absl::StatusOr<CreateResult> create_mailbox(const MailAddress& address, const MailboxSpec& spec);
  absl::Status delete_mailbox(const MailAddress& address);
  absl::StatusOr<std::vector<std::string>> list_public();
  absl::StatusOr<bool> erase(const MailAddress& address, uint64_t seq);
  static absl::Status no_store();
  // Retained mailboxes (mem_retained.cc): the store's name for `address` when a retained
  // mailbox of that name exists.
  std::optional<std::string> retained_name(const MailAddress& address) const;
  absl::Status check_running(std::string_view verb, const MailAddress& address) const;
  absl::StatusOr<PostReceipt> post_retained(const std::string& name, const MailAddress& to,
                                            Letter letter);
  void post_retained_async(const std::string& name, const MailAddress& to, Letter letter,
                           PostDone done, RetainedMailboxes::PublishAsync how);
  absl::StatusOr<Subscription> add_subscriber(const MailAddress& address,
                                              std::shared_ptr<mem_internal::SubscriberState> sub,
                                              const SubscribeOptions& options);
  absl::StatusOr<Subscription> subscribe_retained(const std::string& name,
                                                  const MailAddress& address, MailHandler handler,
                                                  const SubscribeOptions& options);
  // InvalidArgument for a queue group on a queue mailbox (they exist on retained ones only).
  static absl::Status no_queue_groups(const MailAddress& address, const SubscribeOptions& options);

  MemOptions options_;
  std::shared_ptr<mem_internal::CoreState> core_;
};

}  // namespace postal::mail
