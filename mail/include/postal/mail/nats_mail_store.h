// nats_mail_store.h — `NatsMailStore`: a `MailStore` on NATS JetStream, shared by every process
// that reaches the cluster.
//
// Layout (prefix P, default "POSTAL"; p is P in lowercase):
//   stream  P_MAIL      file storage, subjects `p.mail.>`; one subject per lane:
//                       `p.mail.<hex id>.<c|u|n>` (critical, urgent, normal). Many mailboxes share
//                       this one stream by subject, so the store costs one stream (one Raft group
//                       in a cluster) however many mailboxes it holds. The store's sequence number
//                       is the stream's: it grows across the whole store and is never reused,
//                       also across restarts of the server.
//   KV      P_BOXES     one key per mailbox (its hex id): the MailboxInfo as JSON. Create is
//                       the bucket's atomic create, so of concurrent creates — in any process —
//                       exactly one reports `created` (M-BOX-2).
//   KV      P_MARKS     one key per mailbox that holds queue-group settlement marks (M-RECV-4),
//                       updated by compare-and-set on the key's revision.
// Mailbox ids are hex-encoded into subjects and keys, so any id of the contract (1–255 bytes, no
// NUL) is a valid NATS token.
//
// Where it differs from the SQLite store, on purpose (docs/decisions.md, "The NATS store"):
//   * Durability (M-PRIO-2). Every message is in the file stream, normal ones too: a second,
//     memory-backed stream for normal messages would give them a second sequence, and a replay
//     snapshot (RetainedMailboxes) compares sequence numbers across lanes. `volatile_normal()` is
//     false. An acknowledged message was written by the server (and, with `replicas = 3`, by a
//     quorum of the cluster) before the ack: the `os` tier, not fsynced per message.
//   * TTLs run on the store's clock (M-BOX-3); JetStream 2.9 has no per-message TTL, and a
//     stream's max age is not a mailbox's expiry, so neither is used.
//   * Bounds. `max_messages` is checked against the server's count under a lock of this store
//     object, so it holds exactly within one process; two processes appending to one bounded
//     mailbox at its limit may overshoot by one each. `max_mailboxes` likewise.
//   * `append_all` checks the whole batch first, then publishes it; a failure part-way deletes
//     what it published, so the batch is stored whole or not at all, but a reader may see part of
//     it meanwhile (JetStream 2.9 has no atomic batch).
//   * A mailbox record is cached for `record_cache_ttl` (every post looks its mailbox up, and a
//     round trip each would double its cost); a mailbox another process removed can still be
//     found, and take appends, in that window — messages kept under a removed id, read by
//     nobody. This store's own removals and every TTL are seen at once.
//   * An `append_async` whose ack does not arrive within `timeout` fails with IoFailed, though the
//     server may still have stored it.
//
// Errors: IoFailed names the server and what to do when the cluster cannot be reached or answers
// with an error; the contract's statuses otherwise. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/clock.h"
#include "postal/mail/mail_store.h"

namespace postal::mail {

struct NatsStoreOptions {
  // One or more servers, comma-separated: `nats://host:port[,nats://host2:port]`.
  std::string url = "nats://127.0.0.1:4222";
  // Names the streams and subjects: [A-Z0-9_], 1–32 characters. Stores with different prefixes
  // on one cluster are separate.
  std::string prefix = "POSTAL";
  std::string token = {};  // the server's authorization token, if it asks for one
  // TLS to the server: with a CA file, only a server certificate it signed (for the host dialed)
  // is accepted; a client certificate and key for servers that verify clients. Empty: plain TCP.
  std::string tls_ca_file = {};
  std::string tls_cert_file = {};
  std::string tls_key_file = {};
  int replicas = 1;        // of the stream and the buckets: 1, or 3 in a cluster
  // Each request to the server (an ack, a read, an admin call); also how long open() keeps trying
  // while JetStream starts up.
  absl::Duration timeout = absl::Seconds(5);
  absl::Duration record_cache_ttl = absl::Seconds(1);
  // append_async calls waiting for their ack at once; one more waits for room (up to `timeout`).
  size_t max_pending_appends = 4096;
  std::shared_ptr<Clock> clock = nullptr;  // null: a SystemClock
  StoreLimits limits = {};
};

class NatsMailStore {
 public:
  // Connects, then finds or creates the stream and buckets. IoFailed when no server answers or
  // JetStream is not enabled; InvalidArgument for a bad prefix or replica count.
  static absl::StatusOr<std::unique_ptr<MailStore>> open(NatsStoreOptions options);
};

}  // namespace postal::mail
