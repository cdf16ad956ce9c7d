// nats_ack_inbox.h — `AckInbox`: JetStream publishes that do not wait for their ack (internal).
//
// Each publish carries a reply subject `<inbox>.<n>` on one wildcard subscription; the server
// acks in publish order, and the subscription's one libnats thread runs each `done` with the
// stored sequence number (or the error the ack carries) in that order. At most `max_pending`
// publishes wait for their ack; one more waits for room up to the timeout. An ack that does not
// come within the timeout fails its publish with IoFailed (the server may still have stored it).
#pragma once

#include <nats/nats.h>

#include <cstdint>
#include <map>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "nats_link.h"

namespace postal::mail::nats {

class AckInbox {
 public:
  using Done = absl::AnyInvocable<void(absl::StatusOr<uint64_t>) &&>;
  AckInbox(const NatsLink& link, size_t max_pending);
  ~AckInbox();  // fails what still waits
  AckInbox(const AckInbox&) = delete;
  AckInbox& operator=(const AckInbox&) = delete;

  absl::Status start();
  // Publishes `body` to `subject`; `done` runs once with the ack's sequence number — on the
  // inbox's thread, or here when the publish could not be sent.
  void publish(const std::string& subject, std::string_view body, Done done);

 private:
  struct Pending {
    Done done;
    absl::Time deadline;
  };
  static void on_message(natsConnection*, natsSubscription*, natsMsg* msg, void* self);
  void answer(natsMsg* msg);
  void expire_overdue();

  const NatsLink& link_;
  const size_t max_pending_;
  std::string inbox_;
  natsSubscription* sub_ = nullptr;
  absl::Notification complete_;  // the subscription's last callback returned
  absl::Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
};

// The sequence number of a JetStream publish ack, or the error it carries.
absl::StatusOr<uint64_t> parse_pub_ack(const NatsLink& link, std::string_view reply);

}  // namespace postal::mail::nats
