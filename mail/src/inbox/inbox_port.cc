// Inbox events over actor ports: InboxPostReply, accept_event and postal.InboxPort
// (M-INBOX-1, M-INBOX-4).
#include "postal/mail/inbox_port.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "postal/actors/context.h"
#include "postal/mail/inbox_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

std::optional<std::string> text_param(const actors::SpawnParams& p, std::string_view name) {
  const wire::HeaderValue* v = p.find(name);
  if (v == nullptr) return std::nullopt;
  const auto* text = std::get_if<std::string>(v);
  if (text == nullptr) return std::string();  // present but not text: refused by the caller
  return *text;
}

}  // namespace

absl::Status InboxPostReply::to_status() const {
  if (code == 0) return absl::OkStatus();
  return named_inbox_error(static_cast<absl::StatusCode>(code), error_name, error);
}

InboxPostReply InboxPostReply::of(const absl::StatusOr<AcceptReceipt>& receipt) {
  InboxPostReply r;
  if (!receipt.ok()) {
    r.code = static_cast<int32_t>(receipt.status().code());
    r.error = std::string(receipt.status().message());
    r.error_name = inbox_error_name(receipt.status());
    return r;
  }
  r.duplicate = receipt->kind == AcceptReceipt::Kind::kDuplicate;
  r.record_id = receipt->id;
  r.status = std::string(to_string(receipt->status));
  return r;
}

InboxPortActor::InboxPortActor(std::unique_ptr<Inbox> inbox, InboxPortBinding binding)
    : inbox_(std::move(inbox)), binding_(std::move(binding)) {}
InboxPortActor::~InboxPortActor() = default;

absl::StatusOr<std::unique_ptr<InboxPortActor>> InboxPortActor::create(
    const actors::SpawnParams& p) {
  const std::optional<std::string> file = text_param(p, "file");
  const std::optional<std::string> consumer = text_param(p, "consumer");
  if (!file || file->empty() || !consumer || consumer->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        sv(kInboxPortType), " needs `file` (the inbox's SQLite file) and `consumer` (the consumer ",
        "its records are for), both strings"));
  }
  InboxOptions o;
  o.consumers = {*consumer};
  if (std::optional<std::string> d = text_param(p, "durability")) {
    if (*d != "os" && *d != "disk") {
      return absl::InvalidArgumentError("durability must be \"os\" or \"disk\"");
    }
    o.durability = *d == "disk" ? Durability::kDisk : Durability::kOs;
  }
  InboxPortBinding binding;  // (not designated-initialized: GCC 12 -O3 warns falsely)
  binding.source = std::string(kInboxPortDefaultSource);
  binding.consumer = *consumer;
  if (std::optional<std::string> t = text_param(p, "tenant")) {
    if (t->empty()) return absl::InvalidArgumentError("tenant must be a non-empty string");
    binding.scope = InboxScope::tenant(*t);
  }
  const std::optional<std::string> source = text_param(p, "source");
  if (source && source->empty()) {
    return absl::InvalidArgumentError("source must be a non-empty string");
  }
  if (source) binding.source = *source;
  absl::StatusOr<std::unique_ptr<Inbox>> inbox = Inbox::open(*file, std::move(o));
  if (!inbox.ok()) return inbox.status();
  return std::make_unique<InboxPortActor>(*std::move(inbox), std::move(binding));
}

absl::Status InboxPortActor::handle(actors::Context& cx, InboxPost m) {
  // The reply only after the commit (accept returns then): "accepted" means the inbox owns it.
  m.reply_to.send(cx, InboxPostReply::of(accept_event(*inbox_, binding_, m.event)));
  return absl::OkStatus();
}

}  // namespace postal::mail
