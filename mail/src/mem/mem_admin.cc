// MemProvider's admin verbs (mail_admin.h): one handler per verb. Each parses its address (a
// MailboxHost hands on what another proc sent), takes the bus lock and works on mem_state.h.
#include "absl/strings/str_cat.h"
#include "mem_state.h"
#include "postal/mail/mail_admin.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/mem_provider.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace mem_internal {

struct AdminVerbs {
  MemProvider& p;

  CoreState& core() { return *p.core_; }
  BusState& bus() { return *p.core_->bus; }

  // M-RECV-3: copies only; counts, leases and activity time stay as they were.
  // Copies of up to `limit` letters of one of a mailbox's lists, oldest first.
  template <class List>
  absl::StatusOr<std::vector<Letter>> copies(std::string_view address, size_t limit,
                                             List Topic::*list) {
    absl::StatusOr<MailAddress> at = MailAddress::parse(address);
    if (!at.ok()) return at.status();
    BusLock lock(bus());
    std::vector<Letter> out;
    Topic* topic = bus().find_locked(at->canonical());
    if (topic == nullptr) return out;
    for (const Letter& letter : topic->*list) {
      if (out.size() >= limit) break;
      out.push_back(letter);
    }
    return out;
  }

  absl::StatusOr<std::vector<Letter>> operator()(const admin::Peek& v) {
    return copies(v.address, v.limit, &Topic::queue);
  }

  absl::StatusOr<std::vector<MailboxStatus>> operator()(const admin::ListStatus&) {
    BusLock lock(bus());
    std::vector<MailboxStatus> out;
    for (const auto& [address, topic] : bus().topics) {
      out.push_back(status_locked(bus(), topic, core().running));
    }
    return out;
  }

  // M-ACK-3: only expired leases; idempotent.
  absl::StatusOr<uint64_t> operator()(const admin::Recover& v) {
    absl::StatusOr<MailAddress> at = MailAddress::parse(v.address);
    if (!at.ok()) return at.status();
    BusLock lock(bus());
    Topic* topic = bus().find_locked(at->canonical());
    if (topic == nullptr) return 0;
    return reclaim_expired_locked(bus(), core().config, *topic);
  }

  absl::StatusOr<std::map<std::string, uint64_t>> operator()(const admin::RecoverAll&) {
    BusLock lock(bus());
    std::map<std::string, uint64_t> out;
    for (auto& [address, topic] : bus().topics) {
      out[address] = reclaim_expired_locked(bus(), core().config, topic);
    }
    return out;
  }

  absl::StatusOr<uint64_t> operator()(const admin::Clear&) { return p.options_.bus->clear(); }

  // M-ACK-5: read-only; every copy with this id, each with the key settlement takes.
  absl::StatusOr<std::vector<CopyInfo>> operator()(const admin::Locate& v) {
    BusLock lock(bus());
    std::vector<CopyInfo> out;
    auto add = [&](const std::string& address, const Letter& letter, uint64_t lease,
                   CopyState state) {
      out.push_back(CopyInfo{CopyKey{address, letter.headers.get(kSendId).value_or(""), lease},
                             letter.id, state});
    };
    for (const auto& [address, topic] : bus().topics) {
      for (const Letter& l : topic.queue) {
        if (l.id == v.message_id) add(address, l, 0, CopyState::kQueued);
      }
      for (const auto& [due, l] : topic.delayed) {  // back in the mailbox, waiting out a nack delay
        if (l.id == v.message_id) add(address, l, 0, CopyState::kQueued);
      }
      for (const auto& [send_id, lease] : topic.in_flight) {
        if (lease.letter.id == v.message_id) {
          add(address, lease.letter, lease.lease_id, CopyState::kInFlight);
        }
      }
      for (const Letter& l : topic.parked) {
        if (l.id == v.message_id) add(address, l, 0, CopyState::kParked);
      }
    }
    return out;
  }

  absl::StatusOr<bool> operator()(const admin::SettleKey& v) {
    absl::StatusOr<MailAddress> at = MailAddress::parse(v.key.address);
    if (!at.ok()) return at.status();
    CopyKey key = v.key;
    key.address = at->canonical();
    return core().settle(key, v.disposition);
  }

  absl::StatusOr<MailAddress> operator()(const admin::DeadLetterTopic& v) {
    absl::StatusOr<MailAddress> at = MailAddress::parse(v.address);
    if (!at.ok()) return at.status();
    if (!p.options_.dead_letter.has_value()) {
      return UnsupportedCapabilityError(MemProvider::kScheme, "dead-letter",
                                        "create the provider with MemOptions.dead_letter set");
    }
    return dead_letter_topic_of(*p.options_.dead_letter, *at);
  }

  absl::StatusOr<std::vector<Letter>> operator()(const admin::PeekParked& v) {
    return copies(v.address, v.limit, &Topic::parked);
  }

  absl::StatusOr<uint64_t> operator()(const admin::PurgeParked& v) {
    absl::StatusOr<MailAddress> at = MailAddress::parse(v.address);
    if (!at.ok()) return at.status();
    BusLock lock(bus());
    Topic* topic = bus().find_locked(at->canonical());
    if (topic == nullptr) return 0;
    uint64_t n = topic->parked.size();
    topic->parked.clear();
    return n;
  }

  // ---- retained mailboxes (mem_retained.cc) ----
  absl::StatusOr<CreateResult> operator()(const admin::CreateMailbox& v) {
    absl::StatusOr<MailAddress> at = MailAddress::parse(v.address);
    if (!at.ok()) return at.status();
    return p.create_mailbox(*at, v.spec);
  }

  absl::StatusOr<CreateResult> operator()(const admin::CreatePrivateMailbox& v) {
    return p.create_private_mailbox(v.spec);
  }

  absl::StatusOr<admin::Done> operator()(const admin::DeleteMailbox& v) {
    absl::StatusOr<MailAddress> at = MailAddress::parse(v.address);
    if (!at.ok()) return at.status();
    if (absl::Status s = p.delete_mailbox(*at); !s.ok()) return s;
    return admin::Done{};
  }

  absl::StatusOr<std::vector<MailAddress>> operator()(const admin::ListPublic&) {
    absl::StatusOr<std::vector<std::string>> listed = p.list_public();
    if (!listed.ok()) return listed.status();
    std::vector<MailAddress> out;
    for (const std::string& a : *listed) {
      absl::StatusOr<MailAddress> parsed = MailAddress::parse(a);
      if (!parsed.ok()) return parsed.status();
      out.push_back(*std::move(parsed));
    }
    return out;
  }

  absl::StatusOr<bool> operator()(const admin::Erase& v) {
    absl::StatusOr<MailAddress> at = MailAddress::parse(v.address);
    if (!at.ok()) return at.status();
    return p.erase(*at, v.seq);
  }

  // ---- mailbox policies (M-RETRY-6, mem_policy.cc) ----
  absl::StatusOr<MailAddress> queue_mailbox(std::string_view address, std::string_view verb) {
    absl::StatusOr<MailAddress> at = MailAddress::parse(address);
    if (!at.ok()) return at.status();
    if (p.retained_name(*at)) {
      return absl::InvalidArgumentError(absl::StrCat(
          sv(verb), " ", at->canonical(),
          ": a retained mailbox has no redelivery policy (its store keeps every message; erase "
          "settles it); policies are for queue mailboxes"));
    }
    return at;
  }

  absl::StatusOr<admin::Done> operator()(const admin::SetPolicy& v) {
    absl::StatusOr<MailAddress> at = queue_mailbox(v.address, admin::SetPolicy::kName);
    if (!at.ok()) return at.status();
    if (absl::Status s = v.policy.validate(); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("set_policy ", at->canonical(), ": ",
                                                 s.message(), "; the policy is unchanged"));
    }
    BusLock lock(bus());
    if (v.policy.empty()) {
      bus().policies.erase(at->canonical());
    } else {
      bus().policies[at->canonical()] = v.policy;
    }
    return admin::Done{};
  }

  absl::StatusOr<MailboxPolicy> operator()(const admin::GetPolicy& v) {
    absl::StatusOr<MailAddress> at = queue_mailbox(v.address, admin::GetPolicy::kName);
    if (!at.ok()) return at.status();
    BusLock lock(bus());
    auto it = bus().policies.find(at->canonical());
    return it == bus().policies.end() ? MailboxPolicy{} : it->second;
  }
};

}  // namespace mem_internal

absl::StatusOr<AdminResult> MemProvider::run(const AdminRequest& request) {
  mem_internal::AdminVerbs verbs{*this};
  return dispatch_admin(request, kScheme, verbs);
}

}  // namespace postal::mail
