#include "post_batcher.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace postal::mail::post_internal {

void PostBatcher::post(std::string address, WireLetter letter, MailProvider::PostDone done) {
  {
    absl::MutexLock lock(&mu_);
    const size_t bytes = letter.bytes.size();
    if (!next_.dones.empty() && next_.bytes + bytes > kMaxBatchBytes) close_next();
    next_.request.addresses.push_back(std::move(address));
    next_.request.letters.push_back(std::move(letter));
    next_.dones.push_back(std::move(done));
    next_.bytes += bytes;
    if (next_.dones.size() >= kFillLetters) close_next();
  }
  flush();
}

void PostBatcher::close_next() {
  full_.push_back(std::move(next_));
  next_ = Batch{};
}

void PostBatcher::flush() {
  while (true) {
    Batch batch;
    {
      absl::MutexLock lock(&mu_);
      if (sending_ || in_flight_ >= kBatchesInFlight) return;
      if (!full_.empty()) {
        batch = std::move(full_.front());
        full_.erase(full_.begin());
      } else if (!next_.dones.empty() && in_flight_ == 0) {
        batch = std::move(next_);
        next_ = Batch{};
      } else {
        return;
      }
      ++in_flight_;
      sending_ = true;
    }
    std::shared_ptr<Link> link = link_.lock();
    if (!link) {
      for (MailProvider::PostDone& d : batch.dones) {
        std::move(d)(absl::CancelledError("post: the provider was destroyed"));
      }
      absl::MutexLock lock(&mu_);
      --in_flight_;
      sending_ = false;
      continue;
    }
    pending_->send(*link, std::move(batch.request), "post", link->timeout, /*wait=*/false,
                   [weak = weak_from_this(), dones = std::move(batch.dones)](
                       absl::StatusOr<MailReply> reply) mutable {
                     if (std::shared_ptr<PostBatcher> self = weak.lock()) {
                       return self->on_answer(std::move(dones), std::move(reply));
                     }
                     for (MailProvider::PostDone& d : dones) {
                       std::move(d)(absl::CancelledError("post: the provider was destroyed"));
                     }
                   });
    absl::MutexLock lock(&mu_);
    sending_ = false;
  }
}

void PostBatcher::on_answer(std::vector<MailProvider::PostDone> dones,
                            absl::StatusOr<MailReply> reply) {
  {
    absl::MutexLock lock(&mu_);
    --in_flight_;
  }
  // The next batch first: the host works on it while these continuations run.
  flush();
  for (size_t i = 0; i < dones.size(); ++i) {
    if (!reply.ok()) {
      std::move(dones[i])(reply.status());
    } else if (i >= reply->receipts.size()) {
      std::move(dones[i])(absl::InternalError(
          absl::StrCat("post: the host answered ", reply->receipts.size(), " of ", dones.size(),
                       " posts of a batch")));
    } else {
      std::move(dones[i])(reply->receipts[i].to_receipt());
    }
  }
}

}  // namespace postal::mail::post_internal
