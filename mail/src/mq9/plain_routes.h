// plain_routes.h — `PlainRoutes`: what the mq9 bridge does for subjects outside `$mq9.`: routes
// them between its clients as one nats-server would (wildcards, queue groups), with no storage.
// Replies reach a client's `_INBOX.…` subscription this way.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace postal::mail::mq9 {

class Session;

class PlainRoutes {
 public:
  void add(const std::shared_ptr<Session>& session, std::string sid, std::string pattern,
           std::string queue, uint64_t max_msgs = 0);
  void set_max(uint64_t session_id, std::string_view sid, uint64_t max_msgs);
  void remove(uint64_t session_id, std::string_view sid);
  void remove_all(uint64_t session_id);
  // Hands a message to every matching subscription, one member per queue group; how many got it.
  size_t route(std::string_view subject, std::string_view reply, std::string_view headers,
               std::string_view payload);

 private:
  struct Sub {
    std::weak_ptr<Session> session;
    uint64_t session_id = 0;
    std::string sid, pattern, queue;
    uint64_t max_msgs = 0;  // 0: unlimited
    uint64_t delivered = 0;
  };
  absl::Mutex mu_;
  std::vector<Sub> subs_ ABSL_GUARDED_BY(mu_);
  uint64_t round_robin_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace postal::mail::mq9
