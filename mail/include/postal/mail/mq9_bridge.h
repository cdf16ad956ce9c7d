// mq9_bridge.h — `Mq9Bridge`: postal's retained mailboxes served to any NATS client through the
// mq9 v1 subject protocol (seed 002; docs/mq9.md).
//
// The bridge speaks the NATS client protocol itself (INFO, CONNECT, PUB, HPUB, SUB, UNSUB, MSG,
// HMSG, PING, PONG, +OK, -ERR) on a TCP listener, so a stock client (libnats, `nats` CLI) connects
// to it as to a nats-server. It has to: in mq9 a plain SUB replays the mailbox's stored messages
// to exactly the new subscriber, and a nats-server tells no client when another one subscribes
// (docs/decisions.md, "mq9 is served, not bridged").
//
//   PUB $mq9.AI.MAILBOX.CREATE {json}            → reply {"mail_id",...} (idempotent, M-BOX-1)
//   PUB $mq9.AI.MAILBOX.MSG.{id}[.critical|.urgent] body → stored, then pushed (M-KIND-2);
//                                                  with a reply subject: {"msg_id": N} once stored
//   SUB $mq9.AI.MAILBOX.MSG.{id}[.*] [queue] sid  → every stored message, critical, urgent,
//                                                  normal, FIFO within each, then live ones
//   PUB $mq9.AI.MAILBOX.DELETE.{id}.{msg_id}      → erased, never replayed again (M-RECV-5)
//   PUB $mq9.AI.PUBLIC.LIST (with reply)          → {"mailboxes": [...]}; SUB: its events
//
// Every pushed message carries its msg_id twice: in the reply subject
// (`$mq9.AI.MAILBOX.DELETE.{id}.{msg_id}`, so answering a message deletes it) and, for clients
// that announced `headers`, in an `Mq9-Msg-Id` header beside `Mq9-Priority`. Subjects outside
// `$mq9.` are routed between the bridge's clients as by a single nats-server (that is how
// replies reach a client's `_INBOX`), with no storage.
//
// Bounds (hostile input): connections (`max_connections`, one more is refused with -ERR),
// subscriptions per connection, the control line and payload sizes (-ERR and close, as
// nats-server does), bytes waiting to be written to one client (`max_pending_bytes`: a client
// that does not read is cut off as a slow consumer, never slowing the others), CONNECT within
// `connect_timeout`, and PINGs a client leaves unanswered. With `auth_token` set, a client must
// present it in CONNECT before anything else is read.
//
// Threads: one I/O thread runs every socket; mq9 verbs run on a small pool, one strand per
// connection (in the connection's order), so a slow store call never holds up socket I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace postal::mail {

class RetainedMailboxes;

struct Mq9BridgeOptions {
  std::shared_ptr<RetainedMailboxes> mailboxes{};  // required
  std::string host = "127.0.0.1";
  uint16_t port = 0;        // 0: a free port (see `port()`)
  std::string auth_token{};  // empty: no authentication (mq9's own model: unguessable ids)
  size_t max_connections = 1024;
  size_t max_subscriptions = 1024;  // per connection
  size_t max_control_line = 4096;
  size_t max_payload = 1 << 20;
  size_t max_pending_bytes = 64 << 20;  // per connection, waiting to be written
  absl::Duration connect_timeout = absl::Seconds(2);
  absl::Duration ping_interval = absl::Minutes(2);
  int max_pings_out = 2;
  // A CREATE that names no ttl gets this one (mq9's only lifecycle is the TTL; zero: never).
  absl::Duration default_ttl = absl::Hours(1);
  size_t verb_threads = 2;
};

struct Mq9BridgeStats {
  uint64_t connections = 0;       // open now
  uint64_t accepted = 0;          // since start
  uint64_t refused = 0;           // over max_connections, or failed authentication
  uint64_t protocol_errors = 0;   // connections closed for malformed input
  uint64_t slow_consumers = 0;    // connections closed over max_pending_bytes
  uint64_t published = 0;         // messages stored through MSG subjects
  uint64_t publish_failures = 0;  // MSG publishes refused (reported to a reply subject if any)
  uint64_t pushed = 0;            // mailbox messages written to subscribers
};

class Mq9Bridge {
 public:
  // Listens on host:port and serves until destroyed.
  static absl::StatusOr<std::unique_ptr<Mq9Bridge>> start(Mq9BridgeOptions options);
  ~Mq9Bridge();  // closes every connection and waits for the threads
  Mq9Bridge(const Mq9Bridge&) = delete;
  Mq9Bridge& operator=(const Mq9Bridge&) = delete;

  uint16_t port() const;
  std::string url() const;  // nats://host:port
  Mq9BridgeStats stats() const;

  struct Core;

 private:
  explicit Mq9Bridge(std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace postal::mail
