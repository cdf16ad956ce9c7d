// MailProvider's default implementations: post_async and the batch fetches through the one-by-one
// verbs; wait_idle unsupported.
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

absl::StatusOr<std::optional<Delivery>> MailProvider::fetch_one(const MailAddress& address,
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

void MailProvider::fetch_batch_async(const MailAddress& address, const FetchOptions& options,
                                     FetchDone done) {
  std::move(done)(fetch_batch(address, options));
}

absl::Status MailProvider::wait_idle(absl::Time) {
  return unsupported(*this, Capability::kWaitIdle);
}

}  // namespace postal::mail
