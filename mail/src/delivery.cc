#include "postal/mail/delivery.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {

absl::StatusOr<bool> LeaseSettler::settle(const CopyKey& key, std::string_view disposition) {
  std::optional<Disposition> core = parse_disposition(disposition);
  if (!core.has_value()) {
    std::string scheme = key.address.substr(0, key.address.find(':'));
    return UnsupportedCapabilityError(scheme, absl::StrCat("disposition:", sv(disposition)),
                                      "it understands handled, discard, unhandled and terminate");
  }
  return settle(key, *core);
}

std::vector<bool> LeaseSettler::settle_all(std::span<const CopyKey> keys,
                                           Disposition disposition) {
  std::vector<bool> took;
  took.reserve(keys.size());
  for (const CopyKey& key : keys) took.push_back(settle(key, disposition));
  return took;
}

std::optional<std::optional<absl::Time>> LeaseSettler::renew(const CopyKey&) {
  return std::nullopt;
}

bool LeaseSettler::nack(const CopyKey&, absl::Duration) { return false; }

Delivery::Delivery(Letter letter, CopyKey key, std::optional<absl::Time> lease_expires_at,
                   std::shared_ptr<LeaseSettler> settler)
    : letter_(std::move(letter)),
      key_(std::move(key)),
      lease_expires_at_(lease_expires_at),
      settler_(std::move(settler)) {}

Delivery Delivery::settled(Letter letter, CopyKey key) {
  return Delivery(std::move(letter), std::move(key), std::nullopt, nullptr);
}

Delivery::Delivery(Delivery&& other) noexcept
    : letter_(std::move(other.letter_)),
      key_(std::move(other.key_)),
      lease_expires_at_(other.lease_expires_at_),
      settler_(std::move(other.settler_)) {
  other.settler_ = nullptr;
}

Delivery& Delivery::operator=(Delivery&& other) noexcept {
  if (this != &other) {
    if (settler_) settler_->settle(key_, Disposition::kUnhandled);
    letter_ = std::move(other.letter_);
    key_ = std::move(other.key_);
    lease_expires_at_ = other.lease_expires_at_;
    settler_ = std::move(other.settler_);
    other.settler_ = nullptr;
  }
  return *this;
}

Delivery::~Delivery() {
  // RAII: an unsettled lease goes back to the queue.
  if (settler_) settler_->settle(key_, Disposition::kUnhandled);
}

bool Delivery::ack(Disposition disposition) {
  if (!settler_) return false;
  std::shared_ptr<LeaseSettler> settler = std::move(settler_);
  settler_ = nullptr;
  return settler->settle(key_, disposition);
}

absl::StatusOr<bool> Delivery::ack(std::string_view disposition) {
  if (!settler_) return false;
  absl::StatusOr<bool> result = settler_->settle(key_, disposition);
  if (result.ok()) settler_ = nullptr;  // an undeclared name changes nothing, not even the handle
  return result;
}

bool Delivery::in_progress() {
  if (!settler_) return false;
  std::optional<std::optional<absl::Time>> renewed = settler_->renew(key_);
  if (!renewed.has_value()) return false;
  lease_expires_at_ = *renewed;
  return true;
}

bool Delivery::nack(absl::Duration delay) {
  if (!settler_) return false;
  std::shared_ptr<LeaseSettler> settler = std::move(settler_);
  settler_ = nullptr;
  return settler->nack(key_, std::max(delay, absl::ZeroDuration()));
}

std::vector<bool> ack_all(std::span<Delivery> batch, Disposition disposition) {
  std::vector<bool> took(batch.size(), false);
  // One call per settler, in the batch's order within it.
  std::vector<bool> done(batch.size(), false);
  for (size_t i = 0; i < batch.size(); ++i) {
    if (done[i] || batch[i].settled()) continue;
    std::shared_ptr<LeaseSettler> settler = batch[i].settler_;
    std::vector<size_t> members;
    std::vector<CopyKey> keys;
    for (size_t j = i; j < batch.size(); ++j) {
      if (done[j] || batch[j].settler_ != settler) continue;
      done[j] = true;
      members.push_back(j);
      keys.push_back(batch[j].key_);
      batch[j].settler_ = nullptr;
    }
    std::vector<bool> result = settler->settle_all(keys, disposition);
    for (size_t k = 0; k < members.size() && k < result.size(); ++k) took[members[k]] = result[k];
  }
  return took;
}

}  // namespace postal::mail
