// PostSubscription: a push port on the caller's proc, the thread that runs the callback for it,
// and the unsubscribe handshake with the host.
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
    if (!push.ok() || push->delivery_id == 0) return;  // the proc stops, or our wake-up
    absl::Status result;
    if (!active_.load()) {
      result = RetriableError("the subscription ended before this push ran");
    } else {
      Letter letter = push->letter.to_letter();
      try {
        result = handler_(letter);
      } catch (const std::exception& e) {  // M-ACK-4: a throw is a plain error
        result = absl::UnknownError(absl::StrCat("the callback threw: ", e.what()));
      } catch (...) {
        result = absl::UnknownError("the callback threw");
      }
    }
    push->reply_to.send(*link_->cx, MailSettle{push->delivery_id, WireStatus::of(result)});
  }
}

void PostSubscription::wake() {
  if (port_) port_->handle.send(MailPush{});  // delivery_id 0
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
