// PostProvider: each core verb is one request to the MailboxHost (post_messages.h); every admin
// verb is one MailAdminCall (admin_wire.h).
#include "postal/mail/post_provider.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "admin_wire.h"
#include "pending_requests.h"
#include "post_batcher.h"
#include "post_link.h"
#include "postal/mail/mail_errors.h"

namespace postal::mail {
namespace {

using post_internal::Link;
using post_internal::PostSubscription;

CopyKey key_of(const WireKey& k) { return CopyKey{mem_to_post(k.address), k.send_id, k.lease_id}; }

WireKey wire_key(const CopyKey& key) { return WireKey{key.address, key.send_id, key.lease_id}; }

// Settles the leases of manual fetches at the host, by key (M-ACK-2), and controls them (M-ACK-6).
class PostSettler final : public LeaseSettler {
 public:
  explicit PostSettler(std::shared_ptr<Link> link) : link_(std::move(link)) {}
  bool settle(const CopyKey& key, Disposition disposition) override {
    return settle_all(std::span<const CopyKey>(&key, 1), disposition).front();
  }
  absl::StatusOr<bool> settle(const CopyKey& key, std::string_view disposition) override {
    std::optional<Disposition> d = parse_disposition(disposition);
    if (!d) {
      return UnsupportedCapabilityError("post", absl::StrCat("disposition '", sv(disposition), "'"),
                                        "post understands handled, discard, unhandled and terminate");
    }
    return settle(key, *d);
  }
  std::vector<bool> settle_all(std::span<const CopyKey> keys, Disposition disposition) override {
    std::vector<bool> took(keys.size(), false);
    // Batches of at most kMaxFetchBatch keys, one round trip each.
    for (size_t begin = 0; begin < keys.size(); begin += kMaxFetchBatch) {
      const size_t end = std::min(keys.size(), begin + kMaxFetchBatch);
      MailSettleMany req{{}, std::string(to_string(disposition)), {}};
      for (size_t i = begin; i < end; ++i) req.keys.push_back(wire_key(keys[i]));
      absl::StatusOr<MailReply> r = link_->call(std::move(req), "settle");
      if (!r.ok()) continue;  // not settled: the leases run out (M-ACK-3)
      for (size_t i = begin; i < end && i - begin < r->flags.size(); ++i) {
        took[i] = r->flags[i - begin] != 0;
      }
    }
    return took;
  }
  std::optional<std::optional<absl::Time>> renew(const CopyKey& key) override {
    absl::StatusOr<MailReply> r = link_->call(MailLease{wire_key(key), true, 0, {}}, "renew");
    if (!r.ok() || !r->flag) return std::nullopt;
    std::optional<absl::Time> expires;
    if (r->lease_expires_ns) expires = absl::FromUnixNanos(*r->lease_expires_ns);
    return expires;
  }
  bool nack(const CopyKey& key, absl::Duration delay) override {
    absl::StatusOr<MailReply> r = link_->call(
        MailLease{wire_key(key), false, absl::ToInt64Nanoseconds(delay), {}}, "nack");
    return r.ok() && r->flag;
  }

 private:
  std::shared_ptr<Link> link_;
};

class PostControl final : public SubscriptionControl {
 public:
  explicit PostControl(std::shared_ptr<PostSubscription> sub) : sub_(std::move(sub)) {}
  void unsubscribe() override { sub_->unsubscribe(); }
  bool active() const override { return sub_->active(); }

 private:
  std::shared_ptr<PostSubscription> sub_;
};

// Capabilities every host has, assumed before start() asked.
constexpr uint64_t bit(Capability c) { return uint64_t{1} << static_cast<uint8_t>(c); }
constexpr uint64_t kCoreCapabilities = bit(Capability::kPost) | bit(Capability::kSubscribe) |
                                       bit(Capability::kFetch) | bit(Capability::kManualAck) |
                                       bit(Capability::kStatus);

}  // namespace

absl::StatusOr<std::unique_ptr<PostProvider>> PostProvider::create(PostOptions options) {
  if (!options.context) return absl::InvalidArgumentError("post: PostOptions.context is required");
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("post: PostOptions.timeout must be positive");
  }
  auto link = std::make_shared<Link>(
      Link{std::move(options.context), std::move(options.host), options.timeout});
  return std::unique_ptr<PostProvider>(new PostProvider(std::move(link)));
}

PostProvider::PostProvider(std::shared_ptr<Link> link)
    : link_(std::move(link)),
      pending_(std::make_shared<post_internal::PendingRequests>()),
      batcher_(std::make_shared<post_internal::PostBatcher>(link_, pending_)) {}

PostProvider::~PostProvider() {
  stop(StopOptions{});
  std::map<std::string, std::shared_ptr<PostSubscription>> subs;
  {
    absl::MutexLock lock(&mu_);
    subs.swap(subs_);
  }
  for (auto& [id, sub] : subs) sub->join();
}

bool PostProvider::can(Capability op, const MailAddress*) const {
  absl::MutexLock lock(&mu_);
  return (capabilities_.value_or(kCoreCapabilities) & bit(op)) != 0;
}

absl::Status PostProvider::start() {
  absl::StatusOr<MailReply> hello = link_->call(MailHello{}, "hello");
  if (!hello.ok()) return hello.status();
  absl::MutexLock lock(&mu_);
  capabilities_ = hello->count;
  running_ = true;
  return absl::OkStatus();
}

void PostProvider::stop(const StopOptions& options) {
  std::vector<std::shared_ptr<PostSubscription>> subs;
  {
    absl::MutexLock lock(&mu_);
    running_ = false;
    for (auto& [id, sub] : subs_) subs.push_back(sub);
  }
  for (auto& sub : subs) sub->unsubscribe();
  // A long poll ends now; at the host it waits out its deadline (docs/decisions.md).
  pending_->cancel_waits(
      absl::FailedPreconditionError("post: the provider stopped while this fetch waited"));
  if (options.purge) (void)run(admin::Clear{});
}

absl::StatusOr<PostReceipt> PostProvider::post(const MailAddress& to, Letter letter) {
  // Through the batcher like post_async, so a sync post never overtakes async ones. The batcher
  // answers every post (its request times out at the latest), so the wait ends.
  struct Answer {
    absl::Notification done;
    absl::StatusOr<PostReceipt> receipt;
  };
  auto answer = std::make_shared<Answer>();
  post_async(to, std::move(letter), [answer](absl::StatusOr<PostReceipt> r) {
    answer->receipt = std::move(r);
    answer->done.Notify();
  });
  answer->done.WaitForNotification();
  return std::move(answer->receipt);
}

void PostProvider::post_async(const MailAddress& to, Letter letter, PostDone done) {
  absl::StatusOr<WireLetter> w = WireLetter::of(letter);
  if (!w.ok()) return std::move(done)(w.status());
  batcher_->post(to.canonical(), *std::move(w), std::move(done));
}

absl::StatusOr<Subscription> PostProvider::subscribe(const MailAddress& address,
                                                     MailHandler handler,
                                                     const SubscribeOptions& options) {
  auto sub = std::make_shared<PostSubscription>(link_, std::move(handler));
  if (absl::Status s = sub->start(address.canonical(), options); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    // Forget subscriptions that ended and were joined.
    std::erase_if(subs_, [](const auto& kv) { return !kv.second->active(); });
    subs_[sub->id()] = sub;
  }
  return Subscription(sub->id(), address.canonical(), std::make_unique<PostControl>(sub));
}

absl::StatusOr<std::optional<Delivery>> PostProvider::fetch(const MailAddress& address,
                                                            const FetchOptions& options) {
  return fetch_one(address, options);
}

absl::StatusOr<std::vector<Delivery>> PostProvider::fetch_batch(const MailAddress& address,
                                                                const FetchOptions& options) {
  if (options.ack_timeout < absl::ZeroDuration() || options.max_wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("fetch: ack_timeout and max_wait must not be negative");
  }
  if (options.max_messages == 0 || options.max_messages > kMaxFetchBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("fetch: max_messages is ", options.max_messages, "; ask for 1 to ",
                     kMaxFetchBatch, " copies"));
  }
  // 0 on the wire is "never expires", for a zero and for an infinite timeout alike (an infinite
  // one would otherwise cross as INT64_MAX ns: a finite lease ending in 2262).
  const int64_t ack_timeout_ns = options.ack_timeout == absl::InfiniteDuration()
                                     ? 0
                                     : absl::ToInt64Nanoseconds(options.ack_timeout);
  MailFetch req{address.canonical(),
                options.ack == AckMode::kManual,
                ack_timeout_ns,
                static_cast<uint32_t>(options.max_messages),
                options.max_bytes,
                absl::ToInt64Nanoseconds(options.max_wait),
                {}};
  absl::StatusOr<MailReply> r = absl::UnknownError("unanswered");
  if (options.max_wait <= absl::ZeroDuration()) {
    r = link_->call(std::move(req), "fetch");
  } else {
    // A long poll: the host answers by its deadline, so wait that long beyond the usual timeout;
    // stop() ends the wait (cancel_waits).
    absl::Notification answered;
    pending_->send(*link_, std::move(req), "fetch", link_->timeout + options.max_wait,
                   /*wait=*/true, [&](absl::StatusOr<MailReply> reply) {
                     r = std::move(reply);
                     answered.Notify();
                   });
    answered.WaitForNotification();
  }
  if (!r.ok()) return r.status();
  std::vector<Delivery> out;
  out.reserve(r->letters.size());
  std::shared_ptr<PostSettler> settler;
  for (size_t i = 0; i < r->letters.size() && i < r->keys.size(); ++i) {
    Letter letter = r->letters[i].to_letter();
    CopyKey key = key_of(r->keys[i]);
    if (options.ack == AckMode::kAuto || key.lease_id == 0) {
      out.push_back(Delivery::settled(std::move(letter), std::move(key)));
      continue;
    }
    if (!settler) settler = std::make_shared<PostSettler>(link_);  // one per batch: ack_all
    std::optional<absl::Time> expires;
    if (i < r->expires_ns.size() && r->expires_ns[i] != 0) {
      expires = absl::FromUnixNanos(r->expires_ns[i]);
    }
    out.emplace_back(std::move(letter), std::move(key), expires, settler);
  }
  return out;
}

absl::StatusOr<MailboxStatus> PostProvider::status(const MailAddress& address) {
  absl::StatusOr<MailReply> r = link_->call(MailStatusQuery{address.canonical(), {}}, "status");
  if (!r.ok()) return r.status();
  if (r->statuses.empty()) return absl::InternalError("post: the host sent no status");
  MailboxStatus s = r->statuses[0].to_status();
  absl::MutexLock lock(&mu_);
  if (!running_ && s.exists.value_or(false)) s.state = MailboxState::kOffline;
  return s;
}

absl::Status PostProvider::wait_idle(absl::Time deadline) {
  absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
  absl::StatusOr<MailReply> r = link_->call(
      MailWaitIdle{absl::ToInt64Nanoseconds(left), {}}, "wait_idle", left + link_->timeout);
  return r.status();
}

absl::StatusOr<AdminResult> PostProvider::run(const AdminRequest& request) {
  absl::StatusOr<MailAdminCall> call = post_internal::admin_call(request);
  if (!call.ok()) return call.status();
  const std::string verb = call->verb;
  absl::StatusOr<MailAdminReply> reply = link_->call(*std::move(call), verb);
  if (!reply.ok()) return reply.status();
  absl::StatusOr<AdminResult> result = post_internal::admin_result_of(request, *reply);
  if (!result.ok()) return result;
  if (auto* listed = std::get_if<admin::kIndex<admin::ListStatus>>(&*result)) {
    absl::MutexLock lock(&mu_);
    if (!running_) {
      for (MailboxStatus& s : *listed) s.state = MailboxState::kOffline;
    }
  }
  return result;
}

}  // namespace postal::mail
