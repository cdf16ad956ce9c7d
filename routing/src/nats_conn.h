// nats_conn.h — `NatsConn`: one libnats connection of the routing layer, with subscriptions whose
// callbacks are known to be over when it unsubscribes (routing internal; nats_tunnel.h).
#pragma once

#include <nats/nats.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace postal::routing {
class ChannelKey;  // channel_key.h
}

namespace postal::routing::internal {

// The NATS authorization token of a topology: HMAC-SHA256 of a fixed label under its channel key
// (R-SEC-1), as hex. `postal up` gives the nats-server it starts this token (start_nats), and
// every proc of the topology derives it from the secret it already holds, so none is handed out.
std::string nats_token(const routing::ChannelKey& key);

class NatsConn {
 public:
  struct Options {
    std::string url;
    absl::Duration timeout;  // connecting
    std::string name;        // shown by the server (connz)
    std::string token;       // the server's authorization token; empty: none
    // The connection was lost, or came back after a loss (libnats threads; must not block).
    std::function<void()> on_lost;
  };
  // Unavailable, naming the server and what to check, when none answers.
  static absl::StatusOr<std::unique_ptr<NatsConn>> connect(Options options);
  ~NatsConn();  // unsubscribes, then closes
  NatsConn(const NatsConn&) = delete;
  NatsConn& operator=(const NatsConn&) = delete;

  natsConnection* nc() const { return nc_; }
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
