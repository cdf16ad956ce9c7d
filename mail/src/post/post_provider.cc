// PostProvider: each verb is one request to the MailboxHost (post_messages.h).
#include "postal/mail/post_provider.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "pending_requests.h"
#include "post_batcher.h"
#include "post_link.h"
#include "postal/mail/mail_errors.h"

namespace postal::mail {
namespace {

using post_internal::Link;
using post_internal::PostSubscription;

CopyKey key_of(const WireKey& k) { return CopyKey{mem_to_post(k.address), k.send_id, k.lease_id}; }

std::vector<Letter> letters_of(const MailReply& r) {
  std::vector<Letter> out;
  out.reserve(r.letters.size());
  for (const WireLetter& w : r.letters) out.push_back(w.to_letter());
  return out;
}

WireKey wire_key(const CopyKey& key) { return WireKey{key.address, key.send_id, key.lease_id}; }

// Settles the leases of manual fetches at the host, by key (M-ACK-2), and controls them (M-ACK-6).
class PostSettler final : public LeaseSettler {
 public:
  explicit PostSettler(std::shared_ptr<Link> link) : link_(std::move(link)) {}
  bool settle(const CopyKey& key, Disposition disposition) override {
    absl::StatusOr<bool> r = settle(key, to_string(disposition));
    return r.ok() && *r;
  }
  absl::StatusOr<bool> settle(const CopyKey& key, std::string_view disposition) override {
    if (!parse_disposition(disposition)) {
      return UnsupportedCapabilityError("post", absl::StrCat("disposition '", sv(disposition), "'"),
                                        "post understands handled, discard, unhandled and terminate");
    }
    absl::StatusOr<MailReply> r =
        link_->call(MailSettleKey{wire_key(key), std::string(disposition), {}}, "settle");
    if (!r.ok()) return r.status();
    return r->flag;
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
  if (options.purge) (void)clear();
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
  FetchOptions one = options;
  one.max_messages = 1;
  one.max_bytes = 0;
  one.max_wait = absl::ZeroDuration();
  absl::StatusOr<std::vector<Delivery>> batch = fetch_batch(address, one);
  if (!batch.ok()) return batch.status();
  if (batch->empty()) return std::optional<Delivery>();
  return std::optional<Delivery>(std::move(batch->front()));
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

absl::StatusOr<std::vector<Letter>> PostProvider::peek(const MailAddress& address, size_t limit) {
  absl::StatusOr<MailReply> r =
      link_->call(MailPeek{address.canonical(), limit, false, {}}, "peek");
  if (!r.ok()) return r.status();
  return letters_of(*r);
}

absl::StatusOr<std::vector<MailboxStatus>> PostProvider::list_status() {
  absl::StatusOr<MailReply> r = link_->call(MailStatusQuery{"", {}}, "status");
  if (!r.ok()) return r.status();
  std::vector<MailboxStatus> out;
  bool running;
  {
    absl::MutexLock lock(&mu_);
    running = running_;
  }
  for (const WireMailboxStatus& w : r->statuses) {
    out.push_back(w.to_status());
    if (!running) out.back().state = MailboxState::kOffline;
  }
  return out;
}

absl::StatusOr<uint64_t> PostProvider::recover(const MailAddress& address) {
  absl::StatusOr<MailReply> r = link_->call(MailRecover{address.canonical(), {}}, "recover");
  if (!r.ok()) return r.status();
  return r->count;
}

absl::StatusOr<std::map<std::string, uint64_t>> PostProvider::recover_all() {
  absl::StatusOr<MailReply> r = link_->call(MailRecover{"", {}}, "recover");
  if (!r.ok()) return r.status();
  std::map<std::string, uint64_t> out;
  for (const auto& [a, n] : r->counts) out[mem_to_post(a)] = n;
  return out;
}

absl::StatusOr<uint64_t> PostProvider::clear() {
  absl::StatusOr<MailReply> r = link_->call(MailAdmin{"clear", "", {}}, "clear");
  if (!r.ok()) return r.status();
  return r->count;
}

absl::StatusOr<std::vector<CopyInfo>> PostProvider::locate(std::string_view message_id) {
  absl::StatusOr<MailReply> r =
      link_->call(MailAdmin{"locate", std::string(message_id), {}}, "locate");
  if (!r.ok()) return r.status();
  std::vector<CopyInfo> out;
  for (const WireCopy& c : r->copies) {
    out.push_back(CopyInfo{key_of(c.key), c.message_id, static_cast<CopyState>(c.state)});
  }
  return out;
}

absl::StatusOr<bool> PostProvider::settle(const CopyKey& key, std::string_view disposition) {
  return PostSettler(link_).settle(key, disposition);
}

absl::StatusOr<MailAddress> PostProvider::dead_letter_topic(const MailAddress& address) {
  absl::StatusOr<MailReply> r =
      link_->call(MailAdmin{"dead-letter-topic", address.canonical(), {}}, "dead_letter_topic");
  if (!r.ok()) return r.status();
  return MailAddress::parse(mem_to_post(r->text));
}

absl::StatusOr<std::vector<Letter>> PostProvider::peek_parked(const MailAddress& address,
                                                              size_t limit) {
  absl::StatusOr<MailReply> r =
      link_->call(MailPeek{address.canonical(), limit, true, {}}, "peek_parked");
  if (!r.ok()) return r.status();
  return letters_of(*r);
}

absl::StatusOr<uint64_t> PostProvider::purge_parked(const MailAddress& address) {
  absl::StatusOr<MailReply> r =
      link_->call(MailAdmin{"purge-parked", address.canonical(), {}}, "purge_parked");
  if (!r.ok()) return r.status();
  return r->count;
}

absl::Status PostProvider::wait_idle(absl::Time deadline) {
  absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
  absl::StatusOr<MailReply> r =
      link_->call(MailAdmin{"wait-idle", absl::StrCat(absl::ToInt64Milliseconds(left)), {}},
                  "wait_idle", left + link_->timeout);
  return r.status();
}

namespace {

// What a MailboxHost answered to a MailCreate; on success the stored bounds equal the requested
// ones (M-BOX-1).
CreateResult created_from(const MailReply& r, const MailboxSpec& spec, bool is_public) {
  return CreateResult{
      .mailbox =
          MailboxInfo{.id = r.text,
                      .is_public = is_public,
                      .created_at = absl::FromUnixMillis(static_cast<int64_t>(r.count)),
                      .expires_at = r.lease_expires_ns ? absl::FromUnixNanos(*r.lease_expires_ns)
                                                       : absl::InfiniteFuture(),
                      .max_messages = spec.max_messages,
                      .max_message_bytes = spec.max_message_bytes,
                      .durable_all = spec.durable_all},
      .created = r.flag,
      .address = {}};
}

MailCreate create_message(std::string address, const MailboxSpec& spec, bool is_private) {
  MailCreate m;
  m.address = std::move(address);
  m.ttl_ms = absl::ToInt64Milliseconds(spec.ttl);
  m.max_messages = spec.max_messages;
  m.max_message_bytes = spec.max_message_bytes;
  m.durable_all = spec.durable_all;
  m.is_private = is_private;
  return m;
}

}  // namespace

absl::StatusOr<CreateResult> PostProvider::create_mailbox(const MailAddress& address,
                                                          const MailboxSpec& spec) {
  absl::StatusOr<MailReply> r =
      link_->call(create_message(address.canonical(), spec, false), "create_mailbox");
  if (!r.ok()) return r.status();
  CreateResult created = created_from(*r, spec, true);
  created.address = address.canonical();
  return created;
}

absl::StatusOr<CreateResult> PostProvider::create_private_mailbox(const MailboxSpec& spec) {
  absl::StatusOr<MailReply> r =
      link_->call(create_message("", spec, true), "create_private_mailbox");
  if (!r.ok()) return r.status();
  CreateResult created = created_from(*r, spec, false);
  created.address = absl::StrCat(sv(kScheme), "://", created.mailbox.id, "@private");
  return created;
}

absl::Status PostProvider::delete_mailbox(const MailAddress& address) {
  return link_->call(MailAdmin{"delete-mailbox", address.canonical(), {}}, "delete_mailbox")
      .status();
}

absl::StatusOr<std::vector<std::string>> PostProvider::list_public() {
  absl::StatusOr<MailReply> r = link_->call(MailAdmin{"list-public", "", {}}, "list_public");
  if (!r.ok()) return r.status();
  std::vector<std::string> out;
  for (const auto& [address, unused] : r->counts) out.push_back(mem_to_post(address));
  return out;
}

absl::StatusOr<bool> PostProvider::erase(const MailAddress& address, uint64_t seq) {
  absl::StatusOr<MailReply> r =
      link_->call(MailAdmin{"erase", absl::StrCat(seq, " ", address.canonical()), {}}, "erase");
  if (!r.ok()) return r.status();
  return r->flag;
}

}  // namespace postal::mail
