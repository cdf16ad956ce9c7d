#include "nats_held.h"

#include <utility>
#include <vector>

namespace postal::mail::nats {

HeldCopies::HeldCopies(std::shared_ptr<Clock> clock, absl::Duration keep_every)
    : clock_(std::move(clock)), keep_every_(keep_every) {
  keeper_ = std::thread([this] { keep_in_progress(); });
}

HeldCopies::~HeldCopies() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  keeper_.join();
}

void HeldCopies::attach(std::shared_ptr<QueueConn> conn) {
  absl::MutexLock lock(&mu_);
  conn_ = std::move(conn);
}

void HeldCopies::detach() {
  std::vector<std::string> back;
  std::shared_ptr<QueueConn> conn;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, h] : held_) back.push_back(std::move(h.ack_subject));
    held_.clear();
    returned_.clear();
    conn = std::move(conn_);
  }
  if (conn != nullptr) conn->queue->ack_many(back, AckKind::kNak);
}

void HeldCopies::forget_all() {
  absl::MutexLock lock(&mu_);
  held_.clear();
  returned_.clear();
}

std::optional<absl::Time> HeldCopies::lease_end(absl::Duration timeout) const {
  if (timeout <= absl::ZeroDuration() || timeout == absl::InfiniteDuration()) return std::nullopt;
  return clock_->now() + timeout;
}

uint64_t HeldCopies::hold(const std::string& address, const Pulled& p, absl::Duration timeout,
                          std::optional<absl::Time>* expires_at) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = ++next_lease_;
  Held& h = held_[id];
  h.address = address;
  h.ack_subject = p.ack_subject;
  h.seq = p.stream_seq;
  h.timeout = timeout;
  h.expires = lease_end(timeout);
  *expires_at = h.expires;
  return id;
}

void HeldCopies::handed_out(const std::string& address, uint64_t seq) {
  absl::MutexLock lock(&mu_);
  auto it = returned_.find(address);
  if (it == returned_.end()) return;
  it->second.erase(seq);
  if (it->second.empty()) returned_.erase(it);
}

void HeldCopies::remember_return(const std::string& address, uint64_t seq) {
  if (returned_.size() >= kMaxRemembered && !returned_.contains(address)) {
    returned_.erase(returned_.begin());
  }
  returned_[address].insert(seq);
}

HeldCopies::Counts HeldCopies::counts(const std::string& address, uint64_t ack_pending) {
  absl::MutexLock lock(&mu_);
  Counts c;
  if (auto it = returned_.find(address); it != returned_.end()) {
    if (it->second.size() > ack_pending) {
      returned_.erase(it);  // others took them: nothing to correct for any more
    } else {
      c.returned = it->second.size();
    }
  }
  if (auto it = terminated_.find(address); it != terminated_.end()) c.terminated = it->second;
  for (const auto& [id, h] : held_) {
    if (h.due.has_value() && h.address == address) ++c.delayed;
  }
  return c;
}

HeldCopies::Held* HeldCopies::live(const CopyKey& key) {
  auto it = held_.find(key.lease_id);
  if (it == held_.end() || it->second.address != key.address || it->second.due.has_value()) {
    return nullptr;
  }
  Held& h = it->second;
  if (h.expires.has_value() && clock_->now() >= *h.expires) return nullptr;  // overdue
  return &h;
}

bool HeldCopies::settle(const CopyKey& key, Disposition disposition) {
  return settle_all(std::span<const CopyKey>(&key, 1), disposition)[0];
}

std::vector<bool> HeldCopies::settle_all(std::span<const CopyKey> keys, Disposition disposition) {
  AckKind kind = AckKind::kAck;
  if (disposition == Disposition::kUnhandled) kind = AckKind::kNak;
  if (disposition == Disposition::kDiscard || disposition == Disposition::kTerminate) {
    kind = AckKind::kTerm;
  }
  std::vector<std::string> subjects(keys.size());  // empty: nothing to settle for that key
  std::shared_ptr<QueueConn> conn;
  {
    absl::MutexLock lock(&mu_);
    if (conn_ == nullptr) return std::vector<bool>(keys.size(), false);
    conn = conn_;
    for (size_t i = 0; i < keys.size(); ++i) {
      Held* h = live(keys[i]);
      if (h == nullptr) continue;
      subjects[i] = std::move(h->ack_subject);
      if (kind == AckKind::kNak) remember_return(h->address, h->seq);
      if (kind == AckKind::kTerm) {
        if (terminated_.size() >= kMaxRemembered && !terminated_.contains(h->address)) {
          terminated_.erase(terminated_.begin());
        }
        ++terminated_[h->address];
      }
      held_.erase(keys[i].lease_id);
    }
  }
  return conn->queue->ack_many(subjects, kind);
}

std::optional<std::optional<absl::Time>> HeldCopies::renew(const CopyKey& key) {
  std::string subject;
  std::shared_ptr<QueueConn> conn;
  {
    absl::MutexLock lock(&mu_);
    Held* h = live(key);
    if (h == nullptr || conn_ == nullptr) return std::nullopt;
    subject = h->ack_subject;
    conn = conn_;
  }
  if (!conn->queue->ack(subject, AckKind::kProgress)) return std::nullopt;
  absl::MutexLock lock(&mu_);
  Held* h = live(key);  // settled or expired meanwhile: no renewal
  if (h == nullptr) return std::nullopt;
  h->expires = lease_end(h->timeout);
  return h->expires;
}

bool HeldCopies::nack(const CopyKey& key, absl::Duration delay) {
  if (delay <= absl::ZeroDuration()) return settle(key, Disposition::kUnhandled);
  absl::MutexLock lock(&mu_);
  Held* h = live(key);
  if (h == nullptr || conn_ == nullptr) return false;
  h->expires.reset();
  h->due = clock_->now() + delay;
  return true;
}

std::map<std::string, uint64_t> HeldCopies::reclaim(const std::string* address, bool leases) {
  std::map<std::string, uint64_t> reclaimed;
  std::vector<std::string> back;
  std::shared_ptr<QueueConn> conn;
  {
    absl::MutexLock lock(&mu_);
    if (conn_ == nullptr) return reclaimed;
    conn = conn_;
    const absl::Time now = clock_->now();
    for (auto it = held_.begin(); it != held_.end();) {
      Held& h = it->second;
      const bool expired = leases && h.expires.has_value() && now >= *h.expires;
      const bool due = h.due.has_value() && now >= *h.due;
      if ((address != nullptr && h.address != *address) || (!expired && !due)) {
        ++it;
        continue;
      }
      if (expired) ++reclaimed[h.address];
      remember_return(h.address, h.seq);
      back.push_back(std::move(h.ack_subject));
      it = held_.erase(it);
    }
  }
  conn->queue->ack_many(back, AckKind::kNak);
  return reclaimed;
}

// Every `keep_every` of real time, tells the server that each held copy is in progress, so its
// ack wait never runs out while this process lives.
void HeldCopies::keep_in_progress() {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stop), keep_every_)) return;
    if (conn_ == nullptr || held_.empty()) continue;
    std::shared_ptr<QueueConn> conn = conn_;
    std::vector<std::string> subjects;
    subjects.reserve(held_.size());
    for (const auto& [id, h] : held_) subjects.push_back(h.ack_subject);
    mu_.Unlock();
    for (const std::string& s : subjects) {
      natsConnection_PublishString(conn->link->nc(), s.c_str(), "+WPI");
    }
    mu_.Lock();
  }
}

}  // namespace postal::mail::nats
