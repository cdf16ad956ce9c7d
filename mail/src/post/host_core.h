// HostCore: the state of one MailboxHost, shared with the push callbacks it registers on its
// mem provider (internal).
//
// The mem provider starts a window of push deliveries per subscription (subscribe_async); each
// goes into the subscription's PushStream, which sends them in batches to the subscriber's port
// through `pusher` (a Client on the host's proc) and settles them as the subscriber answers.
// Callbacks hold the core weakly, so dropping the actor ends everything: `shutdown` unsubscribes,
// stops the provider and joins helper threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "push_stream.h"
#include "postal/mail/mem_provider.h"
#include "postal/mail/post_messages.h"
#include "postal/runtime/client.h"

namespace postal::mail::post_internal {

// Answers a host's requests from threads that are not the host actor's — a post answered after
// its store commit, on the store's writer thread — through the host's `pusher` Client, while
// the host is up. Shared with those continuations, so it outlives the host: after `close` an
// answer is dropped (the caller's request times out, as for any host that went away).
class LateReplies {
 public:
  explicit LateReplies(runtime::Client* client) : client_(client) {}
  void send(const runtime::OncePortRef<MailReply>& to, MailReply reply) {
    absl::MutexLock lock(&mu_);
    if (client_ != nullptr) to.send(*client_, std::move(reply));
  }
  void close() {
    absl::MutexLock lock(&mu_);
    client_ = nullptr;
  }

 private:
  absl::Mutex mu_;
  runtime::Client* client_ ABSL_GUARDED_BY(mu_);
};

class HostCore : public std::enable_shared_from_this<HostCore> {
 public:
  HostCore(std::unique_ptr<MemProvider> provider, std::unique_ptr<runtime::Client> pusher)
      : provider_(std::move(provider)),
        pusher_(std::move(pusher)),
        late_replies_(std::make_shared<LateReplies>(pusher_.get())) {}
  ~HostCore() { shutdown(); }

  MemProvider& provider() { return *provider_; }
  runtime::Client& pusher() { return *pusher_; }
  const std::shared_ptr<LateReplies>& late_replies() const { return late_replies_; }

  // Subscribes `subscriber` (on proc `proc`) to the mem address; returns the subscription id.
  absl::StatusOr<std::string> subscribe(const MailAddress& mem_address, SubscribeOptions options,
                                        runtime::PortRef<MailPush> subscriber, std::string proc);
  // Removes the subscription and unsubscribes it (waits for a running callback unless called
  // from it). False when the id is unknown.
  bool unsubscribe(const std::string& id);

  // The subscriber's proc is gone: removes the subscription now and, on a helper thread,
  // unsubscribes it (which waits for its pushes in flight) and releases the proc's leases.
  void drop_subscription(const std::string& id, const std::string& proc);

  // Leases taken out by manual fetches, by the proc that fetched them.
  void record_lease(const CopyKey& key, std::string proc);
  // Settles `unhandled` every lease held by `proc` (its proc is gone); returns how many.
  size_t release_leases_of(const std::string& proc);

  // Runs `fn` on a helper thread (joined by shutdown).
  void run_blocking(std::function<void()> fn);

  void shutdown();

 private:
  struct HostSubscription {
    Subscription mem;
    std::string proc;
    std::shared_ptr<PushStream> stream;
  };

  std::unique_ptr<MemProvider> provider_;
  std::unique_ptr<runtime::Client> pusher_;
  std::shared_ptr<LateReplies> late_replies_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<HostSubscription>> subs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<CopyKey, std::string>> leases_ ABSL_GUARDED_BY(mu_);
  struct Helper {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Helper> helpers_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool shut_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace postal::mail::post_internal
