// nats_queue.h — `QueueStream`: the nats provider's work-queue stream, a durable pull consumer
// per mailbox, and the JetStream calls the provider makes on them (internal; nats_provider.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "nats_ack_inbox.h"
#include "nats_link.h"
#include "postal/mail/letter.h"

namespace postal::mail::nats {

// One copy a pull handed out: the letter, and what settles it.
struct Pulled {
  Letter letter;
  std::string ack_subject;  // the message's reply subject: acks go there
  uint64_t stream_seq = 0;
  uint64_t deliveries = 0;  // the server's count, this hand-out included (mbx-round)
};

// What the server counts for one mailbox.
struct QueueCounts {
  uint64_t stored = 0;       // messages in the mailbox's subject
  uint64_t ack_pending = 0;  // handed out, not yet acked or termed (naked ones included)
  bool consumer = false;     // its consumer exists
};

// What an ack message says: handled, unhandled, discard/terminate, in progress.
enum class AckKind : uint8_t { kAck, kNak, kTerm, kProgress };

class QueueStream {
 public:
  struct Config {
    std::string prefix;  // P
    int replicas = 1;
    absl::Duration ack_wait;
    int64_t max_ack_pending = 0;
  };
  // `bulk`: a second connection of the same server without send-asap, for batches of acks.
  QueueStream(const NatsLink& link, const NatsLink& bulk, Config config);

  // Finds or creates the stream `<P>_QUEUE` (work queue, file storage).
  absl::Status ensure();

  // The mailbox's subject `<p>.queue.<hex of the address>`.
  std::string subject(const std::string& address) const;

  // Stores `letter` (system headers already minted); its stream sequence once acked.
  absl::StatusOr<uint64_t> publish(const std::string& address, const Letter& letter);
  // The same without waiting: `done` runs once with the sequence, on the ack inbox's thread (or
  // here when the letter cannot be sent). Up to 4,096 wait for their ack at once.
  using Published = absl::AnyInvocable<void(absl::StatusOr<uint64_t>) &&>;
  void publish_async(const std::string& address, const Letter& letter, Published done);

  // Up to `batch` copies of the mailbox, in the consumer's order. `wait` zero: what is there now;
  // otherwise the server holds the request up to `wait` for the first copy, and then it is all
  // that comes. A message that does not decode is termed and skipped (logged).
  absl::StatusOr<std::vector<Pulled>> pull(const std::string& address, size_t batch,
                                           absl::Duration wait);

  // Sends an ack of `kind` to `ack_subject` and waits for the server's confirmation; false when
  // the server did not confirm within the timeout.
  bool ack(const std::string& ack_subject, AckKind kind);
  // The same for many copies at once, one round trip: every ack is sent, and the server's
  // confirmation of the last confirms them all (they are processed in order). Element i:
  // whether subjects[i]'s was confirmed; empty subjects are skipped (false).
  std::vector<bool> ack_many(const std::vector<std::string>& ack_subjects, AckKind kind);

  absl::StatusOr<QueueCounts> counts(const std::string& address);
  // The address of every mailbox with messages or a consumer, sorted.
  absl::StatusOr<std::vector<std::string>> mailboxes();
  // Removes every message of the stream; how many.
  absl::StatusOr<uint64_t> purge();

 private:
  absl::Status ensure_consumer(const std::string& address);
  absl::StatusOr<std::string> encode(const Letter& letter) const;
  std::string consumer_name(const std::string& address) const;

  // The acks of a batch buffered on `bulk` and flushed once, confirmed by the last one's reply.
  std::vector<bool> ack_gathered(const std::vector<std::string>& ack_subjects, size_t last,
                                 AckKind kind);

  const NatsLink& link_;
  const NatsLink& bulk_;
  const Config config_;
  const std::string stream_;    // P_QUEUE
  const std::string subjects_;  // "p.queue."
  std::unique_ptr<AckInbox> inbox_;  // publish_async's acks; started by ensure()
  absl::Mutex mu_;
  absl::flat_hash_set<std::string> consumers_ ABSL_GUARDED_BY(mu_);  // ensured, by address
};

}  // namespace postal::mail::nats
