#include "postal/mail/mem_mail_store.h"

#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "mem_lanes.h"
#include "settle_marks.h"
#include "postal/mail/mail_errors.h"
#include "store_admission.h"

namespace postal::mail {
namespace {

constexpr std::string_view kWhere = "the mem store";

class MemStore final : public MailStore {
 public:
  explicit MemStore(MemStoreOptions options)
      : clock_(options.clock ? options.clock : std::make_shared<SystemClock>()),
        limits_(options.limits) {}

  std::string_view kind() const override { return "mem"; }
  bool persistent() const override { return false; }

  absl::StatusOr<CreateResult> create(const MailboxSpec& spec) override {
    absl::StatusOr<std::string> made = store::mailbox_id(spec);
    if (!made.ok()) return made.status();
    const std::string& id = *made;
    const absl::Time now = clock_->now();
    absl::MutexLock lock(&mu_);
    sweep_locked(id, now);
    if (auto it = mailboxes_.find(id); it != mailboxes_.end()) {
      if (absl::Status s = store::check_same_bounds(it->second, spec); !s.ok()) return s;
      return CreateResult{.mailbox = it->second, .created = false};
    }
    if (absl::Status s = store::check_mailbox_cap(live_count_locked(now), limits_.max_mailboxes);
        !s.ok()) {
      return s;
    }
    MailboxInfo info = store::new_mailbox(spec, id, now);
    mailboxes_.emplace(id, info);
    return CreateResult{.mailbox = std::move(info), .created = true};
  }

  absl::StatusOr<MailboxInfo> mailbox(std::string_view id) override {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<const MailboxInfo*> info = find_locked(id);
    if (!info.ok()) return info.status();
    return **info;
  }

  absl::StatusOr<std::vector<MailboxInfo>> list_public() override {
    const absl::Time now = clock_->now();
    absl::MutexLock lock(&mu_);
    std::vector<MailboxInfo> out;
    for (const auto& [id, info] : mailboxes_) {
      if (info.is_public && !info.expired(now)) out.push_back(info);
    }
    return out;
  }

  absl::Status remove(std::string_view id) override {
    absl::MutexLock lock(&mu_);
    if (absl::StatusOr<const MailboxInfo*> info = find_locked(id); !info.ok()) {
      return info.status();
    }
    drop_locked(id);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<MailboxInfo>> expire(absl::Time now) override {
    absl::MutexLock lock(&mu_);
    std::vector<MailboxInfo> gone;
    for (const auto& [id, info] : mailboxes_) {
      if (info.expired(now)) gone.push_back(info);
    }
    for (const MailboxInfo& info : gone) drop_locked(info.id);
    return gone;
  }

  absl::StatusOr<uint64_t> append(std::string_view id, Priority priority,
                                  std::string body) override {
    const absl::Time now = clock_->now();
    absl::MutexLock lock(&mu_);
    absl::StatusOr<const MailboxInfo*> info = find_locked(id);
    if (!info.ok()) return info.status();
    if (absl::Status s = store::check_message_fits(**info, lanes_.count(id), body.size());
        !s.ok()) {
      return s;
    }
    const uint64_t seq = ++last_seq_;
    lanes_.append(
        id,
        StoredMessage{.seq = seq, .priority = priority, .stored_at = now, .body = std::move(body)});
    return seq;
  }

  absl::StatusOr<std::vector<uint64_t>> append_all(std::string_view id,
                                                   std::vector<NewMessage> batch) override {
    const absl::Time now = clock_->now();
    absl::MutexLock lock(&mu_);
    absl::StatusOr<const MailboxInfo*> info = find_locked(id);
    if (!info.ok()) return info.status();
    const uint64_t held = lanes_.count(id);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (absl::Status s = store::check_message_fits(**info, held + i, batch[i].body.size());
          !s.ok()) {
        return s;
      }
    }
    std::vector<uint64_t> seqs;
    for (NewMessage& m : batch) {
      seqs.push_back(++last_seq_);
      lanes_.append(id, StoredMessage{.seq = seqs.back(),
                                      .priority = m.priority,
                                      .stored_at = now,
                                      .body = std::move(m.body)});
    }
    return seqs;
  }

  absl::StatusOr<std::vector<StoredMessage>> read(std::string_view id,
                                                  const LaneRange& range) override {
    absl::MutexLock lock(&mu_);
    if (absl::StatusOr<const MailboxInfo*> info = find_locked(id); !info.ok()) {
      return info.status();
    }
    return lanes_.read(id, range);
  }

  absl::StatusOr<bool> erase(std::string_view id, uint64_t seq) override {
    absl::MutexLock lock(&mu_);
    if (absl::StatusOr<const MailboxInfo*> info = find_locked(id); !info.ok()) {
      return info.status();
    }
    if (!lanes_.erase(id, seq)) return false;
    marks_.forget(id, seq);
    return true;
  }

  absl::StatusOr<uint64_t> consume_through(std::string_view id, Priority priority,
                                           uint64_t seq) override {
    absl::MutexLock lock(&mu_);
    if (absl::StatusOr<const MailboxInfo*> info = find_locked(id); !info.ok()) {
      return info.status();
    }
    std::vector<uint64_t> removed;
    const uint64_t n = lanes_.consume_through(id, priority, seq, &removed);
    for (uint64_t s : removed) marks_.forget(id, s);
    return n;
  }

  absl::StatusOr<uint64_t> count(std::string_view id) override {
    absl::MutexLock lock(&mu_);
    if (absl::StatusOr<const MailboxInfo*> info = find_locked(id); !info.ok()) {
      return info.status();
    }
    return lanes_.count(id);
  }

  absl::Status settle(std::string_view id, std::string_view group,
                      const std::vector<uint64_t>& seqs) override {
    if (absl::Status s = check_queue_group(group); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    if (absl::StatusOr<const MailboxInfo*> info = find_locked(id); !info.ok()) {
      return info.status();
    }
    return marks_.settle(id, group, seqs, limits_.max_settling_groups,
                         [&](uint64_t seq) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                           return lanes_.contains(id, seq);
                         });
  }

  absl::StatusOr<std::vector<uint64_t>> settled(std::string_view id,
                                                std::string_view group) override {
    absl::MutexLock lock(&mu_);
    if (absl::StatusOr<const MailboxInfo*> info = find_locked(id); !info.ok()) {
      return info.status();
    }
    return marks_.settled(id, group);
  }

  uint64_t last_seq() const override {
    absl::MutexLock lock(&mu_);
    return last_seq_;
  }

 private:
  // A mailbox whose TTL ended is gone for every verb, swept or not.
  absl::StatusOr<const MailboxInfo*> find_locked(std::string_view id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = mailboxes_.find(id);
    if (it == mailboxes_.end() || it->second.expired(clock_->now())) {
      return MailboxNotFoundError(id, kWhere);
    }
    return &it->second;
  }
  void sweep_locked(const std::string& id, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = mailboxes_.find(id);
    if (it != mailboxes_.end() && it->second.expired(now)) drop_locked(id);
  }
  size_t live_count_locked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    size_t n = 0;
    for (const auto& [id, info] : mailboxes_) n += info.expired(now) ? 0 : 1;
    return n;
  }
  void drop_locked(std::string_view id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    lanes_.drop(id);
    marks_.drop(id);
    if (auto it = mailboxes_.find(id); it != mailboxes_.end()) mailboxes_.erase(it);
  }

  const std::shared_ptr<Clock> clock_;
  const StoreLimits limits_;
  mutable absl::Mutex mu_;
  std::map<std::string, MailboxInfo, std::less<>> mailboxes_ ABSL_GUARDED_BY(mu_);
  store::MemLanes lanes_ ABSL_GUARDED_BY(mu_);
  store::SettleMarks marks_ ABSL_GUARDED_BY(mu_);  // M-RECV-4
  uint64_t last_seq_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

std::unique_ptr<MailStore> MemMailStore::create(MemStoreOptions options) {
  return std::make_unique<MemStore>(std::move(options));
}

}  // namespace postal::mail
