// NatsMailStore (nats_mail_store.h): messages in one JetStream stream, one subject per lane;
// mailbox records and settlement marks in two KV buckets (nats_records.h).
#include "postal/mail/nats_mail_store.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "nats_ack_inbox.h"
#include "nats_link.h"
#include "nats_records.h"
#include "nats_stream.h"
#include "postal/mail/mail_errors.h"
#include "postal/runtime/logger.h"
#include "postal/wire/absl_compat.h"
#include "../store/settle_marks.h"
#include "../store/store_admission.h"

namespace postal::mail {
namespace {

using nats::Bucket;
using nats::Marks;
using nats::NatsLink;

constexpr std::string_view kWhere = "the NATS store";
constexpr int kCasTries = 64;  // compare-and-set rounds on one marks record before giving up

absl::Status check_options(const NatsStoreOptions& o) {
  const bool prefix_ok =
      !o.prefix.empty() && o.prefix.size() <= 32 &&
      std::all_of(o.prefix.begin(), o.prefix.end(),
                  [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; });
  if (!prefix_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NATS store prefix \"", o.prefix, "\": use 1-32 characters of A-Z, 0-9 and _"));
  }
  if (o.replicas != 1 && o.replicas != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("NATS store replicas ", o.replicas, ": use 1, or 3 in a 3-node cluster"));
  }
  if (o.timeout <= absl::ZeroDuration() || o.max_pending_appends == 0) {
    return absl::InvalidArgumentError("NATS store: the timeout and max_pending_appends must be > 0");
  }
  return absl::OkStatus();
}

class NatsStore final : public MailStore {
 public:
  static absl::StatusOr<std::unique_ptr<MailStore>> open(NatsStoreOptions options) {
    if (absl::Status s = check_options(options); !s.ok()) return s;
    std::unique_ptr<NatsStore> store(new NatsStore(std::move(options)));
    if (absl::Status s = store->connect(); !s.ok()) return s;
    return std::unique_ptr<MailStore>(std::move(store));
  }

  ~NatsStore() override {
    inbox_.reset();  // fails appends still waiting, before the link goes
    boxes_.reset();
    marks_.reset();
  }

  std::string_view kind() const override { return "nats"; }
  bool persistent() const override { return true; }
  bool volatile_normal() const override { return false; }

  absl::StatusOr<CreateResult> create(const MailboxSpec& spec) override {
    absl::StatusOr<std::string> made = store::mailbox_id(spec);
    if (!made.ok()) return made.status();
    const std::string& id = *made;
    const std::string key = nats::hex(id);
    const absl::Time now = clock_->now();
    absl::MutexLock lock(&create_mu_);
    for (int round = 0; round < 2; ++round) {
      absl::StatusOr<std::optional<MailboxInfo>> existing = record(key);
      if (!existing.ok()) return existing.status();
      if (existing->has_value()) {
        if (!(*existing)->expired(now)) {
          if (absl::Status s = store::check_same_bounds(**existing, spec); !s.ok()) return s;
          return CreateResult{.mailbox = **existing, .created = false};
        }
        if (absl::Status s = drop(id); !s.ok()) return s;  // M-BOX-3: replaced before the sweep
      }
      absl::StatusOr<std::vector<MailboxInfo>> all = records();
      if (!all.ok()) return all.status();
      const size_t live = static_cast<size_t>(std::count_if(
          all->begin(), all->end(), [&](const MailboxInfo& m) { return !m.expired(now); }));
      if (absl::Status s = store::check_mailbox_cap(live, limits_.max_mailboxes); !s.ok()) return s;
      MailboxInfo info = store::new_mailbox(spec, id, now);
      absl::StatusOr<bool> created = boxes_->create(key, nats::encode_mailbox(info));
      if (!created.ok()) return created.status();
      if (*created) {
        remember(info);
        return CreateResult{.mailbox = std::move(info), .created = true};
      }
      // Another process created it between our read and our create: answer with its record.
    }
    return IoFailedError(absl::StrCat("the NATS store: mailbox ", id,
                                      " was created and removed again while we created it; retry"));
  }

  // Every post asks for its mailbox first (MemProvider::retained_name): from the cache, as
  // append does, so a post costs one round trip to the server, not two.
  absl::StatusOr<MailboxInfo> mailbox(std::string_view id) override { return find(id, true); }

  absl::StatusOr<std::vector<MailboxInfo>> list_public() override {
    const absl::Time now = clock_->now();
    absl::StatusOr<std::vector<MailboxInfo>> all = records();
    if (!all.ok()) return all.status();
    std::vector<MailboxInfo> out;
    for (MailboxInfo& m : *all) {
      if (m.is_public && !m.expired(now)) out.push_back(std::move(m));
    }
    std::sort(out.begin(), out.end(),
              [](const MailboxInfo& a, const MailboxInfo& b) { return a.id < b.id; });
    return out;
  }

  absl::Status remove(std::string_view id) override {
    if (absl::StatusOr<MailboxInfo> info = find(id, false); !info.ok()) return info.status();
    return drop(id);
  }

  absl::StatusOr<std::vector<MailboxInfo>> expire(absl::Time now) override {
    absl::StatusOr<std::vector<MailboxInfo>> all = records();
    if (!all.ok()) return all.status();
    std::vector<MailboxInfo> gone;
    for (MailboxInfo& m : *all) {
      if (!m.expired(now)) continue;
      if (absl::Status s = drop(m.id); !s.ok()) return s;
      gone.push_back(std::move(m));
    }
    return gone;
  }

  absl::StatusOr<uint64_t> append(std::string_view id, Priority priority,
                                  std::string body) override {
    absl::StatusOr<MailboxInfo> info = find(id, true);
    if (!info.ok()) return info.status();
    if (absl::Status s = stream_->fits_payload(body.size()); !s.ok()) return s;
    const std::string subject = stream_->lane_subject(id, priority);
    if (info->max_messages == 0) {
      if (absl::Status s = store::check_message_fits(*info, 0, body.size()); !s.ok()) return s;
      return stream_->publish(subject, body);
    }
    absl::MutexLock lock(&stripe(id));
    absl::StatusOr<uint64_t> held = stream_->count(id);
    if (!held.ok()) return held.status();
    if (absl::Status s = store::check_message_fits(*info, *held, body.size()); !s.ok()) return s;
    return stream_->publish(subject, body);
  }

  void append_async(std::string_view id, Priority priority, std::string body, AppendDone done,
                    AppendAsync how) override {
    absl::StatusOr<MailboxInfo> info = find(id, true);
    absl::Status ok = info.ok() ? stream_->fits_payload(body.size()) : info.status();
    if (ok.ok() && info->max_messages > 0) {
      // A bounded mailbox counts and publishes under its lock, so the bound holds exactly.
      std::move(done)(append(id, priority, std::move(body)));
      return;
    }
    if (ok.ok()) ok = store::check_message_fits(*info, 0, body.size());
    if (!ok.ok()) {
      std::move(done)(std::move(ok));
      return;
    }
    (void)how;  // the ack always comes on the inbox's thread
    inbox_->publish(stream_->lane_subject(id, priority), body,
                    [this, done = std::move(done)](absl::StatusOr<uint64_t> seq) mutable {
                      if (seq.ok()) stream_->saw(*seq);
                      std::move(done)(std::move(seq));
                    });
  }

  absl::StatusOr<std::vector<uint64_t>> append_all(std::string_view id,
                                                   std::vector<NewMessage> batch) override {
    absl::StatusOr<MailboxInfo> info = find(id, true);
    if (!info.ok()) return info.status();
    absl::MutexLock lock(&stripe(id));
    uint64_t held = 0;
    if (info->max_messages > 0) {
      absl::StatusOr<uint64_t> n = stream_->count(id);
      if (!n.ok()) return n.status();
      held = *n;
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (absl::Status s = store::check_message_fits(*info, held + i, batch[i].body.size());
          !s.ok()) {
        return s;
      }
      if (absl::Status s = stream_->fits_payload(batch[i].body.size()); !s.ok()) return s;
    }
    std::vector<uint64_t> seqs;
    for (const NewMessage& m : batch) {
      absl::StatusOr<uint64_t> seq = stream_->publish(stream_->lane_subject(id, m.priority), m.body);
      if (!seq.ok()) {
        for (uint64_t s : seqs) stream_->erase(s);  // whole or not at all (M-STORE-2)
        return seq.status();
      }
      seqs.push_back(*seq);
    }
    return seqs;
  }

  absl::StatusOr<std::vector<StoredMessage>> read(std::string_view id,
                                                  const LaneRange& range) override {
    if (absl::StatusOr<MailboxInfo> info = find(id, true); !info.ok()) return info.status();
    const std::string subject = stream_->lane_subject(id, range.priority);
    std::vector<StoredMessage> out;
    uint64_t after = range.after;
    while (out.size() < range.limit && after < range.through) {
      absl::StatusOr<std::optional<StoredMessage>> m = stream_->get(after + 1, subject);
      if (!m.ok()) return m.status();
      if (!m->has_value() || (*m)->seq > range.through) break;
      after = (*m)->seq;
      out.push_back(**std::move(m));
    }
    return out;
  }

  absl::StatusOr<bool> erase(std::string_view id, uint64_t seq) override {
    if (absl::StatusOr<MailboxInfo> info = find(id, true); !info.ok()) return info.status();
    absl::StatusOr<std::optional<StoredMessage>> m = stream_->get(seq, stream_->mailbox_prefix(id));
    if (!m.ok()) return m.status();
    if (!m->has_value() || (*m)->seq != seq) return false;
    if (!stream_->erase(seq)) return false;  // someone else erased it first
    absl::Status s = edit_marks(id, [&](Marks& marks) {
      for (auto& [group, seqs] : marks) seqs.erase(seq);
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    return true;
  }

  absl::StatusOr<uint64_t> consume_through(std::string_view id, Priority priority,
                                           uint64_t seq) override {
    if (absl::StatusOr<MailboxInfo> info = find(id, true); !info.ok()) return info.status();
    absl::StatusOr<uint64_t> purged = stream_->purge(stream_->lane_subject(id, priority), seq);
    if (!purged.ok()) return purged.status();
    const char lane = nats::lane_letter(priority);
    absl::Status s = edit_marks(id, [&](Marks& marks) {
      for (auto& [group, seqs] : marks) {
        std::erase_if(seqs, [&](const auto& m) { return m.first <= seq && m.second == lane; });
      }
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    if (seq >= last_seq()) {
      if (absl::Status hw = stream_->keep_high_water(); !hw.ok()) return hw;
    }
    return *purged;
  }

  absl::StatusOr<uint64_t> count(std::string_view id) override {
    if (absl::StatusOr<MailboxInfo> info = find(id, true); !info.ok()) return info.status();
    return stream_->count(id);
  }

  uint64_t last_seq() const override { return stream_->last_seq(); }

  absl::Status settle(std::string_view id, std::string_view group,
                      const std::vector<uint64_t>& seqs) override {
    if (absl::Status s = check_queue_group(group); !s.ok()) return s;
    if (absl::StatusOr<MailboxInfo> info = find(id, true); !info.ok()) return info.status();
    std::map<uint64_t, char> held;  // the seqs of `seqs` the mailbox holds, with their lanes
    const std::string prefix = stream_->mailbox_prefix(id);
    for (uint64_t seq : seqs) {
      absl::StatusOr<std::optional<StoredMessage>> m = stream_->get(seq, prefix);
      if (!m.ok()) return m.status();
      if (m->has_value() && (*m)->seq == seq) held[seq] = nats::lane_letter((*m)->priority);
    }
    return edit_marks(id, [&](Marks& marks) {
      if (!marks.contains(group) && marks.size() >= limits_.max_settling_groups) {
        return store::settling_groups_exhausted(id, group, limits_.max_settling_groups);
      }
      if (!held.empty()) marks[std::string(group)].insert(held.begin(), held.end());
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::vector<uint64_t>> settled(std::string_view id,
                                                std::string_view group) override {
    if (absl::StatusOr<MailboxInfo> info = find(id, true); !info.ok()) return info.status();
    absl::StatusOr<std::optional<Bucket::Entry>> entry = marks_->get(nats::hex(id));
    if (!entry.ok()) return entry.status();
    std::vector<uint64_t> out;
    if (!entry->has_value()) return out;
    absl::StatusOr<Marks> marks = nats::decode_marks((*entry)->value);
    if (!marks.ok()) return marks.status();
    if (auto it = marks->find(group); it != marks->end()) {
      for (const auto& [seq, lane] : it->second) out.push_back(seq);
    }
    return out;
  }

 private:
  explicit NatsStore(NatsStoreOptions options)
      : options_(std::move(options)),
        clock_(options_.clock ? options_.clock : std::make_shared<SystemClock>()),
        limits_(options_.limits) {}

  absl::Status connect() {
    absl::StatusOr<std::unique_ptr<NatsLink>> link = NatsLink::connect(
        {options_.url, options_.token, options_.timeout, "postal mail store", options_.tls_ca_file,
         options_.tls_cert_file, options_.tls_key_file});
    if (!link.ok()) return link.status();
    link_ = *std::move(link);
    stream_ = std::make_unique<nats::MailStream>(*link_, options_.prefix, options_.replicas);
    // JetStream may still be starting (a server just launched, a cluster electing its meta
    // leader): keep asking until the timeout.
    const absl::Time deadline = absl::Now() + options_.timeout;
    absl::Status s;
    while (!(s = stream_->ensure()).ok() && absl::Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!s.ok()) return s;
    absl::StatusOr<std::unique_ptr<Bucket>> boxes =
        Bucket::open(*link_, absl::StrCat(options_.prefix, "_BOXES"), options_.replicas);
    if (!boxes.ok()) return boxes.status();
    boxes_ = *std::move(boxes);
    absl::StatusOr<std::unique_ptr<Bucket>> marks =
        Bucket::open(*link_, absl::StrCat(options_.prefix, "_MARKS"), options_.replicas);
    if (!marks.ok()) return marks.status();
    marks_ = *std::move(marks);
    inbox_ = std::make_unique<nats::AckInbox>(*link_, options_.max_pending_appends);
    return inbox_->start();
  }

  // The record of mailbox `key` as stored (expired or not).
  absl::StatusOr<std::optional<MailboxInfo>> record(const std::string& key) {
    absl::StatusOr<std::optional<Bucket::Entry>> entry = boxes_->get(key);
    if (!entry.ok()) return entry.status();
    if (!entry->has_value()) return std::nullopt;
    absl::StatusOr<MailboxInfo> info = nats::decode_mailbox(key, (*entry)->value);
    if (!info.ok()) return info.status();
    return *std::move(info);
  }

  absl::StatusOr<std::vector<MailboxInfo>> records() {
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> all = boxes_->all();
    if (!all.ok()) return all.status();
    std::vector<MailboxInfo> out;
    for (const auto& [key, value] : *all) {
      absl::StatusOr<MailboxInfo> info = nats::decode_mailbox(key, value);
      if (info.ok()) {
        out.push_back(*std::move(info));
      } else {  // one foreign record must not take every listing down with it
        runtime::Logger::mail().warn(absl::StrCat("NATS store ", options_.prefix, ": skipping key ",
                                                  key, ": ", info.status().message()));
      }
    }
    return out;
  }

  // The live mailbox `id`: MailboxNotFound when it does not exist or its TTL ended. `cached`:
  // a record read within record_cache_ttl will do.
  absl::StatusOr<MailboxInfo> find(std::string_view id, bool cached) {
    const absl::Time now = clock_->now();
    if (cached) {
      absl::MutexLock lock(&cache_mu_);
      if (auto it = cache_.find(std::string(id));
          it != cache_.end() && absl::Now() - it->second.second < options_.record_cache_ttl) {
        if (it->second.first.expired(now)) return MailboxNotFoundError(id, kWhere);
        return it->second.first;
      }
    }
    absl::StatusOr<std::optional<MailboxInfo>> info = record(nats::hex(id));
    if (!info.ok()) return info.status();
    if (!info->has_value() || (*info)->expired(now)) {
      forget(id);
      return MailboxNotFoundError(id, kWhere);
    }
    remember(**info);
    return **info;
  }
  void remember(const MailboxInfo& info) {
    absl::MutexLock lock(&cache_mu_);
    cache_.insert_or_assign(info.id, std::make_pair(info, absl::Now()));
  }
  void forget(std::string_view id) {
    absl::MutexLock lock(&cache_mu_);
    cache_.erase(std::string(id));
  }

  // Removes a mailbox's messages, then its marks, then its record.
  absl::Status drop(std::string_view id) {
    forget(id);
    absl::StatusOr<uint64_t> purged = stream_->purge(absl::StrCat(stream_->mailbox_prefix(id), "*"));
    if (!purged.ok()) return purged.status();
    if (absl::Status s = marks_->erase(nats::hex(id)); !s.ok()) return s;
    if (absl::Status s = boxes_->erase(nats::hex(id)); !s.ok()) return s;
    return stream_->keep_high_water();
  }

  // Read-modify-write of a mailbox's marks record, by compare-and-set; an edit leaving no mark
  // removes the record.
  template <typename Edit>
  absl::Status edit_marks(std::string_view id, Edit edit) {
    const std::string key = nats::hex(id);
    for (int round = 0; round < kCasTries; ++round) {
      absl::StatusOr<std::optional<Bucket::Entry>> entry = marks_->get(key);
      if (!entry.ok()) return entry.status();
      Marks marks;
      if (entry->has_value()) {
        absl::StatusOr<Marks> decoded = nats::decode_marks((*entry)->value);
        if (!decoded.ok()) return decoded.status();
        marks = *std::move(decoded);
      }
      if (absl::Status s = edit(marks); !s.ok()) return s;
      std::erase_if(marks, [](const auto& g) { return g.second.empty(); });
      absl::StatusOr<bool> written = true;
      if (marks.empty()) {
        if (entry->has_value()) {
          if (absl::Status s = marks_->erase(key); !s.ok()) return s;
        }
      } else if (entry->has_value()) {
        written = marks_->update(key, nats::encode_marks(marks), (*entry)->revision);
      } else {
        written = marks_->create(key, nats::encode_marks(marks));
      }
      if (!written.ok()) return written.status();
      if (*written) return absl::OkStatus();
    }
    return IoFailedError(absl::StrCat("the NATS store: the marks of mailbox ", sv(id), " changed ",
                                      kCasTries, " times while we settled; retry"));
  }

  // Bounded appends to one mailbox count and publish under one of these (by the id's hash).
  absl::Mutex& stripe(std::string_view id) {
    return stripes_[absl::HashOf(id) % stripes_.size()];
  }

  const NatsStoreOptions options_;
  const std::shared_ptr<Clock> clock_;
  const StoreLimits limits_;
  std::unique_ptr<NatsLink> link_;
  std::unique_ptr<nats::MailStream> stream_;
  std::unique_ptr<Bucket> boxes_;
  std::unique_ptr<Bucket> marks_;
  std::unique_ptr<nats::AckInbox> inbox_;
  absl::Mutex create_mu_;
  std::array<absl::Mutex, 64> stripes_;
  absl::Mutex cache_mu_;
  absl::flat_hash_map<std::string, std::pair<MailboxInfo, absl::Time>> cache_
      ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<MailStore>> NatsMailStore::open(NatsStoreOptions options) {
  return NatsStore::open(std::move(options));
}

}  // namespace postal::mail
