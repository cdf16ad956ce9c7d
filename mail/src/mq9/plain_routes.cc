// plain_routes.cc — see plain_routes.h.
#include "plain_routes.h"

#include <algorithm>
#include <map>
#include <utility>

#include "mq9_session.h"
#include "mq9_subject.h"

namespace postal::mail::mq9 {

void PlainRoutes::add(const std::shared_ptr<Session>& session, std::string sid,
                      std::string pattern, std::string queue, uint64_t max_msgs) {
  absl::MutexLock lock(&mu_);
  subs_.push_back(Sub{session, session->id(), std::move(sid), std::move(pattern), std::move(queue),
                      max_msgs, 0});
}

void PlainRoutes::set_max(uint64_t session_id, std::string_view sid, uint64_t max_msgs) {
  absl::MutexLock lock(&mu_);
  for (auto it = subs_.begin(); it != subs_.end(); ++it) {
    if (it->session_id != session_id || it->sid != sid) continue;
    if (it->delivered >= max_msgs) {
      subs_.erase(it);
    } else {
      it->max_msgs = max_msgs;
    }
    return;
  }
}

void PlainRoutes::remove(uint64_t session_id, std::string_view sid) {
  absl::MutexLock lock(&mu_);
  std::erase_if(subs_, [&](const Sub& s) { return s.session_id == session_id && s.sid == sid; });
}

void PlainRoutes::remove_all(uint64_t session_id) {
  absl::MutexLock lock(&mu_);
  std::erase_if(subs_, [&](const Sub& s) { return s.session_id == session_id; });
}

size_t PlainRoutes::route(std::string_view subject, std::string_view reply,
                          std::string_view headers, std::string_view payload) {
  struct Target {
    std::shared_ptr<Session> session;
    std::string sid;
  };
  std::vector<Target> targets;
  {
    absl::MutexLock lock(&mu_);
    // (pattern, queue) → matching members: as in nats-server, each distinct subscription
    // subject of a queue name is its own group.
    std::map<std::pair<std::string_view, std::string_view>, std::vector<size_t>> groups;
    for (size_t i = 0; i < subs_.size(); ++i) {
      const Sub& s = subs_[i];
      if (!subject_matches(s.pattern, subject)) continue;
      if (s.queue.empty()) {
        targets.push_back({s.session.lock(), s.sid});
        ++subs_[i].delivered;
      } else {
        groups[{s.pattern, s.queue}].push_back(i);
      }
    }
    for (auto& [key, members] : groups) {
      size_t i = members[round_robin_++ % members.size()];
      targets.push_back({subs_[i].session.lock(), subs_[i].sid});
      ++subs_[i].delivered;
    }
    std::erase_if(subs_, [](const Sub& s) { return s.max_msgs != 0 && s.delivered >= s.max_msgs; });
  }
  size_t n = 0;
  for (const Target& t : targets) {
    if (!t.session) continue;
    t.session->deliver(subject, t.sid, reply, headers, payload);
    ++n;
  }
  return n;
}

}  // namespace postal::mail::mq9
