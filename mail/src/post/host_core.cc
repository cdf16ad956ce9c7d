#include "host_core.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"
#include "postal/runtime/port.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::post_internal {
namespace {

// Pushes of one subscription in flight at once (the subscriber runs them in order).
constexpr size_t kPushWindow = 256;

// How long a push waits for its settlement. At the settle timeout the mem watchdog (M-RETRY-4)
// has already given the message back and a late result changes nothing, so waiting longer only
// keeps the subscription's strand blocked — on a subscriber whose proc may have died after the
// push reached it, which no undeliverable will ever report.
absl::Duration push_timeout(absl::Duration settle_timeout) {
  if (settle_timeout == absl::ZeroDuration()) return absl::InfiniteDuration();
  return settle_timeout + absl::Seconds(1);
}

}  // namespace

absl::StatusOr<std::string> HostCore::subscribe(const MailAddress& mem_address,
                                                SubscribeOptions options,
                                                runtime::PortRef<MailPush> subscriber,
                                                std::string proc) {
  std::string id;
  {
    absl::MutexLock lock(&mu_);
    if (shut_) return absl::UnavailableError("the mailbox host is stopping");
    id = absl::StrCat("post-sub-", next_id_++);
  }
  const absl::Duration timeout = push_timeout(
      options.settle_timeout.value_or(provider_->options().delivery_settle_timeout));
  // The push came back undeliverable: the subscriber's proc (or its port) is gone. The
  // subscription stops at once (the wait for its other pushes in flight, and releasing the
  // proc's leases, happen off this thread, which answers those pushes).
  std::shared_ptr<PushStream> stream = PushStream::open(
      *pusher_, std::move(subscriber), id, timeout,
      [weak = weak_from_this(), id, proc] {
        if (std::shared_ptr<HostCore> self = weak.lock()) self->drop_subscription(id, proc);
      });
  MemProvider::AsyncMailHandler handler = [weak = std::weak_ptr<PushStream>(stream)](
                                              const Letter& letter, MemProvider::SettleFn settle) {
    std::shared_ptr<PushStream> s = weak.lock();
    if (!s) return std::move(settle)(RetriableError("the mailbox host is stopping"));
    s->push(letter, std::move(settle));
  };
  absl::StatusOr<Subscription> sub = provider_->subscribe_async(
      mem_address, std::move(handler), options, kPushWindow);
  if (!sub.ok()) {
    stream->close();
    return sub.status();
  }
  auto entry = std::make_shared<HostSubscription>(HostSubscription{*std::move(sub), proc, stream});
  absl::MutexLock lock(&mu_);
  subs_.emplace(id, std::move(entry));
  return id;
}

bool HostCore::unsubscribe(const std::string& id) {
  std::shared_ptr<HostSubscription> entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = subs_.find(id);
    if (it == subs_.end()) return false;
    entry = std::move(it->second);
    subs_.erase(it);
  }
  entry->mem.unsubscribe();  // outside the lock: it may wait for a running callback
  entry->stream->close();
  return true;
}

void HostCore::drop_subscription(const std::string& id, const std::string& proc) {
  std::shared_ptr<HostSubscription> entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = subs_.find(id);
    if (it == subs_.end()) return;  // another push of it came back first
    entry = std::move(it->second);
    subs_.erase(it);
  }
  entry->mem.detach();  // nothing new is pushed from now on; the wait is the helper's
  run_blocking([weak = weak_from_this(), entry, proc] {
    entry->mem.unsubscribe();
    entry->stream->close();
    if (std::shared_ptr<HostCore> core = weak.lock()) core->release_leases_of(proc);
  });
}

void HostCore::record_lease(const CopyKey& key, std::string proc) {
  absl::MutexLock lock(&mu_);
  // The table only serves release_leases_of; a settled lease left in it is harmless (settling it
  // again returns false). Bound it by forgetting the oldest half: those fall back to M-ACK-3.
  if (leases_.size() >= 4096) leases_.erase(leases_.begin(), leases_.begin() + 2048);
  leases_.emplace_back(key, std::move(proc));
}

size_t HostCore::release_leases_of(const std::string& proc) {
  std::vector<CopyKey> mine;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = leases_.begin(); it != leases_.end();) {
      if (it->second == proc) {
        mine.push_back(std::move(it->first));
        it = leases_.erase(it);
      } else {
        ++it;
      }
    }
  }
  size_t released = 0;
  for (const CopyKey& key : mine) {
    if (provider_->settle_all({&key, 1}, Disposition::kUnhandled).front()) ++released;
  }
  return released;
}

void HostCore::run_blocking(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (shut_) return;
  // Join the helpers that already finished, so the list stays as long as what runs now.
  for (auto it = helpers_.begin(); it != helpers_.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = helpers_.erase(it);
    } else {
      ++it;
    }
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  helpers_.push_back(Helper{std::thread([fn = std::move(fn), done]() mutable {
                              fn();
                              done->store(true);
                            }),
                            done});
}

void HostCore::shutdown() {
  std::map<std::string, std::shared_ptr<HostSubscription>> subs;
  std::vector<Helper> helpers;
  {
    absl::MutexLock lock(&mu_);
    if (shut_) return;
    shut_ = true;
    subs.swap(subs_);
  }
  for (auto& [id, entry] : subs) {
    entry->mem.unsubscribe();
    entry->stream->close();
  }
  late_replies_->close();
  provider_->stop(StopOptions{});
  {
    absl::MutexLock lock(&mu_);
    helpers.swap(helpers_);
  }
  for (Helper& h : helpers) h.thread.join();
}

}  // namespace postal::mail::post_internal
