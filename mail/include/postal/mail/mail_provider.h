// mail_provider.h — `MailProvider`, what serves one scheme for the PostOffice, and the option and
// result types of the mail verbs.
//
// The PostOffice (post_office.h) routes an address by its scheme to a provider (M-ADDR-3). It
// parses and validates the address first (M-ADDR-2), checks `can()`, and only then calls the
// provider, so a provider method receives a valid, canonical MailAddress of its own scheme and is
// only called for operations it declared. The interface holds only what every provider does;
// the optional verbs (peek, recover, dead letters, retained mailboxes, policies, …) are typed
// requests to the provider's MailAdmin (mail_admin.h), returned by `admin()`.
//
// What every provider guarantees (the conformance suite, tests/mail/mail_conformance.h, checks
// it for each provider):
//   * Queue mailboxes (M-KIND-1): a letter posted while a subscriber exists is pushed to every
//     subscriber and not queued; with none it is queued for fetch; a queued letter is never
//     pushed to a subscriber that appears later.
//   * `post` mints the system headers and strips sender-supplied ones (M-RETRY-3), and returns
//     at dispatch, not at settlement.
//   * `subscribe` returns once established (M-RECV-2); push consumers settle by their status
//     (M-ACK-4); a broadcast settles per delivery (M-RETRY-1); the settle watchdog (M-RETRY-4).
//   * `fetch` leases are fixed at hand-out; one handle settles once; settlement is keyed by the
//     copy (M-ACK-1, M-ACK-2); admin::Peek changes nothing (M-RECV-3).
//   * `stop` tears down every subscription and never deletes the backlog unless asked to purge;
//     after it, `status` reports zero subscribers for the provider's subscriptions.
//
// Threading: every method may be called from any thread, including from inside a subscription
// callback. Callbacks run on threads the provider owns.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/capability.h"
#include "postal/mail/deliver_policy.h"
#include "postal/mail/delivery.h"
#include "postal/mail/letter.h"
#include "postal/mail/mail_admin.h"
#include "postal/mail/mail_address.h"
#include "postal/mail/mail_status.h"
#include "postal/mail/mail_store.h"
#include "postal/mail/retry_policy.h"
#include "postal/mail/subscription.h"

namespace postal::mail {

// M-ACK-1: the lease a manual fetch takes out unless it asks otherwise.
inline constexpr absl::Duration kDefaultAckTimeout = absl::Seconds(30);
// M-RETRY-4: how long one push delivery attempt may run before it counts as cancelled.
inline constexpr absl::Duration kDefaultDeliverySettleTimeout = absl::Seconds(30);

// A push consumer. OK = handled; a retriable error = unhandled; any other error = discard
// (M-ACK-4, mail_errors.h). An exception escaping it counts as a plain error. The provider never
// invokes one subscription's callback concurrently with itself.
using MailHandler = absl::AnyInvocable<absl::Status(const Letter&)>;

enum class AckMode : uint8_t { kAuto, kManual };

// The most copies one fetch_batch may ask for (more → InvalidArgument).
inline constexpr size_t kMaxFetchBatch = 1024;

struct FetchOptions {
  AckMode ack = AckMode::kAuto;
  // The lease of a manual fetch, fixed at hand-out; absl::ZeroDuration() = never expires.
  // Negative → InvalidArgument. Ignored by an auto fetch.
  absl::Duration ack_timeout = kDefaultAckTimeout;
  // fetch_batch only (fetch takes one and never waits):
  // At most this many copies, 1…kMaxFetchBatch; 0 or more → InvalidArgument.
  size_t max_messages = 1;
  // At most this many body bytes in all, 0 = no byte bound; the first copy is always taken, so a
  // copy larger than the bound is not stuck. A provider may bound a batch further (post: what
  // one reply frame carries).
  size_t max_bytes = 0;
  // The long poll: with nothing to hand out, wait up to this long (on the provider's clock) for
  // the first copy, then take what is there at that moment. 0 = answer at once. Negative →
  // InvalidArgument.
  absl::Duration max_wait = absl::ZeroDuration();
};

struct SubscribeOptions {
  std::string label = {};  // shown in diagnostics
  // A retained mailbox's replay (M-KIND-3): everything stored, nothing, or the newest message.
  DeliverPolicy deliver = DeliverPolicy::kAll;
  // A retained mailbox's queue group (M-RECV-4, retained_mailboxes.h): members compete, each
  // letter goes to one member, and what the callback returns settles it for the group (OK or a
  // plain error: settled, never delivered to the group again; a retriable error: back to the
  // group when it next forms). Empty: every letter. A queue mailbox has no groups: a name there
  // fails subscribe with InvalidArgument.
  std::string queue_group = {};
  // This subscription's own redelivery (M-RETRY-5), in place of the provider's: a retry policy
  // (validated: a bad one fails subscribe with InvalidArgument) and the settle watchdog's
  // timeout (0: none). Unset: the provider's.
  std::optional<RetryPolicy> retry = std::nullopt;
  std::optional<absl::Duration> settle_timeout = std::nullopt;
};

struct StopOptions {
  bool purge = false;  // also drop the backlog (queued and in-flight copies)
};

enum class PostPath : uint8_t { kPushed, kQueued };  // M-KIND-1: exactly one of the two

struct PostReceipt {
  std::string address;     // canonical
  std::string message_id;  // the sender's, or the minted one
  std::string send_id;     // mbx-send-id of this copy
  PostPath path = PostPath::kQueued;
  size_t deliveries = 0;  // subscribers it was pushed to
};

struct RecoverResult {
  uint64_t reclaimed = 0;
  bool supported = true;  // false: the provider has no leases to reclaim; 0 is not "all clear"
};

struct RecoverAllResult {
  uint64_t reclaimed = 0;
  std::map<std::string, uint64_t> by_address;      // only addresses that reclaimed something
  std::vector<std::string> unreachable_providers;  // schemes that cannot recover
};

class MailProvider {
 public:
  virtual ~MailProvider() = default;

  // The scheme served, lowercase (e.g. "mem").
  virtual std::string_view scheme() const = 0;
  // Whether `op` is supported (for `address`, when given).
  virtual bool can(Capability op, const MailAddress* address = nullptr) const = 0;
  // Whether a provider-specific disposition name is understood (the core three always are).
  virtual bool understands(std::string_view /*disposition*/) const { return false; }

  virtual absl::Status start() = 0;
  virtual void stop(const StopOptions& options) = 0;

  virtual absl::StatusOr<PostReceipt> post(const MailAddress& to, Letter letter) = 0;
  // `post` whose answer comes later (PostOffice::post_async): `done` runs exactly once, with
  // what `post` would return, on whatever thread has the answer. Providers that can keep many
  // posts in flight override it; the default calls `post`, then `done`.
  using PostDone = absl::AnyInvocable<void(absl::StatusOr<PostReceipt>) &&>;
  virtual void post_async(const MailAddress& to, Letter letter, PostDone done);
  virtual absl::StatusOr<Subscription> subscribe(const MailAddress& address, MailHandler handler,
                                                 const SubscribeOptions& options) = 0;
  // nullopt when nothing is queued.
  virtual absl::StatusOr<std::optional<Delivery>> fetch(const MailAddress& address,
                                                        const FetchOptions& options) = 0;
  virtual absl::StatusOr<MailboxStatus> status(const MailAddress& address) = 0;
  // Up to `options.max_messages` copies in queue order, waiting up to `options.max_wait` for the
  // first (the long poll, M-RECV-6); an empty vector when none came. The default takes them one
  // fetch() at a time and cannot wait: with a max_wait it fails UnsupportedCapability.
  virtual absl::StatusOr<std::vector<Delivery>> fetch_batch(const MailAddress& address,
                                                            const FetchOptions& options);
  // fetch_batch whose answer comes later: `done` runs exactly once — on the calling thread when
  // there is an answer at once, else on whichever thread posts the first copy or runs the
  // provider's clock at the deadline — so it must be short and must not wait. The default calls
  // fetch_batch, then `done`.
  using FetchDone = absl::AnyInvocable<void(absl::StatusOr<std::vector<Delivery>>) &&>;
  virtual void fetch_batch_async(const MailAddress& address, const FetchOptions& options,
                                 FetchDone done);

  // For providers whose fetch is a batch of one: fetch_batch with max_messages 1, no byte bound
  // and no wait; nullopt when it took nothing.
  absl::StatusOr<std::optional<Delivery>> fetch_one(const MailAddress& address,
                                                    const FetchOptions& options);

  // The optional verbs (mail_admin.h), or null when it serves none. Owned by the provider.
  virtual MailAdmin* admin() { return nullptr; }
  // OK once no delivery dispatched by this provider is queued or running; DeadlineExceeded at
  // `deadline`. Deliveries waiting in a retry backoff do not count: they wait for time. Called
  // from inside a callback it waits for that callback too, so it can only time out.
  virtual absl::Status wait_idle(absl::Time deadline);
};

}  // namespace postal::mail
