// post_messages.h — the wire protocol between a `PostProvider` (post_provider.h) and the
// `MailboxHost` actor (mailbox_host.h) that serves `post:` mailboxes.
//
// Every core verb is one request message to the host, answered on its `reply_to` once port with
// a `MailReply` (runtime::request). Which fields of the reply are filled depends on the verb; a
// failed verb carries its status in `status` and nothing else. Every admin verb (mail_admin.h)
// is one `MailAdminCall`, answered with a `MailAdminReply`. Push deliveries run the other way:
// the host sends batches of them (`MailPush`) to the subscriber's port and the subscriber
// answers each batch with one `MailSettled` on the subscription's settlement port; a push that
// comes back undeliverable (the subscriber's proc is gone) counts as unhandled (M-ACK-4) and ends
// that subscription.
//
// Addresses on the wire are canonical `post://` addresses; the host maps them onto its mem
// provider (`mem://` with the same identity, M-ADDR-3) and back. Times are Unix nanoseconds in
// the host's clock. Statuses cross whole: code, message and payloads, so IsRetriable,
// IsInvalidMailboxAddress and friends answer the same on both sides.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "cereal/types/optional.hpp"
#include "cereal/types/string.hpp"
#include "cereal/types/utility.hpp"
#include "cereal/types/variant.hpp"
#include "cereal/types/vector.hpp"
#include "postal/mail/delivery.h"
#include "postal/mail/letter.h"
#include "postal/mail/mail_provider.h"
#include "postal/mail/mail_status.h"
#include "postal/runtime/port.h"

namespace postal::mail {

// An absl::Status on the wire.
struct WireStatus {
  int32_t code = 0;  // absl::StatusCode
  std::string message;
  std::vector<std::pair<std::string, std::string>> payloads;
  template <class A>
  void serialize(A& a) {
    a(code, message, payloads);
  }
  static WireStatus of(const absl::Status& status);
  absl::Status to_status() const;
};

struct WireLetter {
  std::string id, from, to;
  wire::Headers headers;
  uint64_t type_hash = 0;  // 0: no body
  std::string bytes;
  template <class A>
  void serialize(A& a) {
    a(id, from, to, headers, type_hash, bytes);
  }
  // Fails when the body cannot be serialized (an unregistered type).
  static absl::StatusOr<WireLetter> of(const Letter& letter);
  Letter to_letter() const;
};

struct WireKey {
  std::string address;
  std::string send_id;
  uint64_t lease_id = 0;
  template <class A>
  void serialize(A& a) {
    a(address, send_id, lease_id);
  }
};

struct WireMailboxStatus {
  std::string address;
  uint8_t state = 0;   // MailboxState
  int8_t exists = -1;  // -1: cannot tell, 0: false, 1: true
  uint64_t unread = 0, in_flight = 0;
  std::optional<int64_t> last_activity_ns;
  std::vector<std::pair<std::string, std::variant<bool, int64_t, double, std::string>>> extensions;
  template <class A>
  void serialize(A& a) {
    a(address, state, exists, unread, in_flight, last_activity_ns, extensions);
  }
  static WireMailboxStatus of(const MailboxStatus& s);
  MailboxStatus to_status() const;
};

// One post's outcome in a batch: its refusal, or its receipt (mail_provider.h PostReceipt).
struct WirePostReceipt {
  WireStatus status;
  std::string address, message_id, send_id;  // address: canonical, the host's scheme
  bool pushed = false;
  uint64_t deliveries = 0;
  template <class A>
  void serialize(A& a) {
    a(status, address, message_id, send_id, pushed, deliveries);
  }
  static WirePostReceipt of(const absl::StatusOr<PostReceipt>& receipt);
  // The caller's side: the address back in the post scheme.
  absl::StatusOr<PostReceipt> to_receipt() const;
};

// The reply of every core verb (the admin verbs': MailAdminReply).
struct MailReply {
  WireStatus status;
  std::vector<WireLetter> letters;          // fetch (a batch)
  std::optional<int64_t> lease_expires_ns;  // lease renew (unset: never)
  std::vector<WireMailboxStatus> statuses;  // status
  uint64_t count = 0;  // hello: capability bits
  bool flag = false;   // lease: took effect; unsubscribe: was active
  std::string text;    // subscribe: subscription id
  std::vector<WireKey> keys;           // fetch: letters[i]'s copy and lease
  std::vector<int64_t> expires_ns;     // fetch: letters[i]'s lease end, Unix ns; 0 = never
  std::vector<uint8_t> flags;          // settle_all: keys[i]'s settlement took effect
  std::vector<WirePostReceipt> receipts;  // post: letters[i]'s outcome
  template <class A>
  void serialize(A& a) {
    a(status, letters, lease_expires_ns, statuses, count, flag, text, keys, expires_ns, flags,
      receipts);
  }
};

// What an admin verb answered: its status, and on success its result (admin_wire.h).
struct MailAdminReply {
  WireStatus status;
  std::string result;
  template <class A>
  void serialize(A& a) {
    a(status, result);
  }
};

// The callbacks' results for pushed deliveries (M-ACK-4 is applied by the host from each status).
struct MailSettled {
  std::vector<uint64_t> delivery_ids;
  std::vector<WireStatus> results;  // results[i] is delivery_ids[i]'s
  template <class A>
  void serialize(A& a) {
    a(delivery_ids, results);
  }
};

// Pushes of one subscription, in delivery order (the host batches the deliveries that start
// while earlier batches are unsettled, mail/src/post/push_stream.h). Empty: the subscriber's local
// wake-up. The subscriber answers each with one MailSettled to `settle_to`.
struct MailPush {
  std::string subscription_id;
  std::vector<uint64_t> delivery_ids;  // minted by the host, per subscription
  std::vector<WireLetter> letters;     // letters[i] is delivery_ids[i]
  runtime::PortRef<MailSettled> settle_to;
  template <class A>
  void serialize(A& a) {
    a(subscription_id, delivery_ids, letters, settle_to);
  }
};

// ---- the verbs ----
struct MailHello {  // capabilities of the host's provider (count: bit i = Capability i)
  using Reply = MailReply;
  runtime::OncePortRef<MailReply> reply_to;
  template <class A>
  void serialize(A& a) {
    a(reply_to);
  }
};
// The most letters one MailPost may carry (more → the host refuses the batch).
inline constexpr size_t kMaxPostBatch = 1024;
// A batch of posts, applied in order (PostProvider batches them, mail/src/post/post_batcher.h):
// letters[i] to addresses[i], each answered in the reply's receipts[i] — refused alone or
// accepted.
struct MailPost {
  using Reply = MailReply;
  std::vector<std::string> addresses;
  std::vector<WireLetter> letters;
  runtime::OncePortRef<MailReply> reply_to;
  template <class A>
  void serialize(A& a) {
    a(addresses, letters, reply_to);
  }
};
struct MailFetch {  // fetch_batch (fetch is a batch of one) → letters, keys, expires_ns
  using Reply = MailReply;
  std::string address;
  bool manual = false;
  int64_t ack_timeout_ns = 0;  // manual only; 0 = never expires
  uint32_t max_messages = 1;
  uint64_t max_bytes = 0;   // 0 = no bound of the caller's (the host bounds a reply anyway)
  int64_t max_wait_ns = 0;  // the long poll; the host caps it (kMaxHostFetchWait)
  runtime::OncePortRef<MailReply> reply_to;
  template <class A>
  void serialize(A& a) {
    a(address, manual, ack_timeout_ns, max_messages, max_bytes, max_wait_ns, reply_to);
  }
};
struct MailSettleMany {  // settle_all(keys, disposition) → flags
  using Reply = MailReply;
  std::vector<WireKey> keys;
  std::string disposition;
  runtime::OncePortRef<MailReply> reply_to;
  template <class A>
  void serialize(A& a) {
    a(keys, disposition, reply_to);
  }
};
struct MailLease {  // renew(key) → flag, lease_expires_ns; or nack(key, delay) → flag
  using Reply = MailReply;
  WireKey key;
  bool renew = false;     // else a nack
  int64_t delay_ns = 0;   // nack: how long no fetch sees the copy
  runtime::OncePortRef<MailReply> reply_to;
  template <class A>
  void serialize(A& a) {
    a(key, renew, delay_ns, reply_to);
  }
};
struct MailStatusQuery {  // status(address) → statuses[0]
  using Reply = MailReply;
  std::string address;
  runtime::OncePortRef<MailReply> reply_to;
  template <class A>
  void serialize(A& a) {
    a(address, reply_to);
  }
};
struct MailSubscribe {
  using Reply = MailReply;
  std::string address;
  std::string label;
  runtime::PortRef<MailPush> subscriber;
  runtime::OncePortRef<MailReply> reply_to;
  uint8_t deliver = 0;  // DeliverPolicy: a retained mailbox's replay (M-KIND-3)
  // The subscription's own redelivery (M-RETRY-5): a retry policy when `retry`, and the settle
  // timeout when settle_timeout_ns >= 0 (0: no watchdog).
  bool retry = false;
  uint32_t max_attempts = 0;
  int64_t base_delay_ns = 0;
  int64_t max_delay_ns = 0;
  double factor = 2.0;
  double jitter = 0.0;
  int64_t settle_timeout_ns = -1;
  std::string queue_group{};  // a retained mailbox's queue group (M-RECV-4); empty: none
  template <class A>
  void serialize(A& a) {
    a(address, label, subscriber, reply_to, deliver, retry, max_attempts, base_delay_ns,
      max_delay_ns, factor, jitter, settle_timeout_ns, queue_group);
  }
};
struct MailUnsubscribe {  // answered once no callback of the subscription runs any more
  using Reply = MailReply;
  std::string subscription_id;
  runtime::OncePortRef<MailReply> reply_to;
  template <class A>
  void serialize(A& a) {
    a(subscription_id, reply_to);
  }
};
struct MailWaitIdle {  // wait_idle: answered once the host's deliveries are idle, or at the timeout
  using Reply = MailReply;
  int64_t timeout_ns = 0;
  runtime::OncePortRef<MailReply> reply_to;
  template <class A>
  void serialize(A& a) {
    a(timeout_ns, reply_to);
  }
};

// Every admin verb (mail_admin.h) is this one message: the verb's name and its fields, encoded
// by admin_wire (addresses as canonical post:// text). A request the host cannot decode — an
// unknown verb, malformed fields, an address that does not parse — is answered with an error
// status, and nothing runs.
struct MailAdminCall {
  using Reply = MailAdminReply;
  std::string verb;     // admin::<Verb>::kName
  std::string request;  // the verb's fields
  runtime::OncePortRef<MailAdminReply> reply_to;
  template <class A>
  void serialize(A& a) {
    a(verb, request, reply_to);
  }
};

// Address mapping between the post scheme (the caller's) and the mem scheme (the host's store).
std::string post_to_mem(const MailAddress& post_address);
std::string mem_to_post(std::string_view mem_canonical);

}  // namespace postal::mail

POSTAL_MESSAGE(postal::mail::MailReply, "postal.mail.Reply");
POSTAL_MESSAGE(postal::mail::MailSettled, "postal.mail.Settled");
POSTAL_MESSAGE(postal::mail::MailPush, "postal.mail.Push");
POSTAL_MESSAGE(postal::mail::MailHello, "postal.mail.Hello");
POSTAL_MESSAGE(postal::mail::MailPost, "postal.mail.Post");
POSTAL_MESSAGE(postal::mail::MailFetch, "postal.mail.Fetch");
POSTAL_MESSAGE(postal::mail::MailSettleMany, "postal.mail.SettleMany");
POSTAL_MESSAGE(postal::mail::MailLease, "postal.mail.Lease");
POSTAL_MESSAGE(postal::mail::MailStatusQuery, "postal.mail.StatusQuery");
POSTAL_MESSAGE(postal::mail::MailSubscribe, "postal.mail.Subscribe");
POSTAL_MESSAGE(postal::mail::MailUnsubscribe, "postal.mail.Unsubscribe");
POSTAL_MESSAGE(postal::mail::MailWaitIdle, "postal.mail.WaitIdle");
POSTAL_MESSAGE(postal::mail::MailAdminCall, "postal.mail.AdminCall");
POSTAL_MESSAGE(postal::mail::MailAdminReply, "postal.mail.AdminReply");
