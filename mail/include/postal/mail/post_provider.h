// post_provider.h — `PostProvider`, the provider of the `post:` scheme: mailboxes served by a
// `MailboxHost` actor (mailbox_host.h) somewhere in the topology, reached through the runtime.
//
//   auto client = runtime::Client::attach(node->proc(), "mail-client");      // the caller's proc
//   auto provider = PostProvider::create({.context = std::move(client),      // shared ownership
//                                         .host = host_actor_address});
//   office.register_provider(*std::move(provider));
//   office.post("post:orders@shop.example/inbox", Letter::text("hi"));
//
// Routing. One PostProvider talks to one MailboxHost: every `post://user@host/path` address it
// is given is served by that host (the `host` part of a mail address is part of the mailbox's
// identity, M-ADDR-3, not a network location). Reach several hosts with several PostOffices.
//
// Every verb is a request to the host with `timeout`; a lost host (the request comes back
// undeliverable, or no answer in time) fails the verb with Unavailable naming the host. The
// host applies every queue rule (it wraps a mem provider), so this provider promises what the
// mem provider promises, across procs: the conformance suite runs against it unchanged.
//
// Subscriptions. `subscribe` opens a port on the caller's proc and registers it at the host;
// pushes arrive there in batches and the callback runs on a thread this provider owns (one per
// subscription: never concurrent with itself); the statuses of a batch go back as one settlement
// (M-ACK-4, applied at the host per delivery).
// When the subscriber's proc dies, its pushes come back undeliverable to the host, which treats
// them as unhandled (back to the queue, M-RETRY-1) and drops the subscription.
//
// Leases. A manual fetch's lease lives at the host, fixed at hand-out in the host's clock
// (M-ACK-1); `Delivery::ack` settles it by key. If the fetching proc dies, its leases come back
// when they expire (M-ACK-3) — or at once, when a push to that proc comes back undeliverable
// first. Prefer a finite `ack_timeout` for consumers on other procs.
//
// stop() ends this provider's subscriptions; the host and its backlog stay (they belong to the
// topology). stop({.purge = true}) also clears the host's whole backlog, like clear().
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "postal/mail/mail_admin.h"
#include "postal/mail/mail_provider.h"
#include "postal/runtime/address.h"
#include "postal/runtime/send_context.h"

namespace postal::mail {

namespace post_internal {
struct Link;
class PendingRequests;
class PostBatcher;
class PostSubscription;
}  // namespace post_internal

struct PostOptions {
  // Who sends: a Client (or other context) on the caller's proc. Shared: the provider, its
  // subscriptions and outstanding Delivery handles keep it alive.
  std::shared_ptr<runtime::SendContext> context;
  runtime::ActorAddr host;                     // the MailboxHost actor
  absl::Duration timeout = absl::Seconds(10);  // per request
};

class PostProvider final : public MailProvider, private MailAdmin {
 public:
  static constexpr std::string_view kScheme = "post";

  // InvalidArgument without a context or with a non-positive timeout. Does not contact the host.
  static absl::StatusOr<std::unique_ptr<PostProvider>> create(PostOptions options);
  ~PostProvider() override;  // stop() without purge

  std::string_view scheme() const override { return kScheme; }
  // What the host declared at start(); before start, the core verbs only.
  bool can(Capability op, const MailAddress* address = nullptr) const override;

  // Asks the host for its capabilities; Unavailable naming the host when it does not answer.
  absl::Status start() override;
  void stop(const StopOptions& options) override;

  absl::StatusOr<PostReceipt> post(const MailAddress& to, Letter letter) override;
  absl::StatusOr<Subscription> subscribe(const MailAddress& address, MailHandler handler,
                                         const SubscribeOptions& options) override;
  absl::StatusOr<std::optional<Delivery>> fetch(const MailAddress& address,
                                                const FetchOptions& options) override;
  // One round trip per batch; the host holds a long poll (up to 5 minutes) without holding its
  // actor, and bounds a reply's bodies to 4 MiB. A manual batch settles in one more round trip
  // (ack_all), its leases renew and nack with a delay by key at the host.
  absl::StatusOr<std::vector<Delivery>> fetch_batch(const MailAddress& address,
                                                    const FetchOptions& options) override;
  // A stopped provider reports a known mailbox `offline` (the host's counts stay accurate).
  absl::StatusOr<MailboxStatus> status(const MailAddress& address) override;
  absl::Status wait_idle(absl::Time deadline) override;
  // Every admin verb the host's provider serves (mail_admin.h), forwarded as it is: one round
  // trip, no code per verb. A stopped provider reports list_status's mailboxes `offline`.
  MailAdmin* admin() override { return this; }

  // Pipelined and batched: the post goes out at once while fewer than two batches of posts are
  // unanswered, else with the next batch, sent when an answer comes back (one request per batch;
  // posts keep their order, sync ones included). `done` runs when the host answers (on the
  // thread that receives the answer), or with Unavailable when the batch comes back
  // undeliverable or the timeout passes; the host commits the posts of a batch together.
  void post_async(const MailAddress& to, Letter letter, PostDone done) override;

 private:
  explicit PostProvider(std::shared_ptr<post_internal::Link> link);
  absl::StatusOr<AdminResult> run(const AdminRequest& request) override;

  std::shared_ptr<post_internal::Link> link_;
  std::shared_ptr<post_internal::PendingRequests> pending_;
  std::shared_ptr<post_internal::PostBatcher> batcher_;
  mutable absl::Mutex mu_;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<uint64_t> capabilities_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<post_internal::PostSubscription>> subs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace postal::mail
