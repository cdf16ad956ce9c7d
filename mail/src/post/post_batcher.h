// PostBatcher: the posts of one PostProvider, sent to its host in batches (internal).
//
// A post is sent at once when no batch is unanswered. While one is, posts gather in the next
// batch, which goes out when it holds kFillLetters (or kMaxBatchBytes) and fewer than
// kBatchesInFlight batches are unanswered, or — not yet full — when every answer is back (a
// partial batch never goes out while an answer is coming: that answer sends it). So at low load
// every post travels alone and at once, and under load the posts travel in batches of
// kFillLetters that keep the host, its store and the link busy at the same time: a window of
// posts becomes a pipeline of equal batches instead of one large batch and a trail of tiny ones
// (one request and one reply per batch instead of per post). Posts reach the host in the order
// they were made, batch after batch, and the host applies a batch in order; so sync and async
// posts of one provider keep their order (both go through here).
//
// Each post's `done` runs exactly once: with its own receipt or refusal (a batch is not all or
// nothing: one letter over a mailbox's bound fails alone), or with the batch's failure when the
// host did not answer it (Unavailable naming the host, after the link's timeout at the latest).
// How many posts wait here is bounded by the caller, as for post_async (post_office.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "pending_requests.h"
#include "post_link.h"
#include "postal/mail/mail_provider.h"
#include "postal/mail/post_messages.h"

namespace postal::mail::post_internal {

class PostBatcher : public std::enable_shared_from_this<PostBatcher> {
 public:
  static constexpr size_t kBatchesInFlight = 8;
  // A batch is full at this many letters (the host takes up to kMaxPostBatch) or, past the
  // first letter, at this many body bytes.
  static constexpr size_t kFillLetters = 64;
  static_assert(kFillLetters <= kMaxPostBatch);
  static constexpr size_t kMaxBatchBytes = 1 << 20;

  // Holds the link weakly: the provider owns it, and an answer running on a proc thread must
  // never be what destroys the procs behind it.
  PostBatcher(std::weak_ptr<Link> link, std::shared_ptr<PendingRequests> pending)
      : link_(std::move(link)), pending_(std::move(pending)) {}

  // `address` is a canonical post address.
  void post(std::string address, WireLetter letter, MailProvider::PostDone done);

 private:
  struct Batch {
    MailPost request;
    std::vector<MailProvider::PostDone> dones;
    size_t bytes = 0;
  };
  void close_next() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // next_ is full: it queues in full_
  // Sends the waiting batch while the window allows, one sender at a time, in order.
  void flush();
  void on_answer(std::vector<MailProvider::PostDone> dones, absl::StatusOr<MailReply> reply);

  const std::weak_ptr<Link> link_;
  const std::shared_ptr<PendingRequests> pending_;
  absl::Mutex mu_;
  Batch next_ ABSL_GUARDED_BY(mu_);
  std::vector<Batch> full_ ABSL_GUARDED_BY(mu_);  // filled batches waiting for the window
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool sending_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace postal::mail::post_internal
