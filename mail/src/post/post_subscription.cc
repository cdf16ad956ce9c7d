// PostSubscription: a push port on the caller's proc, the thread that runs the callback for it,
// and the unsubscribe handshake with the host.
#include <algorithm>
#include <exception>

#include "post_link.h"
#include "postal/mail/mail_errors.h"

namespace postal::mail::post_internal {
namespace {
// An unsubscribe waits for a running (remote) callback; bound it generously.
constexpr absl::Duration kUnsubscribeWait = absl::Minutes(5);
}  // namespace

PostSubscription::PostSubscription(std::shared_ptr<Link> link, MailHandler handler)
    : link_(std::move(link)), handler_(std::move(handler)) {}

PostSubscription::~PostSubscription() {
  unsubscribe();
  join();
  // Destroyed on one of its own threads (the last handle dropped inside the callback): that
  // thread ends right after; it cannot join itself.
  if (thread_.joinable()) thread_.detach();
  if (unsubscriber_.joinable()) unsubscriber_.detach();
}

absl::Status PostSubscription::start(const std::string& address, const SubscribeOptions& options) {
  port_.emplace(runtime::open_port<MailPush>(*link_->cx));
  MailSubscribe req{address, options.label, port_->handle.bind(), {},
                    static_cast<uint8_t>(options.deliver)};
  req.queue_group = options.queue_group;
  if (options.retry.has_value()) {
    req.retry = true;
    req.max_attempts = options.retry->max_attempts;
    req.base_delay_ns = absl::ToInt64Nanoseconds(options.retry->base_delay);
    req.max_delay_ns = absl::ToInt64Nanoseconds(options.retry->max_delay);
    req.factor = options.retry->factor;
    req.jitter = options.retry->jitter;
  }
  if (options.settle_timeout.has_value()) {
    req.settle_timeout_ns = absl::ToInt64Nanoseconds(*options.settle_timeout);
  }
  absl::StatusOr<MailReply> r = link_->call(std::move(req), "subscribe");
  if (!r.ok()) {
    unsubscribed_ = true;
    port_.reset();
    return r.status();
  }
  id_ = r->text;
  active_ = true;
  thread_ = std::thread([this] { run(); });
  return absl::OkStatus();
}

void PostSubscription::run() {
  while (true) {
    absl::StatusOr<MailPush> push = port_->receiver.recv();
    if (!push.ok() || push->letters.empty()) return;  // the proc stops, or our wake-up
    MailSettled settled;
    const size_t n = std::min(push->letters.size(), push->delivery_ids.size());
    settled.delivery_ids.reserve(n);
    settled.results.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      settled.delivery_ids.push_back(push->delivery_ids[i]);
      settled.results.push_back(WireStatus::of(handle(push->letters[i])));
    }
    // One answer for the batch: the host starts the next deliveries from it.
    push->settle_to.send(*link_->cx, std::move(settled));
  }
}

absl::Status PostSubscription::handle(const WireLetter& pushed) {
  if (!active_.load()) return RetriableError("the subscription ended before this push ran");
  Letter letter = pushed.to_letter();
  try {
    return handler_(letter);
  } catch (const std::exception& e) {  // M-ACK-4: a throw is a plain error
    return absl::UnknownError(absl::StrCat("the callback threw: ", e.what()));
  } catch (...) {
    return absl::UnknownError("the callback threw");
  }
}

void PostSubscription::wake() {
  if (port_) port_->handle.send(MailPush{});  // no letters
}

void PostSubscription::unsubscribe() {
  if (unsubscribed_.exchange(true)) return;
  if (std::this_thread::get_id() == thread_.get_id()) {
    // From inside the callback: do not wait for ourselves. The host round trip runs beside;
    // pushes arriving meanwhile are answered "unhandled" until the wake-up ends the loop.
    active_ = false;
    absl::MutexLock lock(&mu_);
    unsubscriber_ = std::thread([this] {
      (void)link_->call(MailUnsubscribe{id_, {}}, "unsubscribe", kUnsubscribeWait);
      wake();
    });
    return;
  }
  // The host answers once no callback of ours runs any more; from then on nothing is pushed.
  (void)link_->call(MailUnsubscribe{id_, {}}, "unsubscribe", kUnsubscribeWait);
  active_ = false;
  wake();
  join();
}

void PostSubscription::join() {
  const std::thread::id self = std::this_thread::get_id();
  if (thread_.joinable() && thread_.get_id() != self) thread_.join();
  absl::MutexLock lock(&mu_);
  if (unsubscriber_.joinable() && unsubscriber_.get_id() != self) unsubscriber_.join();
}

}  // namespace postal::mail::post_internal
