// post_office.h — `PostOffice`, the mail kernel: routes a mail address to the provider of its
// scheme (M-ADDR-3) and offers the verbs (M-RECV-1).
//
//   PostOffice office;
//   office.register_provider(*MemProvider::create());
//   office.start();
//   absl::StatusOr<Subscription> sub = office.subscribe("mem:svc@example.com/inbox", handler);
//   office.post("mem:svc@example.com/inbox", Letter::text("hello"));
//
// Every entry point parses the address first (M-ADDR-2): a malformed address, a query or a
// fragment fails with InvalidMailboxAddress and nothing is enqueued. Then the scheme picks the
// provider (UnknownScheme when none is registered), then the provider's capability declaration
// is checked (UnsupportedCapability, before anything changes). All errors are statuses; nothing
// throws.
//
// Lifecycle. `start()` starts every provider. `stop()` stops them: every subscription is torn
// down, and the backlog is kept — a provider started again sees it; `stop({.purge = true})`
// drops it. The destructor stops without purging. post, subscribe, fetch, settle, recover and
// clear need a started office (FailedPrecondition otherwise); the read-only verbs — status,
// peek, locate, peek_parked, dead_letter_topic, policy — work at any time, and a stopped
// provider reports its known mailboxes `offline`.
//
// The verbs past fetch are admin verbs (mail_admin.h): each method here routes one typed
// request to its provider's MailAdmin, and `admin(verb)` runs any of them.
//
// Thread-safety: every method may be called concurrently, including from inside a subscription
// callback. Providers are registered for the office's lifetime (never removed), so the pointers
// `provider()` returns stay valid until the office is destroyed.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "postal/mail/mail_admin.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/mail_provider.h"

namespace postal::mail {

class PostOffice {
 public:
  PostOffice() = default;
  ~PostOffice();
  PostOffice(const PostOffice&) = delete;
  PostOffice& operator=(const PostOffice&) = delete;

  // Takes ownership. AlreadyExists when the scheme is taken; a provider registered while the
  // office runs is started at once.
  absl::Status register_provider(std::unique_ptr<MailProvider> provider);
  // The provider for `scheme` ("mem" or "mem:"), or nullptr.
  MailProvider* provider(std::string_view scheme) const;
  template <class P>
  P* provider_as(std::string_view scheme) const {
    return dynamic_cast<P*>(provider(scheme));
  }

  absl::Status start();
  void stop(const StopOptions& options = {});
  bool running() const;

  // ---- the verbs (M-RECV-1) ----
  absl::StatusOr<PostReceipt> post(std::string_view address, Letter letter);
  // `post` without waiting for the answer, so a publisher can keep a window of posts in flight
  // (like JetStream's js_PublishAsync): `done` runs exactly once with what `post` would return —
  // possibly before post_async returns, otherwise on the thread that has the answer (the store's
  // writer, a channel's I/O thread), so it must be short and must not block. The caller bounds
  // how many it keeps in flight. A bad address or a stopped office completes it at once.
  void post_async(std::string_view address, Letter letter, MailProvider::PostDone done);
  absl::StatusOr<Subscription> subscribe(std::string_view address, MailHandler handler,
                                         const SubscribeOptions& options = {});
  absl::StatusOr<std::optional<Delivery>> fetch(std::string_view address,
                                                const FetchOptions& options = {});
  // Up to options.max_messages copies, waiting up to options.max_wait for the first (the long
  // poll, M-RECV-6); settle a manual batch at once with ack_all(). Empty when none came.
  absl::StatusOr<std::vector<Delivery>> fetch_batch(std::string_view address,
                                                    const FetchOptions& options);
  // Read-only copies of up to `limit` queued letters, oldest first (M-RECV-3).
  absl::StatusOr<std::vector<Letter>> peek(std::string_view address, size_t limit = 1);

  // ---- status (M-STAT) ----
  // A provider that cannot answer status queries yields state kUnknown with `exists` unset.
  absl::StatusOr<MailboxStatus> status(std::string_view address);
  MailSnapshot status();

  // ---- leases (M-ACK-3, M-ACK-5) ----
  // Reclaims expired leases of one mailbox; `supported` false when its provider has no leases.
  absl::StatusOr<RecoverResult> recover(std::string_view address);
  RecoverAllResult recover();
  // Every copy with this sender-chosen id, in every provider that can locate. Read-only.
  absl::StatusOr<std::vector<CopyInfo>> locate(std::string_view message_id);
  // Settles a lease by its key (from locate() or Delivery::key()).
  absl::StatusOr<bool> settle(const CopyKey& key, Disposition disposition);
  absl::StatusOr<bool> settle(const CopyKey& key, std::string_view disposition);

  // ---- backlog and dead letters (M-DLQ) ----
  // Drops every provider's backlog (queued and in-flight copies), never subscriptions; returns
  // how many copies were dropped.
  absl::StatusOr<uint64_t> clear();
  absl::StatusOr<MailAddress> dead_letter_topic(std::string_view address);
  absl::StatusOr<std::vector<Letter>> peek_parked(std::string_view address, size_t limit = 100);
  absl::StatusOr<uint64_t> purge_parked(std::string_view address);

  // ---- retained mailboxes (M-KIND-2, M-BOX; providers that declare kRetained) ----
  absl::StatusOr<CreateResult> create_mailbox(std::string_view address, MailboxSpec spec = {});
  // M-BOX-4: a private retained mailbox of the provider of `scheme`; the result's `address` is
  // its only name (the id is drawn by the store, 128 bits from a CSPRNG, and never listed).
  absl::StatusOr<CreateResult> create_private_mailbox(std::string_view scheme,
                                                      MailboxSpec spec = {});
  absl::Status delete_mailbox(std::string_view address);
  // The public retained mailboxes of the provider of `scheme`.
  absl::StatusOr<std::vector<std::string>> list_public(std::string_view scheme);
  absl::StatusOr<bool> erase(std::string_view address, uint64_t seq);

  // ---- mailbox policies (M-RETRY-6; providers that declare kPolicy) ----
  // Replaces the policy of a queue mailbox (mailbox_policy.h); an empty policy clears it. A bad
  // policy fails with InvalidArgument and changes nothing.
  absl::Status set_policy(std::string_view address, const MailboxPolicy& policy);
  absl::StatusOr<MailboxPolicy> policy(std::string_view address);

  // Waits until every provider that can is idle (MailProvider::wait_idle).
  absl::Status wait_idle(absl::Duration timeout);

  // ---- any admin verb (mail_admin.h) ----
  // At the provider of the verb's address: parsed first (M-ADDR-2; the verb gets the canonical
  // form), routed by scheme, its capability checked, and a running office when the verb needs
  // one. The methods above are these, by name.
  template <admin::Targeted V>
  absl::StatusOr<typename V::Result> admin(V verb) {
    std::string* at = admin::target(verb);
    absl::StatusOr<Route> r = route(*at, V::kCapability, V::kName, V::kNeedsRunning);
    if (!r.ok()) return r.status();
    *at = r->address.canonical();
    return run_admin(r->provider->admin(), r->provider->scheme(), std::move(verb));
  }
  // A verb of no one mailbox at the provider of `scheme`.
  template <admin::Verb V>
  absl::StatusOr<typename V::Result> admin(std::string_view scheme, V verb) {
    absl::StatusOr<MailProvider*> p = provider_for(scheme, V::kCapability, V::kName,
                                                   V::kNeedsRunning);
    if (!p.ok()) return p.status();
    return run_admin((*p)->admin(), (*p)->scheme(), std::move(verb));
  }

 private:
  struct Route {
    MailAddress address;
    MailProvider* provider;
  };
  // Parses, finds the provider, checks `op`. `verb` names the entry point in errors.
  absl::StatusOr<Route> route(std::string_view address, Capability op, std::string_view verb,
                              bool needs_running) const;
  // The provider of `scheme`, checked like route() does.
  absl::StatusOr<MailProvider*> provider_for(std::string_view scheme, Capability op,
                                             std::string_view verb, bool needs_running) const;
  absl::Status check_running(std::string_view verb) const;
  std::vector<MailProvider*> providers() const;

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<MailProvider>, std::less<>> providers_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace postal::mail
