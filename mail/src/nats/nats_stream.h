// nats_stream.h — `MailStream`: the NATS store's one JetStream stream of messages, one subject
// per lane (`p.mail.<hex id>.<c|u|n>`; nats_mail_store.h), and what the store does with it
// (internal).
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nats_link.h"
#include "postal/mail/mail_store.h"

namespace postal::mail::nats {

class MailStream {
 public:
  MailStream(const NatsLink& link, const std::string& prefix, int replicas);

  // Finds or creates the stream; notes its last sequence number.
  absl::Status ensure();

  // `p.mail.<hex id>.`: every lane of a mailbox starts with it.
  std::string mailbox_prefix(std::string_view id) const;
  std::string lane_subject(std::string_view id, Priority priority) const;

  // BudgetExhausted, saying what to do, for a body over the server's max_payload.
  absl::Status fits_payload(size_t bytes) const;
  // Stores `body` under `subject`; its sequence number once the server acked it.
  absl::StatusOr<uint64_t> publish(const std::string& subject, std::string_view body);
  // The first message at or after `seq` whose subject starts with `prefix` (a lane's subject, or
  // a mailbox's prefix for any lane); nullopt when there is none.
  absl::StatusOr<std::optional<StoredMessage>> get(uint64_t seq, const std::string& prefix);
  // Erases message `seq` for good (a secure erase: a plain delete came back after a kill -9 of
  // nats-server 2.9); false when there was none (someone removed it first).
  bool erase(uint64_t seq);
  // Messages of mailbox `id`, from the stream's per-subject counts.
  absl::StatusOr<uint64_t> count(std::string_view id);
  // Removes the messages of `filter` up to `through`; how many.
  absl::StatusOr<uint64_t> purge(const std::string& filter,
                                 uint64_t through = std::numeric_limits<uint64_t>::max());
  // nats-server 2.9 forgets a stream's last sequence number when a purge emptied the stream's
  // tail and the server is killed before it wrote its index: it would then hand numbers out
  // again. A marker message at the tail keeps the number (older markers are purged, so there
  // is one). Run after a purge that may have removed the stream's last message.
  absl::Status keep_high_water();

  // The highest sequence number seen; `saw` raises it.
  uint64_t last_seq() const { return last_seq_.load(std::memory_order_acquire); }
  void saw(uint64_t seq);

 private:
  std::string api(std::string_view verb) const;

  const NatsLink& link_;
  const std::string name_;      // P_MAIL
  const std::string subjects_;  // "p.mail."
  const int replicas_;
  std::atomic<uint64_t> last_seq_{0};
};

}  // namespace postal::mail::nats
