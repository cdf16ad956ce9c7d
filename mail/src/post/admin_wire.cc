// admin_wire: encoding, decoding and address mapping of the admin verbs (admin_wire.h).
#include "admin_wire.h"

#include <cstdint>
#include <limits>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "cereal/types/map.hpp"
#include "host_replies.h"
#include "postal/wire/absl_compat.h"
#include "postal/wire/codec.h"

namespace postal::mail {

// ---- the vocabulary of results, for cereal (found by ADL) -------------------------------------

namespace {

constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max();

int64_t ns_of(absl::Duration d) {
  return d == absl::InfiniteDuration() ? kInfinite : absl::ToInt64Nanoseconds(d);
}
absl::Duration duration_of(int64_t ns) {
  return ns == kInfinite ? absl::InfiniteDuration() : absl::Nanoseconds(ns);
}
int64_t ns_of(absl::Time t) {
  if (t == absl::InfiniteFuture()) return kInfinite;
  if (t == absl::InfinitePast()) return std::numeric_limits<int64_t>::min();
  return absl::ToUnixNanos(t);
}
absl::Time time_of(int64_t ns) {
  if (ns == kInfinite) return absl::InfiniteFuture();
  if (ns == std::numeric_limits<int64_t>::min()) return absl::InfinitePast();
  return absl::FromUnixNanos(ns);
}

}  // namespace

template <class A>
void save(A& a, const Letter& l) {
  absl::StatusOr<WireLetter> w = WireLetter::of(l);
  if (!w.ok()) throw std::runtime_error(std::string(w.status().message()));
  a(*w);
}
template <class A>
void load(A& a, Letter& l) {
  WireLetter w;
  a(w);
  l = w.to_letter();  // maps `to` and the dead-letter topic onto the post scheme
}

template <class A>
void save(A& a, const MailboxStatus& s) {
  a(WireMailboxStatus::of(s));
}
template <class A>
void load(A& a, MailboxStatus& s) {
  WireMailboxStatus w;
  a(w);
  s = w.to_status();  // mem.* extension keys read as post.*
}

template <class A>
void save(A& a, const CopyInfo& c) {
  a(c.key.address, c.key.send_id, c.key.lease_id, c.message_id, static_cast<uint8_t>(c.state));
}
template <class A>
void load(A& a, CopyInfo& c) {
  uint8_t state = 0;
  a(c.key.address, c.key.send_id, c.key.lease_id, c.message_id, state);
  c.state = static_cast<CopyState>(state);
}

template <class A>
void save(A& a, const MailboxSpec& m) {
  a(m.name, m.is_public, ns_of(m.ttl), m.max_messages, m.max_message_bytes, m.durable_all);
}
template <class A>
void load(A& a, MailboxSpec& m) {
  int64_t ttl = 0;
  a(m.name, m.is_public, ttl, m.max_messages, m.max_message_bytes, m.durable_all);
  m.ttl = duration_of(ttl);
}

template <class A>
void save(A& a, const MailboxInfo& m) {
  a(m.id, m.is_public, ns_of(m.created_at), ns_of(m.expires_at), m.max_messages,
    m.max_message_bytes, m.durable_all);
}
template <class A>
void load(A& a, MailboxInfo& m) {
  int64_t created = 0, expires = 0;
  a(m.id, m.is_public, created, expires, m.max_messages, m.max_message_bytes, m.durable_all);
  m.created_at = time_of(created);
  m.expires_at = time_of(expires);
}

template <class A>
void serialize(A& a, CreateResult& r) {
  a(r.mailbox, r.created, r.address);
}

template <class A>
void save(A& a, const RetryPolicy& p) {
  a(p.max_attempts, ns_of(p.base_delay), ns_of(p.max_delay), p.factor, p.jitter);
}
template <class A>
void load(A& a, RetryPolicy& p) {
  int64_t base = 0, max = 0;
  a(p.max_attempts, base, max, p.factor, p.jitter);
  p.base_delay = duration_of(base);
  p.max_delay = duration_of(max);
}

template <class A>
void save(A& a, const MailboxPolicy& p) {
  std::optional<int64_t> settle;
  if (p.settle_timeout) settle = ns_of(*p.settle_timeout);
  a(p.retry, p.max_delivery_rounds, p.dead_letter, settle);
}
template <class A>
void load(A& a, MailboxPolicy& p) {
  std::optional<int64_t> settle;
  a(p.retry, p.max_delivery_rounds, p.dead_letter, settle);
  p.settle_timeout.reset();
  if (settle) p.settle_timeout = duration_of(*settle);
}

namespace post_internal {
namespace {

// ---- results whose wire form differs (addresses cross as canonical text) ----------------------

template <class R>
struct Form {
  using Wire = R;
  static const R& to(const R& r) { return r; }
  static absl::StatusOr<R> from(Wire w) { return w; }
};
template <>
struct Form<MailAddress> {
  using Wire = std::string;
  static std::string to(const MailAddress& a) { return a.canonical(); }
  static absl::StatusOr<MailAddress> from(const std::string& w) { return MailAddress::parse(w); }
};
template <>
struct Form<std::vector<MailAddress>> {
  using Wire = std::vector<std::string>;
  static Wire to(const std::vector<MailAddress>& v) {
    Wire out;
    for (const MailAddress& a : v) out.push_back(a.canonical());
    return out;
  }
  static absl::StatusOr<std::vector<MailAddress>> from(const Wire& w) {
    std::vector<MailAddress> out;
    for (const std::string& text : w) {
      absl::StatusOr<MailAddress> a = MailAddress::parse(text);
      if (!a.ok()) return a.status();
      out.push_back(*std::move(a));
    }
    return out;
  }
};

// ---- a result's addresses onto the post scheme (letters: WireLetter::to_letter) ---------------

void to_post(std::string& address) { address = mem_to_post(address); }
void to_post(MailboxStatus& s) { to_post(s.address); }
void to_post(CopyInfo& c) { to_post(c.key.address); }
void to_post(CreateResult& r) { to_post(r.address); }
void to_post(MailAddress& a) {
  absl::StatusOr<MailAddress> mapped = MailAddress::parse(mem_to_post(a.canonical()));
  if (mapped.ok()) a = *std::move(mapped);
}
template <class T>
void to_post(T&) {}  // no address in it
template <class T>
void to_post(std::vector<T>& v) {
  for (T& x : v) to_post(x);
}
template <class V>
void to_post(std::map<std::string, V>& m) {  // result maps are keyed by address
  std::map<std::string, V> out;
  for (auto& [k, v] : m) out.emplace(mem_to_post(k), std::move(v));
  m.swap(out);
}

// ---- decoding by name and by index ----------------------------------------------------------

template <size_t I = 0>
absl::StatusOr<AdminRequest> decode_request(std::string_view name, std::string_view bytes) {
  if constexpr (I == admin::AdminVerbs::kCount) {
    return absl::InvalidArgumentError(absl::StrCat(
        "admin verb '", sv(name), "' is unknown to this mailbox host (a newer caller?)"));
  } else {
    using V = std::variant_alternative_t<I, AdminRequest>;
    if (name != V::kName) return decode_request<I + 1>(name, bytes);
    absl::StatusOr<V> verb = wire::decode<V>(bytes, V::kName);
    if (!verb.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("malformed admin request '", sv(name),
                                                     "': ", verb.status().message()));
    }
    return AdminRequest(std::in_place_index<I>, *std::move(verb));
  }
}

template <size_t I = 0>
absl::StatusOr<AdminResult> decode_result(size_t index, std::string_view bytes) {
  if constexpr (I == admin::AdminVerbs::kCount) {
    return absl::InternalError("admin: a result for no known verb");
  } else {
    if (index != I) return decode_result<I + 1>(index, bytes);
    using R = std::variant_alternative_t<I, AdminResult>;
    using V = std::variant_alternative_t<I, AdminRequest>;
    absl::StatusOr<typename Form<R>::Wire> wire =
        wire::decode<typename Form<R>::Wire>(bytes, V::kName);
    if (!wire.ok()) return wire.status();
    absl::StatusOr<R> r = Form<R>::from(*std::move(wire));
    if (!r.ok()) return r.status();
    return AdminResult(std::in_place_index<I>, *std::move(r));
  }
}

MailAdminReply failed_admin(const absl::Status& status) {
  MailAdminReply r;
  r.status = WireStatus::of(status);
  return r;
}

}  // namespace

absl::StatusOr<MailAdminCall> admin_call(const AdminRequest& request) {
  return std::visit(
      [](const auto& verb) -> absl::StatusOr<MailAdminCall> {
        using V = std::decay_t<decltype(verb)>;
        absl::StatusOr<std::string> bytes = wire::encode(verb, V::kName);
        if (!bytes.ok()) return bytes.status();
        return MailAdminCall{std::string(V::kName), *std::move(bytes), {}};
      },
      request);
}

absl::StatusOr<AdminResult> admin_result_of(const AdminRequest& request,
                                            const MailAdminReply& reply) {
  if (reply.status.code != 0) return reply.status.to_status();
  return decode_result(request.index(), reply.result);
}

MailAdminReply serve_admin(MailAdmin& admin, const MailAdminCall& call) {
  absl::StatusOr<AdminRequest> request = decode_request(call.verb, call.request);
  if (!request.ok()) return failed_admin(request.status());
  // The target onto the mem scheme (M-ADDR-3: the same identity); one that does not parse fails
  // here, before anything runs.
  absl::Status mapped = std::visit(
      [](auto& verb) -> absl::Status {
        std::string* at = admin::target(verb);
        if (at == nullptr) return absl::OkStatus();
        absl::StatusOr<MailAddress> mem = mem_address(*at);
        if (!mem.ok()) return mem.status();
        *at = mem->canonical();
        return absl::OkStatus();
      },
      *request);
  if (!mapped.ok()) return failed_admin(mapped);
  absl::StatusOr<AdminResult> result = admin.run(*request);
  if (!result.ok()) return failed_admin(result.status());
  absl::StatusOr<std::string> bytes = std::visit(
      [](auto& r) -> absl::StatusOr<std::string> {
        using R = std::decay_t<decltype(r)>;
        to_post(r);
        return wire::encode(Form<R>::to(r), "an admin result");
      },
      *result);
  if (!bytes.ok()) return failed_admin(bytes.status());
  MailAdminReply r;
  r.result = *std::move(bytes);
  return r;
}

}  // namespace post_internal
}  // namespace postal::mail
