#include "push_stream.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"
#include "postal/runtime/port_sink.h"
#include "postal/runtime/proc.h"

namespace postal::mail::post_internal {

// The settlement port's sink: settlements, or the failure of a push sent with this port as its
// reply port (the subscriber is gone; R-FAIL-3 returns it here).
class PushStream::Sink final : public runtime::PortSink {
 public:
  explicit Sink(std::weak_ptr<PushStream> stream) : stream_(std::move(stream)) {}
  void deliver(runtime::EnvelopePtr env) override {
    std::shared_ptr<PushStream> s = stream_.lock();
    if (!s) return;
    if (MailSettled* settled = env->data().get<MailSettled>()) s->on_settled(std::move(*settled));
  }
  void fail(const runtime::DeliveryFailure& failure) override {
    if (std::shared_ptr<PushStream> s = stream_.lock()) s->on_failed(failure.to_string());
  }

 private:
  std::weak_ptr<PushStream> stream_;
};

std::shared_ptr<PushStream> PushStream::open(runtime::Client& pusher,
                                             runtime::PortRef<MailPush> subscriber,
                                             std::string subscription_id, absl::Duration timeout,
                                             OnGone on_gone) {
  std::shared_ptr<PushStream> s(new PushStream(pusher, std::move(subscriber),
                                               std::move(subscription_id), timeout,
                                               std::move(on_gone)));
  s->sink_ = std::make_shared<Sink>(s);
  std::shared_ptr<runtime::Mailbox> mailbox = pusher.mailbox();
  s->port_ = mailbox->open_port(wire::type_hash<MailSettled>(), &runtime::decode_as<MailSettled>,
                                s->sink_, /*once=*/false);
  s->settle_to_ = runtime::PortRef<MailSettled>(
      mailbox->port_addr(runtime::Port::ephemeral(s->port_)), mailbox);
  return s;
}

PushStream::PushStream(runtime::Client& pusher, runtime::PortRef<MailPush> subscriber,
                       std::string id, absl::Duration timeout, OnGone on_gone)
    : pusher_(pusher),
      subscriber_(std::move(subscriber)),
      id_(std::move(id)),
      timeout_(timeout),
      on_gone_(std::move(on_gone)) {}

PushStream::~PushStream() { close(); }

void PushStream::push(const Letter& letter, MemProvider::SettleFn settle) {
  absl::StatusOr<WireLetter> wire_letter = WireLetter::of(letter);
  if (!wire_letter.ok()) return std::move(settle)(MarkRetriable(wire_letter.status(), false));
  std::vector<MemProvider::SettleFn> expired;
  std::optional<std::string> closed;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) {
      closed = closed_why_;
    } else {
      const absl::Time now = pusher_.proc().now();
      const uint64_t id = next_delivery_++;
      const absl::Time deadline = now + timeout_;
      unsettled_.emplace(id, Unsettled{std::move(settle), deadline});
      if (timeout_ != absl::InfiniteDuration()) {
        deadlines_.emplace_back(deadline, id);
        expire_locked(now, expired);  // sets the timer
      }
      next_bytes_ += wire_letter->bytes.size();
      next_.delivery_ids.push_back(id);
      next_.letters.push_back(*std::move(wire_letter));
    }
  }
  if (closed) return std::move(settle)(RetriableError(*closed));
  settle_expired(expired);
  flush();
}

void PushStream::settle_expired(std::vector<MemProvider::SettleFn>& expired) {
  for (MemProvider::SettleFn& fn : expired) {
    std::move(fn)(RetriableError("no settlement from the subscriber in time"));
  }
}

void PushStream::on_timer() {
  std::vector<MemProvider::SettleFn> expired;
  {
    absl::MutexLock lock(&mu_);
    timer_ = 0;
    if (closed_) return;
    expire_locked(pusher_.proc().now(), expired);
  }
  settle_expired(expired);
}

void PushStream::flush() {
  while (true) {
    MailPush batch;
    {
      absl::MutexLock lock(&mu_);
      if (sending_ || closed_ || next_.letters.empty()) return;
      // A batch past the byte bound goes out at once: holding it would not make it smaller.
      if (batches_.size() >= kBatchesInFlight && next_bytes_ < kMaxBatchBytes) return;
      batch = std::move(next_);
      next_ = MailPush{};
      next_bytes_ = 0;
      batches_.push_back(batch.delivery_ids.back());
      sending_ = true;
    }
    batch.subscription_id = id_;
    batch.settle_to = settle_to_;
    wire::Headers headers;
    headers.set(runtime::kReplyPortHeader, port_);  // a push that comes back fails the port
    subscriber_.send(pusher_, std::move(batch), std::move(headers));
    absl::MutexLock lock(&mu_);
    sending_ = false;
  }
}

void PushStream::on_settled(MailSettled settled) {
  std::vector<std::pair<MemProvider::SettleFn, absl::Status>> done;
  std::vector<MemProvider::SettleFn> expired;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    const absl::Time now = pusher_.proc().now();
    const size_t n = std::min(settled.delivery_ids.size(), settled.results.size());
    for (size_t i = 0; i < n; ++i) {
      auto it = unsettled_.find(settled.delivery_ids[i]);
      if (it == unsettled_.end()) continue;  // expired, or not ours
      done.emplace_back(std::move(it->second.settle), settled.results[i].to_status());
      unsettled_.erase(it);
    }
    expire_locked(now, expired);
    while (!batches_.empty() && !unsettled_.contains(batches_.front())) batches_.pop_front();
  }
  // The settle functions start the next deliveries of the subscription (into next_); the batch
  // they make goes out below as one.
  for (auto& [fn, status] : done) std::move(fn)(std::move(status));
  settle_expired(expired);
  flush();
}

void PushStream::on_failed(const std::string& why) {
  OnGone gone;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    gone = std::move(on_gone_);
  }
  // The subscriber is gone: the subscription stops (nothing new is pushed), then every delivery
  // in flight settles unhandled (M-ACK-4) and goes back to the queue by M-RETRY-1.
  if (gone) std::move(gone)();
  std::vector<MemProvider::SettleFn> left;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    closed_why_ = absl::StrCat("subscriber of ", id_, " is gone: ", why);
    if (timer_ != 0) pusher_.proc().timers().cancel(timer_);
    timer_ = 0;
    for (auto& [id, u] : unsettled_) left.push_back(std::move(u.settle));
    unsettled_.clear();
    deadlines_.clear();
    batches_.clear();
    next_ = MailPush{};
  }
  for (MemProvider::SettleFn& fn : left) std::move(fn)(RetriableError(closed_why_));
}

void PushStream::close() {
  std::vector<MemProvider::SettleFn> left;
  {
    absl::MutexLock lock(&mu_);
    if (!closed_) {
      closed_ = true;
      closed_why_ = absl::StrCat("the subscription ", id_, " ended");
    }
    for (auto& [id, u] : unsettled_) left.push_back(std::move(u.settle));
    unsettled_.clear();
    deadlines_.clear();
    batches_.clear();
    next_ = MailPush{};
    on_gone_ = nullptr;
    if (timer_ != 0) pusher_.proc().timers().cancel(timer_);
    timer_ = 0;
  }
  if (port_ != 0) pusher_.mailbox()->close_port(port_);
  for (MemProvider::SettleFn& fn : left) std::move(fn)(RetriableError(closed_why_));
}

size_t PushStream::unsettled() const {
  absl::MutexLock lock(&mu_);
  return unsettled_.size();
}

void PushStream::expire_locked(absl::Time now, std::vector<MemProvider::SettleFn>& out) {
  while (!deadlines_.empty()) {
    auto [deadline, id] = deadlines_.front();
    auto it = unsettled_.find(id);
    if (it != unsettled_.end()) {
      if (deadline > now) break;
      out.push_back(std::move(it->second.settle));
      unsettled_.erase(it);
    }
    deadlines_.pop_front();  // expired now, or settled before
  }
  if (timer_ != 0 || deadlines_.empty() || closed_) return;
  timer_ = pusher_.proc().timers().schedule(deadlines_.front().first, [weak = weak_from_this()] {
    if (std::shared_ptr<PushStream> self = weak.lock()) self->on_timer();
  });
}

}  // namespace postal::mail::post_internal
