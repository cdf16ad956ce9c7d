// PendingRequests: requests that no thread waits for — answered later, on the thread that
// delivers the answer (internal).
//
// `PostProvider::post_async` sends a batch of posts (MailPost) and returns; a long-poll fetch
// waits on its own notification. Each request gets a once port on the sender's mailbox whose sink is a small
// `Completion` instead of a receiver queue, so the answer runs its continuation on the thread that
// delivers it (the I/O thread for a peer on another proc) and nothing polls. Every request
// completes exactly once: with the reply, with the failure when it comes back undeliverable (the
// port's `fail`, R-FAIL-3), or with DeadlineExceeded when its timeout passes first (a proc
// timer). `cancel_waits` completes the ones sent with `wait` (long polls) at once; destroying the
// set completes what is left with Cancelled.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "post_link.h"
#include "postal/actors/actor_ref.h"
#include "postal/mail/mailbox_host.h"
#include "postal/mail/post_messages.h"
#include "postal/runtime/mailbox.h"
#include "postal/runtime/port.h"
#include "postal/runtime/port_sink.h"

namespace postal::mail::post_internal {

class PendingRequests : public std::enable_shared_from_this<PendingRequests> {
 public:
  using ReplyDone = absl::AnyInvocable<void(absl::StatusOr<MailReply>) &&>;
  // The raw answer: the reply's envelope, or why there is none.
  using RawDone = absl::AnyInvocable<void(absl::StatusOr<runtime::EnvelopePtr>) &&>;

  ~PendingRequests();

  // Sends `req` to the link's host with a fresh once port as its `reply_to`; `done` gets the
  // reply (a refusal in it is turned into its status, as Link::call does) or the failure as
  // Unavailable naming the host. `wait`: a long poll, ended by cancel_waits.
  template <class Req>
  void send(const Link& link, Req req, std::string_view verb, absl::Duration timeout, bool wait,
            ReplyDone done) {
    std::string what = absl::StrCat("the mailbox host ", link.host.to_string());
    const Opened o = open(
        *link.cx, wire::type_hash<MailReply>(), &runtime::decode_as<MailReply>, timeout, wait,
        [done = std::move(done), what, verb = std::string(verb)](
            absl::StatusOr<runtime::EnvelopePtr> env) mutable {
          if (!env.ok()) {
            return std::move(done)(absl::UnavailableError(absl::StrCat(
                "post: ", what, " did not answer ", verb, " (", env.status().message(),
                "); check that its proc is up and runs a postal.MailboxHost")));
          }
          MailReply* reply = (*env)->data().get<MailReply>();
          if (reply == nullptr) return std::move(done)(absl::InternalError("not a MailReply"));
          if (reply->status.code != 0) return std::move(done)(reply->status.to_status());
          std::move(done)(std::move(*reply));
        });
    req.reply_to = runtime::OncePortRef<MailReply>(o.addr, o.mailbox);
    wire::Headers headers;
    headers.set(runtime::kReplyPortHeader, o.port);
    actors::ActorRef<MailboxHost>(link.host).port<Req>().send(*link.cx, std::move(req),
                                                              std::move(headers));
  }

  // Completes every request sent with `wait` (a long poll) with `why`: its provider stops.
  void cancel_waits(const absl::Status& why);

  size_t size() const;

 private:
  class Completion;
  struct Opened {
    runtime::PortAddr addr;
    std::shared_ptr<runtime::Mailbox> mailbox;
    uint64_t port = 0;
  };
  Opened open(runtime::SendContext& cx, uint64_t reply_type, runtime::DecodeFn decoder,
              absl::Duration timeout, bool wait, RawDone done);
  struct Entry {
    RawDone done;
    std::shared_ptr<Completion> sink;  // the mailbox holds it weakly
    std::shared_ptr<runtime::Mailbox> mailbox;
    uint64_t port = 0;
    uint64_t timer = 0;
    runtime::Proc* proc = nullptr;
    bool wait = false;
  };
  // Takes the entry out and runs its continuation (outside the lock). No-op for an id already
  // completed: the first of reply, failure and timeout wins.
  void complete(uint64_t id, absl::StatusOr<runtime::EnvelopePtr> reply, bool close_port);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace postal::mail::post_internal
