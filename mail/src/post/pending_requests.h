// PendingRequests: requests to a MailboxHost that no caller waits for (internal).
//
// `PostProvider::post_async` sends a MailPost and returns; the answer completes it later. Each
// request gets a once port on the caller's mailbox whose sink is a small `Completion` instead
// of a receiver queue, so the answer runs its continuation on the thread that delivers it (the
// I/O thread for a host on another proc) and nothing polls. Every request completes exactly
// once: with the host's reply, with Unavailable when the request comes back undeliverable (the
// port's `fail`, R-FAIL-3), or with Unavailable when the link's timeout passes first (a proc
// timer). Destroying the set completes what is left with Cancelled.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "post_link.h"
#include "postal/actors/actor_ref.h"
#include "postal/mail/mailbox_host.h"
#include "postal/mail/post_messages.h"
#include "postal/runtime/port.h"
#include "postal/runtime/mailbox.h"

namespace postal::mail::post_internal {

class PendingRequests : public std::enable_shared_from_this<PendingRequests> {
 public:
  using ReplyDone = absl::AnyInvocable<void(absl::StatusOr<MailReply>) &&>;

  ~PendingRequests();

  // Sends `req` to the link's host with a fresh once port as its `reply_to`; `done` gets the
  // reply (a refusal in it is turned into its status, as Link::call does) or the failure —
  // DeadlineExceeded-as-Unavailable after `timeout`, or `cancel_waits`' status for a `wait`.
  template <class Req>
  void send(const Link& link, Req req, std::string_view verb, absl::Duration timeout, bool wait,
            ReplyDone done) {
    const Opened o = open(link, verb, timeout, wait, std::move(done));
    req.reply_to = o.reply_to;
    wire::Headers headers;
    headers.set(runtime::kReplyPortHeader, o.port);
    actors::ActorRef<MailboxHost>(link.host).port<Req>().send(*link.cx, std::move(req),
                                                              std::move(headers));
  }
  void post(const Link& link, MailPost req, ReplyDone done) {
    send(link, std::move(req), "post", link.timeout, /*wait=*/false, std::move(done));
  }
  // Completes every request sent with `wait` (a long poll) with `why`: its provider stops.
  void cancel_waits(const absl::Status& why);

  size_t size() const;

 private:
  class Completion;
  struct Opened {
    runtime::OncePortRef<MailReply> reply_to;
    uint64_t port = 0;
  };
  Opened open(const Link& link, std::string_view verb, absl::Duration timeout, bool wait,
              ReplyDone done);
  struct Entry {
    ReplyDone done;
    std::shared_ptr<Completion> sink;  // the mailbox holds it weakly
    std::shared_ptr<runtime::Mailbox> mailbox;
    uint64_t port = 0;
    uint64_t timer = 0;
    runtime::Proc* proc = nullptr;
    std::string what;  // "the mailbox host <addr>", for errors
    std::string verb;
    bool wait = false;
  };
  // Takes the entry out and runs its continuation (outside the lock). No-op for an id already
  // completed: the first of reply, failure and timeout wins.
  void complete(uint64_t id, absl::StatusOr<MailReply> reply, bool close_port);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace postal::mail::post_internal
