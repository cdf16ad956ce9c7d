// MemProvider's verbs: post, fetch, peek, status, recover, clear, locate, settle, dead letters.
// Each takes the bus lock and hands the work to mem_queue.cc / mem_dead_letter.cc.
#include "absl/strings/str_cat.h"
#include "mem_state.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/mem_provider.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {

using mem_internal::BusLock;
using mem_internal::BusState;
using mem_internal::Topic;

namespace {

absl::Status stopped(std::string_view verb, const MailAddress& address) {
  return absl::FailedPreconditionError(absl::StrCat(
      sv(verb), " ", address.canonical(), ": the mem provider is stopped; start() it first"));
}

MailboxStatus never_seen(const MailAddress& address) {
  // M-STAT-1: unknown, exists false — not "online with 0".
  MailboxStatus s;
  s.address = address.canonical();
  s.state = MailboxState::kUnknown;
  s.exists = false;
  return s;
}

}  // namespace

absl::StatusOr<PostReceipt> MemProvider::post(const MailAddress& to, Letter letter) {
  if (std::optional<std::string> name = retained_name(to)) {
    return post_retained(*name, to, std::move(letter));
  }
  BusState& bus = *core_->bus;
  Letter stamped = mem_internal::stamp_for_send(std::move(letter), to, bus.clock->now());
  BusLock lock(bus);
  if (!core_->running) return stopped("post", to);
  return mem_internal::post_locked(bus, core_->config, bus.topic_locked(to), std::move(stamped));
}

absl::StatusOr<std::optional<Delivery>> MemProvider::fetch(const MailAddress& address,
                                                           const FetchOptions& options) {
  BusState& bus = *core_->bus;
  BusLock lock(bus);
  if (!core_->running) return stopped("fetch", address);
  Topic* topic = bus.find_locked(address.canonical());
  if (topic == nullptr) return std::optional<Delivery>();
  return mem_internal::fetch_locked(bus, core_, *topic, options);
}

absl::StatusOr<std::vector<Letter>> MemProvider::peek(const MailAddress& address, size_t limit) {
  // M-RECV-3: copies only; counts, leases and activity time stay as they were.
  BusState& bus = *core_->bus;
  BusLock lock(bus);
  std::vector<Letter> out;
  Topic* topic = bus.find_locked(address.canonical());
  if (topic == nullptr) return out;
  for (const Letter& letter : topic->queue) {
    if (out.size() >= limit) break;
    out.push_back(letter);
  }
  return out;
}

absl::StatusOr<MailboxStatus> MemProvider::status(const MailAddress& address) {
  BusState& bus = *core_->bus;
  BusLock lock(bus);
  Topic* topic = bus.find_locked(address.canonical());
  if (topic == nullptr) return never_seen(address);
  return mem_internal::status_locked(bus, *topic, core_->running);
}

absl::StatusOr<std::vector<MailboxStatus>> MemProvider::list_status() {
  BusState& bus = *core_->bus;
  BusLock lock(bus);
  std::vector<MailboxStatus> out;
  for (const auto& [address, topic] : bus.topics) {
    out.push_back(mem_internal::status_locked(bus, topic, core_->running));
  }
  return out;
}

absl::StatusOr<uint64_t> MemProvider::recover(const MailAddress& address) {
  // M-ACK-3: only expired leases; idempotent.
  BusState& bus = *core_->bus;
  BusLock lock(bus);
  Topic* topic = bus.find_locked(address.canonical());
  if (topic == nullptr) return 0;
  return mem_internal::reclaim_expired_locked(bus, core_->config, *topic);
}

absl::StatusOr<std::map<std::string, uint64_t>> MemProvider::recover_all() {
  BusState& bus = *core_->bus;
  BusLock lock(bus);
  std::map<std::string, uint64_t> out;
  for (auto& [address, topic] : bus.topics) {
    out[address] = mem_internal::reclaim_expired_locked(bus, core_->config, topic);
  }
  return out;
}

absl::StatusOr<uint64_t> MemProvider::clear() { return options_.bus->clear(); }

absl::StatusOr<std::vector<CopyInfo>> MemProvider::locate(std::string_view message_id) {
  // M-ACK-5: read-only; every copy with this id, each with the key settlement takes.
  BusState& bus = *core_->bus;
  BusLock lock(bus);
  std::vector<CopyInfo> out;
  auto add = [&](const std::string& address, const Letter& letter, uint64_t lease,
                 CopyState state) {
    out.push_back(CopyInfo{CopyKey{address, letter.headers.get(kSendId).value_or(""), lease},
                           letter.id, state});
  };
  for (const auto& [address, topic] : bus.topics) {
    for (const Letter& l : topic.queue) {
      if (l.id == message_id) add(address, l, 0, CopyState::kQueued);
    }
    for (const auto& [due, l] : topic.delayed) {  // back in the mailbox, waiting out a nack delay
      if (l.id == message_id) add(address, l, 0, CopyState::kQueued);
    }
    for (const auto& [send_id, lease] : topic.in_flight) {
      if (lease.letter.id == message_id) {
        add(address, lease.letter, lease.lease_id, CopyState::kInFlight);
      }
    }
    for (const Letter& l : topic.parked) {
      if (l.id == message_id) add(address, l, 0, CopyState::kParked);
    }
  }
  return out;
}

absl::StatusOr<bool> MemProvider::settle(const CopyKey& key, std::string_view disposition) {
  return core_->settle(key, disposition);
}

absl::StatusOr<MailAddress> MemProvider::dead_letter_topic(const MailAddress& address) {
  if (!options_.dead_letter.has_value()) {
    return UnsupportedCapabilityError(kScheme, "dead-letter",
                                      "create the provider with MemOptions.dead_letter set");
  }
  return mem_internal::dead_letter_topic_of(*options_.dead_letter, address);
}

absl::StatusOr<std::vector<Letter>> MemProvider::peek_parked(const MailAddress& address,
                                                             size_t limit) {
  BusState& bus = *core_->bus;
  BusLock lock(bus);
  std::vector<Letter> out;
  Topic* topic = bus.find_locked(address.canonical());
  if (topic == nullptr) return out;
  for (const Letter& letter : topic->parked) {
    if (out.size() >= limit) break;
    out.push_back(letter);
  }
  return out;
}

absl::StatusOr<uint64_t> MemProvider::purge_parked(const MailAddress& address) {
  BusState& bus = *core_->bus;
  BusLock lock(bus);
  Topic* topic = bus.find_locked(address.canonical());
  if (topic == nullptr) return 0;
  uint64_t n = topic->parked.size();
  topic->parked.clear();
  return n;
}

absl::Status MemProvider::wait_idle(absl::Time deadline) {
  BusState& bus = *core_->bus;
  BusLock lock(bus);
  bool idle = bus.mu.AwaitWithDeadline(
      absl::Condition(
          +[](BusState* b) ABSL_NO_THREAD_SAFETY_ANALYSIS { return b->busy == 0; }, &bus),
      deadline);
  if (idle) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("wait_idle: ", bus.busy,
                   " mem deliveries are still queued or running at the deadline; a "
                   "callback may be stuck (see mem.watchdogCancelledCount)"));
}

}  // namespace postal::mail
