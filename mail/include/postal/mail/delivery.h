// delivery.h — `Delivery`, one fetched copy and its lease handle (M-ACK-1, M-ACK-2, M-ACK-5).
//
// `PostOffice::fetch` returns a Delivery. With `AckMode::kAuto` it is already settled
// (`handled`): read the letter, nothing else to do. With `AckMode::kManual` it holds a lease,
// fixed at hand-out, and the consumer settles it once:
//
//   absl::StatusOr<std::optional<Delivery>> d = office.fetch(addr, {.ack = AckMode::kManual});
//   if (d.ok() && d->has_value()) {
//     process((*d)->letter());
//     (*d)->ack(Disposition::kHandled);   // true: it took effect
//   }
//
// One handle, one settlement: `ack` returns true when the settlement took effect and false when
// it did not — a second settlement, a settlement after the lease expired or was reclaimed, after
// `clear()`, or of a copy that is gone — and then nothing changed. Settlement is keyed by the
// copy (`CopyKey`: `mbx-send-id` plus the lease id), never by the sender-chosen message id, so a
// stale handle can never close a newer lease of the same copy.
//
// RAII: destroying a Delivery whose lease is still unsettled settles it `kUnhandled` (the copy
// goes back to the queue at once instead of waiting out its lease). `detach()` opts out: the
// lease then runs its course, and whoever holds the key (see `PostOffice::locate`) may still
// settle it with `PostOffice::settle`.
//
// Lease control (JetStream's in-progress, nak-with-delay and term): `in_progress()` starts the
// lease over — it now ends one full lease timeout from now — while the consumer keeps working;
// `nack(delay)` settles the copy back to the mailbox, where no fetch sees it before `delay` has
// passed (M-ACK-6); `terminate()` removes it for good without a dead letter. Batches settle in
// one call: `ack_all(deliveries)` (one lock in mem, one round trip over post).
//
// A Delivery is move-only and not thread-safe; the letter is the consumer's own copy.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/disposition.h"
#include "postal/mail/letter.h"

namespace postal::mail {

// Which copy, under which lease. `lease_id` 0 means "no lease" (a queued, parked or auto-acked
// copy); such a key never settles anything.
struct CopyKey {
  std::string address;  // canonical mail address of the mailbox holding the copy
  std::string send_id;  // mbx-send-id
  uint64_t lease_id = 0;
  bool operator==(const CopyKey&) const = default;
};

// Implemented by providers: settles leases by key. Shared by every Delivery the provider handed
// out, so it outlives the provider object if a Delivery does.
class LeaseSettler {
 public:
  virtual ~LeaseSettler() = default;
  // True when the settlement took effect; false (and nothing changed) otherwise.
  virtual bool settle(const CopyKey& key, Disposition disposition) = 0;
  // A disposition by name: the core three, or one the provider declares. An undeclared name
  // fails with UnsupportedCapability before anything changes. The default knows the core three.
  virtual absl::StatusOr<bool> settle(const CopyKey& key, std::string_view disposition);
  // Settles every key with `disposition`; element i tells whether keys[i]'s took effect. The
  // default settles them one by one; providers override it to settle a batch at once.
  virtual std::vector<bool> settle_all(std::span<const CopyKey> keys, Disposition disposition);
  // Starts the lease of `key` over: it now ends one full lease timeout from now. nullopt when it
  // did not take effect (settled, expired, reclaimed, unknown); otherwise the new end (an inner
  // nullopt: the lease never expires). The default cannot: nullopt.
  virtual std::optional<std::optional<absl::Time>> renew(const CopyKey& key);
  // Settles `key` unhandled, but the copy waits `delay` before any fetch sees it. True when it
  // took effect. The default (no delayed redelivery) does not take effect: false.
  virtual bool nack(const CopyKey& key, absl::Duration delay);
};

class Delivery {
 public:
  // A live lease (AckMode::kManual). `lease_expires_at` is nullopt for a lease that never expires.
  Delivery(Letter letter, CopyKey key, std::optional<absl::Time> lease_expires_at,
           std::shared_ptr<LeaseSettler> settler);
  // An already settled copy (AckMode::kAuto).
  static Delivery settled(Letter letter, CopyKey key);

  Delivery(Delivery&& other) noexcept;
  Delivery& operator=(Delivery&& other) noexcept;
  Delivery(const Delivery&) = delete;
  Delivery& operator=(const Delivery&) = delete;
  ~Delivery();

  const Letter& letter() const { return letter_; }
  const CopyKey& key() const { return key_; }
  std::optional<absl::Time> lease_expires_at() const { return lease_expires_at_; }
  // Whether this handle has nothing left to settle (settled, detached, or auto-acked).
  bool settled() const { return settler_ == nullptr; }

  // Settles the copy; see the contract above. `ack()` is `ack(Disposition::kHandled)`.
  bool ack(Disposition disposition = Disposition::kHandled);
  // Settles with a disposition by name (core or provider-declared).
  absl::StatusOr<bool> ack(std::string_view disposition);
  // Gives up this handle's right to settle; the lease runs its course.
  void detach() { settler_ = nullptr; }

  // Lease control (see above). `in_progress` keeps the handle unsettled and updates
  // `lease_expires_at()`; it, `nack` and `terminate` return whether they took effect.
  bool in_progress();
  bool nack(absl::Duration delay);
  bool terminate() { return ack(Disposition::kTerminate); }

 private:
  friend std::vector<bool> ack_all(std::span<Delivery>, Disposition);
  Letter letter_;
  CopyKey key_;
  std::optional<absl::Time> lease_expires_at_;
  std::shared_ptr<LeaseSettler> settler_;  // null once settled / detached
};

// Settles every unsettled handle of `batch` with `disposition`, a batch per provider (one call
// each); handles already settled are skipped and count as not taking effect. Element i tells
// whether batch[i]'s settlement took effect. Every handle is settled (or skipped) afterwards.
std::vector<bool> ack_all(std::span<Delivery> batch,
                          Disposition disposition = Disposition::kHandled);

}  // namespace postal::mail
