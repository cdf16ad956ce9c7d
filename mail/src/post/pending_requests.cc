#include "pending_requests.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "postal/runtime/proc.h"

namespace postal::mail::post_internal {

// The once port's sink: the reply, or the failure of the request behind the port.
class PendingRequests::Completion final : public runtime::PortSink {
 public:
  Completion(std::weak_ptr<PendingRequests> set, uint64_t id) : set_(std::move(set)), id_(id) {}
  void deliver(runtime::EnvelopePtr env) override {
    if (auto set = set_.lock()) set->complete(id_, std::move(env), /*close_port=*/false);
  }
  void fail(const runtime::DeliveryFailure& failure) override {
    if (auto set = set_.lock()) {
      set->complete(id_, absl::UnavailableError(failure.to_string()), /*close_port=*/true);
    }
  }

 private:
  std::weak_ptr<PendingRequests> set_;
  uint64_t id_;
};

PendingRequests::~PendingRequests() {
  absl::flat_hash_map<uint64_t, Entry> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(pending_);
  }
  for (auto& [id, e] : left) {
    e.proc->timers().cancel(e.timer);
    e.mailbox->close_port(e.port);
    std::move(e.done)(absl::CancelledError("no answer when the provider was destroyed"));
  }
}

PendingRequests::Opened PendingRequests::open(runtime::SendContext& cx, uint64_t reply_type,
                                              runtime::DecodeFn decoder, absl::Duration timeout,
                                              bool wait, RawDone done) {
  std::shared_ptr<runtime::Mailbox> mailbox = cx.mailbox();
  runtime::Proc& proc = cx.proc();
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    id = next_id_++;
  }
  auto sink = std::make_shared<Completion>(weak_from_this(), id);
  const uint64_t port = mailbox->open_port(reply_type, decoder, sink, /*once=*/true);
  Opened opened{mailbox->port_addr(runtime::Port::ephemeral(port)), mailbox, port};
  {
    absl::MutexLock lock(&mu_);
    pending_.emplace(id, Entry{std::move(done), sink, mailbox, port, 0, &proc, wait});
  }
  const uint64_t timer = proc.timers().schedule(
      proc.timers().now() + timeout, [weak = weak_from_this(), id, timeout] {
        if (auto set = weak.lock()) {
          set->complete(id,
                        absl::DeadlineExceededError(
                            absl::StrCat("no answer within ", absl::FormatDuration(timeout))),
                        /*close_port=*/true);
        }
      });
  bool answered = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(id);
    answered = it == pending_.end();
    if (!answered) it->second.timer = timer;
  }
  if (answered) proc.timers().cancel(timer);  // completed before its timer was known
  return opened;
}

void PendingRequests::cancel_waits(const absl::Status& why) {
  std::vector<Entry> waits;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (!it->second.wait) {
        ++it;
        continue;
      }
      waits.push_back(std::move(it->second));
      pending_.erase(it++);
    }
  }
  for (Entry& e : waits) {
    e.proc->timers().cancel(e.timer);
    e.mailbox->close_port(e.port);
    std::move(e.done)(why);
  }
}

size_t PendingRequests::size() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

void PendingRequests::complete(uint64_t id, absl::StatusOr<runtime::EnvelopePtr> reply,
                               bool close_port) {
  Entry e;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    e = std::move(it->second);
    pending_.erase(it);
  }
  if (e.timer != 0) e.proc->timers().cancel(e.timer);
  if (close_port) e.mailbox->close_port(e.port);
  std::move(e.done)(std::move(reply));
}

}  // namespace postal::mail::post_internal
