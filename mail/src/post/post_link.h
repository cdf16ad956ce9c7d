// Link: how a PostProvider reaches its MailboxHost — the caller's context, the host's address
// and the request timeout — shared with its subscriptions and lease handles (internal).
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "postal/actors/actor_ref.h"
#include "postal/mail/mail_provider.h"
#include "postal/mail/mailbox_host.h"
#include "postal/mail/post_messages.h"
#include "postal/mail/subscription.h"
#include "postal/runtime/port.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::post_internal {

struct Link {
  std::shared_ptr<runtime::SendContext> cx;
  runtime::ActorAddr host;
  absl::Duration timeout;

  // Sends `req` to the host and waits for its reply. A lost host → Unavailable naming it; a
  // verb the host refused → the host's status.
  template <class Req>
  absl::StatusOr<typename Req::Reply> call(Req req, std::string_view verb,
                                           std::optional<absl::Duration> wait = std::nullopt) const {
    actors::ActorRef<MailboxHost> ref(host);
    absl::StatusOr<typename Req::Reply> r = ref.request(*cx, std::move(req), wait.value_or(timeout));
    if (!r.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "post: the mailbox host ", host.to_string(), " did not answer ", sv(verb), " (",
          r.status().message(), "); check that its proc is up and runs a postal.MailboxHost"));
    }
    if (r->status.code != 0) return r->status.to_status();
    return r;
  }
};

// One subscription's push port and the thread that runs its callback.
class PostSubscription {
 public:
  PostSubscription(std::shared_ptr<Link> link, MailHandler handler);
  ~PostSubscription();

  // Opens the port; registers it at the host for `address` (a canonical post address).
  absl::Status start(const std::string& address, const SubscribeOptions& options);
  const std::string& id() const { return id_; }

  // SubscriptionControl semantics (subscription.h): waits for a running callback unless called
  // from it.
  void unsubscribe();
  bool active() const { return active_.load(); }
  // Joins this subscription's threads (not when called from one of them).
  void join();

 private:
  void run();
  // Runs the callback for one pushed letter; its result settles the delivery (M-ACK-4).
  absl::Status handle(const WireLetter& pushed);
  void wake();

  std::shared_ptr<Link> link_;
  MailHandler handler_;
  std::string id_;
  std::optional<runtime::OpenPort<MailPush>> port_;
  std::atomic<bool> active_{false};
  std::atomic<bool> unsubscribed_{false};
  std::thread thread_;
  std::thread unsubscriber_;  // the host round trip of an unsubscribe from inside the callback
  absl::Mutex mu_;
};

}  // namespace postal::mail::post_internal
