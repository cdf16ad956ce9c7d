// mail_admin.h — `MailAdmin`, a provider's optional verbs, as typed requests.
//
// A MailProvider (mail_provider.h) has only the verbs every provider serves (post, subscribe,
// fetch, status, …). Everything else — reading a queue without consuming it, reclaiming leases,
// dead letters, retained mailboxes, mailbox policies — is an *admin verb*: one struct below,
// named after what it does, holding its arguments and naming its `Result`. A provider that
// serves any of them returns a MailAdmin from `MailProvider::admin()`, whose one method takes any
// verb and answers with that verb's result:
//
//   absl::StatusOr<std::vector<Letter>> parked =
//       run_admin(provider, admin::PeekParked{.address = "mem://a@b/inbox", .limit = 10});
//
// PostOffice offers each verb as a method (post_office.h), routed and checked there: by then
// every `address` is canonical and of the provider's scheme, and the verb's `kCapability` was
// declared by `can()`. A provider must still refuse what it cannot do with a status, never
// crash: over `post` a verb arrives from another proc (M-ADDR-2 is checked again there).
//
// Each verb also says how it crosses a process boundary, so a provider that forwards (the `post`
// provider to its MailboxHost) needs no code per verb:
//   * `kName`: its name on the wire and in errors (the PostOffice method's);
//   * `kCapability`: what `can()` must declare for it;
//   * `kNeedsRunning`: PostOffice refuses it while stopped (FailedPrecondition);
//   * `serialize`: its fields, for cereal (results: post/admin_wire.h);
//   * addresses: a verb's target is its `address` field (or `key.address`), a canonical mail
//     address; results name addresses as MailAddress, MailboxStatus::address, CopyKey::address,
//     CreateResult::address, a Letter's `to`, and the keys of a map. A forwarding provider maps
//     exactly those (post: mem:// ↔ post://).
//
// Adding a verb: its struct here (and in `AdminVerbs`), its implementation in the providers that
// serve it (mem: mem_admin.cc), and, when users call it, a PostOffice method and a CLI verb.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "postal/mail/capability.h"
#include "postal/mail/delivery.h"
#include "postal/mail/letter.h"
#include "postal/mail/mail_address.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/mail_status.h"
#include "postal/mail/mail_store.h"
#include "postal/mail/mailbox_policy.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {

enum class CopyState : uint8_t { kQueued, kInFlight, kParked };
std::string_view to_string(CopyState state);  // "queued", "in-flight", "parked"

// One copy found by admin::Locate (M-ACK-5).
struct CopyInfo {
  CopyKey key;  // lease_id != 0 only while in flight
  std::string message_id;
  CopyState state = CopyState::kQueued;
};

namespace admin {

// The result of a verb that answers only with its status.
struct Done {
  bool operator==(const Done&) const = default;
  template <class A>
  void serialize(A&) {}
};

// M-RECV-3: read-only copies of up to `limit` queued letters, oldest first.
struct Peek {
  using Result = std::vector<Letter>;
  static constexpr std::string_view kName = "peek";
  static constexpr Capability kCapability = Capability::kPeek;
  static constexpr bool kNeedsRunning = false;
  std::string address;
  uint64_t limit = 1;
  template <class A>
  void serialize(A& a) {
    a(address, limit);
  }
};

// M-STAT-2: the status of every mailbox the provider knows.
struct ListStatus {
  using Result = std::vector<MailboxStatus>;
  static constexpr std::string_view kName = "list_status";
  static constexpr Capability kCapability = Capability::kEnumerate;
  static constexpr bool kNeedsRunning = false;
  template <class A>
  void serialize(A&) {}
};

// M-ACK-3: reclaims the expired leases of one mailbox; how many.
struct Recover {
  using Result = uint64_t;
  static constexpr std::string_view kName = "recover";
  static constexpr Capability kCapability = Capability::kRecover;
  static constexpr bool kNeedsRunning = true;
  std::string address;
  template <class A>
  void serialize(A& a) {
    a(address);
  }
};

// M-ACK-3: reclaims expired leases everywhere; how many, by mailbox address.
struct RecoverAll {
  using Result = std::map<std::string, uint64_t>;
  static constexpr std::string_view kName = "recover_all";
  static constexpr Capability kCapability = Capability::kRecover;
  static constexpr bool kNeedsRunning = true;
  template <class A>
  void serialize(A&) {}
};

// Drops the whole backlog (queued and in-flight copies, never subscriptions); how many.
struct Clear {
  using Result = uint64_t;
  static constexpr std::string_view kName = "clear";
  static constexpr Capability kCapability = Capability::kClear;
  static constexpr bool kNeedsRunning = true;
  template <class A>
  void serialize(A&) {}
};

// M-ACK-5: every copy with this sender-chosen id. Read-only.
struct Locate {
  using Result = std::vector<CopyInfo>;
  static constexpr std::string_view kName = "locate";
  static constexpr Capability kCapability = Capability::kLocate;
  static constexpr bool kNeedsRunning = false;
  std::string message_id;
  template <class A>
  void serialize(A& a) {
    a(message_id);
  }
};

// M-ACK-5: settles a lease by its key; whether it took effect.
struct SettleKey {
  using Result = bool;
  static constexpr std::string_view kName = "settle";
  static constexpr Capability kCapability = Capability::kSettleByKey;
  static constexpr bool kNeedsRunning = true;
  CopyKey key;
  std::string disposition;
  template <class A>
  void serialize(A& a) {
    a(key.address, key.send_id, key.lease_id, disposition);
  }
};

// M-DLQ-3: where a give-up from `address` lands (the mailbox itself at the nesting cap).
struct DeadLetterTopic {
  using Result = MailAddress;
  static constexpr std::string_view kName = "dead_letter_topic";
  static constexpr Capability kCapability = Capability::kDeadLetter;
  static constexpr bool kNeedsRunning = false;
  std::string address;
  template <class A>
  void serialize(A& a) {
    a(address);
  }
};

// M-DLQ-2: read-only copies of up to `limit` parked records, oldest first.
struct PeekParked {
  using Result = std::vector<Letter>;
  static constexpr std::string_view kName = "peek_parked";
  static constexpr Capability kCapability = Capability::kParked;
  static constexpr bool kNeedsRunning = false;
  std::string address;
  uint64_t limit = 100;
  template <class A>
  void serialize(A& a) {
    a(address, limit);
  }
};

// M-DLQ-2: removes the parked records of a mailbox; how many.
struct PurgeParked {
  using Result = uint64_t;
  static constexpr std::string_view kName = "purge_parked";
  static constexpr Capability kCapability = Capability::kParked;
  static constexpr bool kNeedsRunning = true;
  std::string address;
  template <class A>
  void serialize(A& a) {
    a(address);
  }
};

// M-KIND-2: a public retained mailbox at `address` (`spec.name` is ignored: the address names it).
struct CreateMailbox {
  using Result = CreateResult;
  static constexpr std::string_view kName = "create_mailbox";
  static constexpr Capability kCapability = Capability::kRetained;
  static constexpr bool kNeedsRunning = true;
  std::string address;
  MailboxSpec spec;
  template <class A>
  void serialize(A& a) {
    a(address, spec);
  }
};

// M-BOX-4: a private retained mailbox; the store draws its id and the result's `address`
// (`<scheme>://<id>@private`) is its only name. `spec.name` and `spec.is_public` are ignored.
struct CreatePrivateMailbox {
  using Result = CreateResult;
  static constexpr std::string_view kName = "create_private_mailbox";
  static constexpr Capability kCapability = Capability::kRetained;
  static constexpr bool kNeedsRunning = false;
  MailboxSpec spec;
  template <class A>
  void serialize(A& a) {
    a(spec);
  }
};

struct DeleteMailbox {
  using Result = Done;
  static constexpr std::string_view kName = "delete_mailbox";
  static constexpr Capability kCapability = Capability::kRetained;
  static constexpr bool kNeedsRunning = true;
  std::string address;
  template <class A>
  void serialize(A& a) {
    a(address);
  }
};

// M-BOX-4: the public retained mailboxes, sorted.
struct ListPublic {
  using Result = std::vector<MailAddress>;
  static constexpr std::string_view kName = "list_public";
  static constexpr Capability kCapability = Capability::kRetained;
  static constexpr bool kNeedsRunning = false;
  template <class A>
  void serialize(A&) {}
};

// M-RECV-5: removes the retained message `seq` (its deliveries' `mbx-seq`); whether it existed.
struct Erase {
  using Result = bool;
  static constexpr std::string_view kName = "erase";
  static constexpr Capability kCapability = Capability::kRetained;
  static constexpr bool kNeedsRunning = true;
  std::string address;
  uint64_t seq = 0;
  template <class A>
  void serialize(A& a) {
    a(address, seq);
  }
};

// M-RETRY-6: replaces a queue mailbox's policy (mailbox_policy.h); an empty one clears it. A bad
// policy fails with InvalidArgument and changes nothing.
struct SetPolicy {
  using Result = Done;
  static constexpr std::string_view kName = "set_policy";
  static constexpr Capability kCapability = Capability::kPolicy;
  static constexpr bool kNeedsRunning = true;
  std::string address;
  MailboxPolicy policy;
  template <class A>
  void serialize(A& a) {
    a(address, policy);
  }
};

// M-RETRY-6: a queue mailbox's policy as set (empty: it inherits everything).
struct GetPolicy {
  using Result = MailboxPolicy;
  static constexpr std::string_view kName = "policy";
  static constexpr Capability kCapability = Capability::kPolicy;
  static constexpr bool kNeedsRunning = false;
  std::string address;
  template <class A>
  void serialize(A& a) {
    a(address);
  }
};

// Every verb, in one list: the request and result variants below follow it.
template <class... Verbs>
struct VerbList {
  using Request = std::variant<Verbs...>;
  using Result = std::variant<typename Verbs::Result...>;
  static constexpr size_t kCount = sizeof...(Verbs);
};
using AdminVerbs = VerbList<Peek, ListStatus, Recover, RecoverAll, Clear, Locate, SettleKey,
                            DeadLetterTopic, PeekParked, PurgeParked, CreateMailbox,
                            CreatePrivateMailbox, DeleteMailbox, ListPublic, Erase, SetPolicy,
                            GetPolicy>;

}  // namespace admin

using AdminRequest = admin::AdminVerbs::Request;
// Alternative i holds the result of AdminRequest's alternative i (several verbs share a type,
// so results are told apart by index, never by type).
using AdminResult = admin::AdminVerbs::Result;

namespace admin {

template <class V, class Variant>
struct IndexOf;
template <class V, class... Ts>
struct IndexOf<V, std::variant<Ts...>> {
  static constexpr size_t value = [] {
    constexpr bool same[] = {std::is_same_v<V, Ts>...};
    for (size_t i = 0; i < sizeof...(Ts); ++i) {
      if (same[i]) return i;
    }
    return sizeof...(Ts);
  }();
};

// A verb of AdminVerbs.
template <class V>
concept Verb = IndexOf<V, AdminRequest>::value < AdminVerbs::kCount;
// A verb aimed at one mailbox (its `address`, or its key's).
template <class V>
concept Targeted = Verb<V> && (requires(V v) { v.address; } || requires(V v) { v.key.address; });

template <Verb V>
inline constexpr size_t kIndex = IndexOf<V, AdminRequest>::value;

// The address a verb targets (its `address`, or its key's), or null for a provider-wide verb.
template <Verb V>
std::string* target(V& verb) {
  if constexpr (requires { verb.key.address; }) {
    return &verb.key.address;
  } else if constexpr (requires { verb.address; }) {
    return &verb.address;
  } else {
    return nullptr;
  }
}

}  // namespace admin

template <admin::Verb V>
AdminResult admin_result(typename V::Result result) {
  return AdminResult(std::in_place_index<admin::kIndex<V>>, std::move(result));
}

class MailAdmin {
 public:
  virtual ~MailAdmin() = default;
  // Runs one verb. On success the result holds the alternative of the request's index.
  virtual absl::StatusOr<AdminResult> run(const AdminRequest& request) = 0;
};

// A verb's typed answer from `admin` (UnsupportedCapability naming `scheme` when null).
template <admin::Verb V>
absl::StatusOr<typename V::Result> run_admin(MailAdmin* admin, std::string_view scheme, V verb) {
  if (admin == nullptr) {
    return UnsupportedCapabilityError(scheme, to_string(V::kCapability), V::kName);
  }
  absl::StatusOr<AdminResult> r = admin->run(AdminRequest(std::move(verb)));
  if (!r.ok()) return r.status();
  if (r->index() != admin::kIndex<V>) {
    return absl::InternalError(
        absl::StrCat("admin ", sv(V::kName), ": the provider answered another verb"));
  }
  return std::get<admin::kIndex<V>>(*std::move(r));
}

// For providers: runs `request` through `handler`, which has one overload per verb it serves,
// each returning absl::StatusOr<V::Result>; a verb without one fails UnsupportedCapability.
template <class Handler>
absl::StatusOr<AdminResult> dispatch_admin(const AdminRequest& request, std::string_view scheme,
                                           Handler& handler) {
  return std::visit(
      [&](const auto& verb) -> absl::StatusOr<AdminResult> {
        using V = std::decay_t<decltype(verb)>;
        if constexpr (requires { handler(verb); }) {
          absl::StatusOr<typename V::Result> r = handler(verb);
          if (!r.ok()) return r.status();
          return admin_result<V>(*std::move(r));
        } else {
          return UnsupportedCapabilityError(scheme, to_string(V::kCapability), V::kName);
        }
      },
      request);
}

}  // namespace postal::mail
