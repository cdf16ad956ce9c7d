// nats_held.h — `HeldCopies`: the copies this process holds from JetStream under a lease or a
// nak delay, and how they settle (internal; nats_provider.h).
//
// A manual fetch holds the copy: the lease runs on the provider's clock, the server sees the copy
// ack-pending and is told it is in progress every `keep_every` (well within its ack wait), so it
// never redelivers a copy a live process holds. Settlement sends the ack and waits for the
// server's confirmation. An expired lease changes nothing until it is reclaimed (nak: the server
// hands the copy out again before newer ones); so does a copy nacked with a delay once the delay
// has passed. Copies this process returned are remembered until it sees them handed out again,
// so status can count them as unread rather than the server's ack-pending.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "nats_queue.h"
#include "postal/mail/clock.h"
#include "postal/mail/delivery.h"

namespace postal::mail::nats {

// A running provider's connection: shared by the provider and every settlement in flight, so a
// settlement racing stop() never touches a closed connection.
struct QueueConn {
  std::unique_ptr<NatsLink> link;
  std::unique_ptr<NatsLink> bulk;  // batches of acks (no send-asap)
  std::unique_ptr<QueueStream> queue;
};

class HeldCopies final : public LeaseSettler {
 public:
  HeldCopies(std::shared_ptr<Clock> clock, absl::Duration keep_every);
  ~HeldCopies() override;  // stops the keeper; returns nothing (detach() first)

  // While running: the connection settlements go through. `detach` returns (naks) every held
  // copy and forgets the connection.
  void attach(std::shared_ptr<QueueConn> conn);
  void detach();
  // Forgets every held and returned copy without settling it (after a purge removed them).
  void forget_all();

  // Holds `p` under a lease of `timeout` (zero or infinite: never expires); its lease id.
  uint64_t hold(const std::string& address, const Pulled& p, absl::Duration timeout,
                std::optional<absl::Time>* expires_at);
  // `seq` of `address` was handed out here: no longer counted as returned.
  void handed_out(const std::string& address, uint64_t seq);
  // Returns the due delayed copies and, with `leases`, the expired leases of `address` (of every
  // mailbox when null); how many expired leases went back, per address.
  std::map<std::string, uint64_t> reclaim(const std::string* address, bool leases);
  // What this process knows of `address` beyond the server's counts.
  struct Counts {
    uint64_t returned = 0;    // returned here, not seen handed out again
    uint64_t delayed = 0;     // held until a nak delay has passed
    uint64_t terminated = 0;  // settled discard or terminate here
  };
  // `ack_pending` is the server's count: fewer than this process remembers returning means
  // others took some of them meanwhile, and the remembered ones are forgotten.
  Counts counts(const std::string& address, uint64_t ack_pending);

  bool settle(const CopyKey& key, Disposition disposition) override;
  // One round trip for the batch (ack_many).
  std::vector<bool> settle_all(std::span<const CopyKey> keys, Disposition disposition) override;
  std::optional<std::optional<absl::Time>> renew(const CopyKey& key) override;
  bool nack(const CopyKey& key, absl::Duration delay) override;

 private:
  struct Held {
    std::string address;
    std::string ack_subject;
    uint64_t seq = 0;
    absl::Duration timeout;
    std::optional<absl::Time> expires;  // the lease's end on the clock; none: never
    std::optional<absl::Time> due;      // set: nacked, goes back at this time
  };
  // The held copy of a live lease for `key` (not expired, not delayed); null otherwise.
  Held* live(const CopyKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<absl::Time> lease_end(absl::Duration timeout) const;
  void keep_in_progress();

  // Mailboxes with remembered returns or terminations: past it, the first in the map is dropped.
  static constexpr size_t kMaxRemembered = 65536;
  void remember_return(const std::string& address, uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<Clock> clock_;
  const absl::Duration keep_every_;
  absl::Mutex mu_;
  std::shared_ptr<QueueConn> conn_ ABSL_GUARDED_BY(mu_);
  uint64_t next_lease_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Held> held_ ABSL_GUARDED_BY(mu_);  // by lease id
  absl::flat_hash_map<std::string, absl::flat_hash_set<uint64_t>> returned_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> terminated_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread keeper_;
};

}  // namespace postal::mail::nats
