// Default implementations of MailProvider's optional operations: UnsupportedCapability.
#include "postal/mail/mail_provider.h"

#include "postal/mail/mail_errors.h"

namespace postal::mail {
namespace {

absl::Status unsupported(const MailProvider& p, Capability op) {
  return UnsupportedCapabilityError(p.scheme(), to_string(op), "");
}

}  // namespace

void MailProvider::post_async(const MailAddress& to, Letter letter, PostDone done) {
  std::move(done)(post(to, std::move(letter)));
}

absl::StatusOr<std::vector<Delivery>> MailProvider::fetch_batch(const MailAddress& address,
                                                               const FetchOptions& options) {
  if (options.max_wait > absl::ZeroDuration()) {
    return UnsupportedCapabilityError(scheme(), "fetch max_wait",
                                      "fetch with max_wait 0 and poll, or use a subscription");
  }
  std::vector<Delivery> out;
  size_t bytes = 0;
  while (out.size() < options.max_messages) {
    absl::StatusOr<std::optional<Delivery>> d = fetch(address, options);
    if (!d.ok()) {
      if (out.empty()) return d.status();
      break;  // what was taken is handed out; the error shows on the next fetch
    }
    if (!d->has_value()) break;
    if (options.max_bytes > 0) bytes += (*d)->letter().body.byte_size();
    out.push_back(**std::move(d));
    if (options.max_bytes > 0 && bytes >= options.max_bytes) break;
  }
  return out;
}

void MailProvider::fetch_batch_async(const MailAddress& address, const FetchOptions& options,
                                     FetchDone done) {
  std::move(done)(fetch_batch(address, options));
}

absl::StatusOr<std::vector<Letter>> MailProvider::peek(const MailAddress&, size_t) {
  return unsupported(*this, Capability::kPeek);
}
absl::StatusOr<std::vector<MailboxStatus>> MailProvider::list_status() {
  return unsupported(*this, Capability::kEnumerate);
}
absl::StatusOr<uint64_t> MailProvider::recover(const MailAddress&) {
  return unsupported(*this, Capability::kRecover);
}
absl::StatusOr<std::map<std::string, uint64_t>> MailProvider::recover_all() {
  return unsupported(*this, Capability::kRecover);
}
absl::StatusOr<uint64_t> MailProvider::clear() { return unsupported(*this, Capability::kClear); }
absl::StatusOr<std::vector<CopyInfo>> MailProvider::locate(std::string_view) {
  return unsupported(*this, Capability::kLocate);
}
absl::StatusOr<bool> MailProvider::settle(const CopyKey&, std::string_view) {
  return unsupported(*this, Capability::kSettleByKey);
}
absl::StatusOr<MailAddress> MailProvider::dead_letter_topic(const MailAddress&) {
  return unsupported(*this, Capability::kDeadLetter);
}
absl::StatusOr<std::vector<Letter>> MailProvider::peek_parked(const MailAddress&, size_t) {
  return unsupported(*this, Capability::kParked);
}
absl::StatusOr<uint64_t> MailProvider::purge_parked(const MailAddress&) {
  return unsupported(*this, Capability::kParked);
}
absl::Status MailProvider::wait_idle(absl::Time) {
  return unsupported(*this, Capability::kWaitIdle);
}
absl::StatusOr<CreateResult> MailProvider::create_mailbox(const MailAddress&, const MailboxSpec&) {
  return unsupported(*this, Capability::kRetained);
}

absl::StatusOr<CreateResult> MailProvider::create_private_mailbox(const MailboxSpec&) {
  return unsupported(*this, Capability::kRetained);
}
absl::Status MailProvider::delete_mailbox(const MailAddress&) {
  return unsupported(*this, Capability::kRetained);
}
absl::StatusOr<std::vector<std::string>> MailProvider::list_public() {
  return unsupported(*this, Capability::kRetained);
}
absl::StatusOr<bool> MailProvider::erase(const MailAddress&, uint64_t) {
  return unsupported(*this, Capability::kRetained);
}

}  // namespace postal::mail
