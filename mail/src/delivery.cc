#include "postal/mail/delivery.h"

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
                                      "it understands handled, discard and unhandled");
  }
  return settle(key, *core);
}

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

}  // namespace postal::mail
