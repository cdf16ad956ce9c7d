// The mem provider's retained mailboxes (kRetained, M-KIND-2): when MemOptions::retained is set,
// an address that names a created retained mailbox is served by RetainedMailboxes — posts are
// stored (priority from the `priority` header) and subscriptions replay then continue live —
// while every other address stays a queue mailbox (M-KIND-1).
#include <utility>

#include "absl/strings/str_cat.h"
#include "mem_state.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/mem_provider.h"
#include "postal/mail/post_messages.h"
#include "postal/mail/system_headers.h"
#include "postal/runtime/logger.h"
#include "postal/wire/absl_compat.h"
#include "postal/wire/codec.h"

namespace postal::mail {
namespace {

// The store's name for an address: its canonical form without `scheme://` (`user@host/path`).
// A private mailbox (M-BOX-4) is `<scheme>://<drawn id>@private`: its store name is the id.
constexpr std::string_view kPrivateHost = "private";

bool is_private_address(const MailAddress& address) {
  return address.host() == kPrivateHost && address.path().empty();
}


class RetainedControl final : public SubscriptionControl {
 public:
  explicit RetainedControl(RetainedSubscription sub) : sub_(std::move(sub)) {}
  void unsubscribe() override {
    sub_.unsubscribe();
    active_ = false;
  }
  bool active() const override { return active_; }

 private:
  RetainedSubscription sub_;
  std::atomic<bool> active_{true};
};

}  // namespace

std::string MemProvider::store_name(const MailAddress& address) {
  if (is_private_address(address)) return address.user();
  const std::string& canonical = address.canonical();
  return canonical.substr(canonical.find("://") + 3);
}

std::optional<std::string> MemProvider::retained_name(const MailAddress& address) const {
  if (options_.retained == nullptr) return std::nullopt;
  std::string name = store_name(address);
  if (!options_.retained->mailbox(name).ok()) return std::nullopt;
  return name;
}

absl::Status MemProvider::check_running(std::string_view verb, const MailAddress& address) const {
  mem_internal::BusLock lock(*core_->bus);
  if (core_->running) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      sv(verb), " ", address.canonical(), ": the mem provider is stopped; start() it first"));
}

namespace {

// A letter for a retained mailbox, ready for the store: its priority, its bytes, and the receipt
// the post returns once they are stored.
struct RetainedPost {
  Priority priority;
  std::string bytes;
  PostReceipt receipt;
};

absl::StatusOr<RetainedPost> prepare_retained(const MailAddress& to, Letter letter,
                                              absl::Time now) {
  const std::string priority_text = letter.headers.get(kPriority).value_or("normal");
  const std::optional<Priority> priority = parse_priority(priority_text);
  if (!priority.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "post ", to.canonical(), ": priority '", priority_text,
        "' is not one of critical, urgent, normal; set the `priority` header to one of them"));
  }
  Letter stamped = mem_internal::stamp_for_send(std::move(letter), to, now);
  absl::StatusOr<WireLetter> wire_letter = WireLetter::of(stamped);
  if (!wire_letter.ok()) return wire_letter.status();
  absl::StatusOr<std::string> bytes = wire::encode(*wire_letter, "a retained letter");
  if (!bytes.ok()) return bytes.status();
  return RetainedPost{*priority, *std::move(bytes),
                      PostReceipt{.address = to.canonical(),
                                  .message_id = stamped.id,
                                  .send_id = stamped.headers.get(kSendId).value_or(""),
                                  .path = PostPath::kQueued,  // stored; pushed to live subs too
                                  .deliveries = 0}};
}

}  // namespace

absl::StatusOr<PostReceipt> MemProvider::post_retained(const std::string& name,
                                                       const MailAddress& to, Letter letter) {
  if (absl::Status s = check_running("post", to); !s.ok()) return s;
  absl::StatusOr<RetainedPost> p =
      prepare_retained(to, std::move(letter), core_->bus->clock->now());
  if (!p.ok()) return p.status();
  absl::StatusOr<uint64_t> seq = options_.retained->publish(name, p->priority, std::move(p->bytes));
  if (!seq.ok()) return seq.status();
  return std::move(p->receipt);
}

void MemProvider::post_retained_async(const std::string& name, const MailAddress& to, Letter letter,
                                      PostDone done, RetainedMailboxes::PublishAsync how) {
  if (absl::Status s = check_running("post", to); !s.ok()) return std::move(done)(s);
  absl::StatusOr<RetainedPost> p =
      prepare_retained(to, std::move(letter), core_->bus->clock->now());
  if (!p.ok()) return std::move(done)(p.status());
  options_.retained->publish_async(name, p->priority, std::move(p->bytes),
                                   [receipt = std::move(p->receipt),
                                    done = std::move(done)](absl::StatusOr<uint64_t> seq) mutable {
                                     if (!seq.ok()) return std::move(done)(seq.status());
                                     std::move(done)(std::move(receipt));
                                   },
                                   how);
}

void MemProvider::post_async(const MailAddress& to, Letter letter, PostDone done) {
  post_async(to, std::move(letter), std::move(done), {});
}

void MemProvider::post_async(const MailAddress& to, Letter letter, PostDone done,
                             RetainedMailboxes::PublishAsync how) {
  if (std::optional<std::string> name = retained_name(to)) {
    return post_retained_async(*name, to, std::move(letter), std::move(done), how);
  }
  std::move(done)(post(to, std::move(letter)));
}

absl::Status MemProvider::no_queue_groups(const MailAddress& address,
                                          const SubscribeOptions& options) {
  if (options.queue_group.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "subscribe ", address.canonical(), ": queue group '", options.queue_group,
      "' on a queue mailbox; queue groups exist on retained mailboxes only (create_mailbox "
      "first), a queue mailbox gives every subscriber every letter (M-KIND-1)"));
}

absl::StatusOr<Subscription> MemProvider::subscribe_retained(const std::string& name,
                                                             const MailAddress& address,
                                                             MailHandler handler,
                                                             const SubscribeOptions& options) {
  if (absl::Status s = check_running("subscribe", address); !s.ok()) return s;
  auto shared = std::make_shared<MailHandler>(std::move(handler));
  absl::StatusOr<RetainedSubscription> sub = options_.retained->subscribe(
      name, [shared, to = address.canonical()](const RetainedMessage& m) {
        absl::StatusOr<WireLetter> wire_letter =
            wire::decode<WireLetter>(m.body, "a retained letter");
        if (!wire_letter.ok()) {
          runtime::Logger::mail().warn(
              absl::StrCat("retained mailbox ", to, ": message ", m.seq,
                           " cannot be read: ", wire_letter.status().ToString()));
          return Disposition::kDiscard;  // a group will not be handed it again
        }
        Letter letter = wire_letter->to_letter();
        letter.headers.set(kRetainedSeq, m.seq);
        // Retained: the store keeps the message whatever the handler says (erase removes it);
        // in a queue group the result settles it for the group (M-ACK-4 → M-RECV-4).
        const absl::Status result = (*shared)(letter);
        if (result.ok()) return Disposition::kHandled;
        return IsRetriable(result) ? Disposition::kUnhandled : Disposition::kDiscard;
      },
      RetainedSubscribeOptions{.queue_group = options.queue_group, .deliver = options.deliver});
  if (!sub.ok()) return sub.status();
  return Subscription(mint_send_id(), address.canonical(),
                      std::make_unique<RetainedControl>(*std::move(sub)));
}

absl::Status MemProvider::no_store() {
  return UnsupportedCapabilityError(kScheme, to_string(Capability::kRetained),
                                    "create the provider with MemOptions.retained set");
}

absl::StatusOr<CreateResult> MemProvider::create_mailbox(const MailAddress& address,
                                                         const MailboxSpec& spec) {
  if (options_.retained == nullptr) return no_store();
  if (!spec.is_public) {
    return absl::InvalidArgumentError(absl::StrCat(
        "create_mailbox ", address.canonical(),
        ": a mailbox created by address is public (its address is its name); create a private "
        "one with create_private_mailbox, which returns its address"));
  }
  if (is_private_address(address)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "create_mailbox ", address.canonical(), ": the host '", sv(kPrivateHost),
        "' is reserved for private mailboxes, whose ids the store draws "
        "(create_private_mailbox)"));
  }
  MailboxSpec named = spec;
  named.name = store_name(address);
  absl::StatusOr<CreateResult> r = options_.retained->create_mailbox(named);
  if (r.ok()) r->address = address.canonical();
  return r;
}

absl::StatusOr<CreateResult> MemProvider::create_private_mailbox(const MailboxSpec& spec) {
  if (options_.retained == nullptr) return no_store();
  MailboxSpec drawn = spec;
  drawn.name.clear();
  drawn.is_public = false;
  absl::StatusOr<CreateResult> r = options_.retained->create_mailbox(drawn);
  if (r.ok()) r->address = absl::StrCat(sv(kScheme), "://", r->mailbox.id, "@", sv(kPrivateHost));
  return r;
}

absl::Status MemProvider::delete_mailbox(const MailAddress& address) {
  if (options_.retained == nullptr) return no_store();
  return options_.retained->remove(store_name(address));
}

absl::StatusOr<std::vector<std::string>> MemProvider::list_public() {
  if (options_.retained == nullptr) return no_store();
  absl::StatusOr<std::vector<MailboxInfo>> listed = options_.retained->list_public();
  if (!listed.ok()) return listed.status();
  std::vector<std::string> out;
  for (const MailboxInfo& m : *listed) out.push_back(absl::StrCat(sv(kScheme), "://", m.id));
  return out;
}

absl::StatusOr<bool> MemProvider::erase(const MailAddress& address, uint64_t seq) {
  if (options_.retained == nullptr) return no_store();
  return options_.retained->erase(store_name(address), seq);
}

}  // namespace postal::mail
