// nats_conn.h — `NatsConn`: one libnats connection of the routing layer, with subscriptions whose
// callbacks are known to be over when it unsubscribes (routing internal; nats_tunnel.h).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nats/nats.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "postal/routing/channel.h"

namespace postal::routing {
class ChannelKey;  // channel_key.h
}

namespace postal::routing::internal {

// The NATS authorization token of a topology: HMAC-SHA256 of a fixed label under its channel key
// (R-SEC-1), as hex. A cluster the operator runs may require it (`authorization { token }`);
// every proc of the topology derives it from the secret it already holds, so none is handed out.
std::string nats_token(const routing::ChannelKey& key);

// What one member of a topology presents to NATS (R-SEC-4). With a key: the topology's token, and
// a user of its own — the member's name (a node listening on nats://, ChannelOptions::nats_member)
// or `~client` (every node that only dials: the host's client, tools, procs on ipc/tcp) — whose
// password is HMAC-SHA256 of a label and the name under the key, and whose inboxes are under
// `_INBOX.<hex of the name>`. The nats-server `postal up` starts (start_nats) knows these users
// and what each may publish and subscribe (local_nats.h); a server that has no users ignores them.
struct NatsCredentials {
  std::string token;  // empty: none
  std::string user;   // empty: none
  std::string password;
  std::string inbox_prefix = "_INBOX";
};
// No proc id is one: `~` only separates a label from an instance number.
inline constexpr std::string_view kNatsDialOnlyUser = "~client";
// No key: no credentials. `member` empty: the dial-only user.
NatsCredentials nats_credentials(const routing::ChannelKey* key, std::string_view member);
// `_INBOX.<hex of user>`: where a user's inboxes live.
std::string nats_inbox_prefix(std::string_view user);

// NatsConn::Options::write_deadline's default.
inline constexpr absl::Duration kNatsWriteDeadline = absl::Seconds(1);

class NatsConn {
 public:
  struct Options {
    std::string url;
    absl::Duration timeout;  // connecting
    std::string name;        // shown by the server (connz)
    NatsCredentials credentials;
    routing::NatsTls tls;
    // The connection was lost, or came back after a loss (libnats threads; must not block).
    std::function<void()> on_lost;
    // How long one write to the server's socket may wait for room (a publish writes on the
    // calling thread, SendAsap). Past it the publish fails and libnats reconnects: a server that
    // stops reading holds a posting worker this long at most, never for ever.
    absl::Duration write_deadline = kNatsWriteDeadline;
  };
  // Unavailable, naming the server and what to check, when none answers.
  static absl::StatusOr<std::unique_ptr<NatsConn>> connect(Options options);
  ~NatsConn();  // unsubscribes, then closes
  NatsConn(const NatsConn&) = delete;
  NatsConn& operator=(const NatsConn&) = delete;

  natsConnection* nc() const { return nc_; }
  // Where this connection's inboxes live (its credentials' prefix).
  const std::string& inbox_prefix() const { return options_.credentials.inbox_prefix; }
  // The server's max_payload (bytes).
  size_t max_payload() const;
  // `handler` runs on the subscription's libnats thread, one message at a time; the message is
  // destroyed after it returns.
  absl::Status subscribe(const std::string& subject, std::function<void(natsMsg*)> handler);
  // Ends every subscription and returns once no callback of them runs any more.
  void unsubscribe_all();
  void respond(const char* reply, const std::string& body);

 private:
  struct Sub {
    NatsConn* owner = nullptr;
    std::function<void(natsMsg*)> handler;
    natsSubscription* sub = nullptr;
    absl::Notification complete;
  };
  explicit NatsConn(Options options) : options_(std::move(options)) {}
  static void on_message(natsConnection*, natsSubscription*, natsMsg* msg, void* closure);
  static void on_complete(void* closure);
  static void on_event(natsConnection*, void* closure);
  static void on_closed(natsConnection*, void* closure);

  Options options_;
  natsConnection* nc_ = nullptr;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Sub>> subs_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> closing_{false};
  absl::Notification closed_;  // libnats ran the closed callback, its last
};

}  // namespace postal::routing::internal
