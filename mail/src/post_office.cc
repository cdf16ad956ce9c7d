#include "postal/mail/post_office.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

std::string scheme_key(std::string_view scheme) {
  if (scheme.ends_with(':')) scheme.remove_suffix(1);
  return absl::AsciiStrToLower(sv(scheme));
}

}  // namespace

PostOffice::~PostOffice() { stop(); }

absl::Status PostOffice::register_provider(std::unique_ptr<MailProvider> provider) {
  if (provider == nullptr) {
    return absl::InvalidArgumentError(
        "register_provider: the provider is null; pass one made "
        "by e.g. MemProvider::create()");
  }
  std::string scheme = scheme_key(provider->scheme());
  MailProvider* raw = provider.get();
  bool start_now = false;
  {
    absl::MutexLock lock(&mu_);
    if (providers_.contains(scheme)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "register_provider: scheme '", scheme,
          "' already has a provider; one provider per scheme (register it on one PostOffice)"));
    }
    providers_.emplace(scheme, std::move(provider));
    start_now = running_;
  }
  if (start_now) return raw->start();
  return absl::OkStatus();
}

MailProvider* PostOffice::provider(std::string_view scheme) const {
  absl::MutexLock lock(&mu_);
  auto it = providers_.find(scheme_key(scheme));
  return it == providers_.end() ? nullptr : it->second.get();
}

std::vector<MailProvider*> PostOffice::providers() const {
  absl::MutexLock lock(&mu_);
  std::vector<MailProvider*> out;
  for (const auto& [scheme, p] : providers_) out.push_back(p.get());
  return out;
}

absl::Status PostOffice::start() {
  {
    absl::MutexLock lock(&mu_);
    running_ = true;
  }
  for (MailProvider* p : providers()) {
    absl::Status s = p->start();
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("start: provider '", sv(p->scheme()),
                                                 "' failed to start: ", s.message()));
    }
  }
  return absl::OkStatus();
}

void PostOffice::stop(const StopOptions& options) {
  {
    absl::MutexLock lock(&mu_);
    running_ = false;
  }
  // Providers are stopped without the office's lock: stopping waits for running callbacks,
  // which may call back into the office.
  for (MailProvider* p : providers()) p->stop(options);
}

bool PostOffice::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

absl::Status PostOffice::check_running(std::string_view verb) const {
  if (running()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(sv(verb), ": the PostOffice is stopped; call start() first"));
}

absl::StatusOr<PostOffice::Route> PostOffice::route(std::string_view address, Capability op,
                                                    std::string_view verb,
                                                    bool needs_running) const {
  // M-ADDR-2: the address is validated before anything else, at every entry point.
  absl::StatusOr<MailAddress> parsed = MailAddress::parse(address);
  if (!parsed.ok()) return parsed.status();
  if (needs_running) {
    if (absl::Status s = check_running(verb); !s.ok()) return s;
  }
  MailProvider* p = provider(parsed->scheme());
  if (p == nullptr) return UnknownSchemeError(parsed->scheme(), parsed->canonical());
  if (!p->can(op, &*parsed)) {
    return UnsupportedCapabilityError(p->scheme(), to_string(op),
                                      absl::StrCat(sv(verb), " ", parsed->canonical()));
  }
  return Route{*std::move(parsed), p};
}

absl::StatusOr<MailProvider*> PostOffice::provider_for(std::string_view scheme, Capability op,
                                                        std::string_view verb,
                                                        bool needs_running) const {
  if (needs_running) {
    if (absl::Status s = check_running(verb); !s.ok()) return s;
  }
  MailProvider* p = provider(scheme);
  if (p == nullptr) return UnknownSchemeError(scheme, absl::StrCat(sv(scheme), ":"));
  if (!p->can(op)) return UnsupportedCapabilityError(p->scheme(), to_string(op), verb);
  return p;
}

absl::StatusOr<PostReceipt> PostOffice::post(std::string_view address, Letter letter) {
  absl::StatusOr<Route> r = route(address, Capability::kPost, "post", true);
  if (!r.ok()) return r.status();
  return r->provider->post(r->address, std::move(letter));
}

void PostOffice::post_async(std::string_view address, Letter letter, MailProvider::PostDone done) {
  absl::StatusOr<Route> r = route(address, Capability::kPost, "post", true);
  if (!r.ok()) return std::move(done)(r.status());
  r->provider->post_async(r->address, std::move(letter), std::move(done));
}

absl::StatusOr<Subscription> PostOffice::subscribe(std::string_view address, MailHandler handler,
                                                   const SubscribeOptions& options) {
  absl::StatusOr<Route> r = route(address, Capability::kSubscribe, "subscribe", true);
  if (!r.ok()) return r.status();
  if (!handler) {
    return absl::InvalidArgumentError(
        absl::StrCat("subscribe ", r->address.canonical(), ": the handler is empty"));
  }
  return r->provider->subscribe(r->address, std::move(handler), options);
}

absl::StatusOr<std::optional<Delivery>> PostOffice::fetch(std::string_view address,
                                                          const FetchOptions& options) {
  Capability op = options.ack == AckMode::kManual ? Capability::kManualAck : Capability::kFetch;
  absl::StatusOr<Route> r = route(address, op, "fetch", true);
  if (!r.ok()) return r.status();
  if (options.ack_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fetch ", r->address.canonical(), ": ack_timeout is negative (",
        sv(absl::FormatDuration(options.ack_timeout)),
        "); use a positive lease, or absl::ZeroDuration() for a lease that never expires"));
  }
  return r->provider->fetch(r->address, options);
}

absl::StatusOr<std::vector<Delivery>> PostOffice::fetch_batch(std::string_view address,
                                                              const FetchOptions& options) {
  Capability op = options.ack == AckMode::kManual ? Capability::kManualAck : Capability::kFetch;
  absl::StatusOr<Route> r = route(address, op, "fetch", true);
  if (!r.ok()) return r.status();
  if (options.ack_timeout < absl::ZeroDuration() || options.max_wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fetch ", r->address.canonical(), ": ack_timeout and max_wait must not be negative"));
  }
  if (options.max_messages == 0 || options.max_messages > kMaxFetchBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("fetch ", r->address.canonical(), ": max_messages is ",
                     options.max_messages, "; ask for 1 to ", kMaxFetchBatch, " copies"));
  }
  return r->provider->fetch_batch(r->address, options);
}

absl::StatusOr<CreateResult> PostOffice::create_mailbox(std::string_view address,
                                                        MailboxSpec spec) {
  return admin(admin::CreateMailbox{std::string(address), std::move(spec)});
}

absl::StatusOr<CreateResult> PostOffice::create_private_mailbox(std::string_view scheme,
                                                                MailboxSpec spec) {
  return admin(scheme, admin::CreatePrivateMailbox{std::move(spec)});
}

absl::Status PostOffice::delete_mailbox(std::string_view address) {
  return admin(admin::DeleteMailbox{std::string(address)}).status();
}

absl::StatusOr<std::vector<std::string>> PostOffice::list_public(std::string_view scheme) {
  absl::StatusOr<std::vector<MailAddress>> listed = admin(scheme, admin::ListPublic{});
  if (!listed.ok()) return listed.status();
  std::vector<std::string> out;
  out.reserve(listed->size());
  for (const MailAddress& a : *listed) out.push_back(a.canonical());
  return out;
}

absl::StatusOr<bool> PostOffice::erase(std::string_view address, uint64_t seq) {
  return admin(admin::Erase{std::string(address), seq});
}

absl::Status PostOffice::set_policy(std::string_view address, const MailboxPolicy& policy) {
  return admin(admin::SetPolicy{std::string(address), policy}).status();
}

absl::StatusOr<MailboxPolicy> PostOffice::policy(std::string_view address) {
  return admin(admin::GetPolicy{std::string(address)});
}

absl::StatusOr<std::vector<Letter>> PostOffice::peek(std::string_view address, size_t limit) {
  return admin(admin::Peek{std::string(address), limit});
}

absl::StatusOr<MailboxStatus> PostOffice::status(std::string_view address) {
  absl::StatusOr<MailAddress> parsed = MailAddress::parse(address);
  if (!parsed.ok()) return parsed.status();
  MailProvider* p = provider(parsed->scheme());
  if (p == nullptr) return UnknownSchemeError(parsed->scheme(), parsed->canonical());
  if (!p->can(Capability::kStatus, &*parsed)) {
    MailboxStatus unknown;  // "I cannot ask" is not "it does not exist": exists stays unset
    unknown.address = parsed->canonical();
    return unknown;
  }
  return p->status(*parsed);
}

MailSnapshot PostOffice::status() {
  MailSnapshot snap;
  std::vector<MailProvider*> all = providers();
  for (MailProvider* p : all) {
    absl::StatusOr<std::vector<MailboxStatus>> listed =
        p->can(Capability::kEnumerate)
            ? run_admin(p->admin(), p->scheme(), admin::ListStatus{})
            : absl::StatusOr<std::vector<MailboxStatus>>(
                  absl::UnimplementedError("cannot enumerate"));
    if (!listed.ok()) {
      snap.unsupported_providers.emplace_back(p->scheme());
      continue;
    }
    for (MailboxStatus& s : *listed) snap.addresses.push_back(std::move(s));
  }
  std::sort(snap.addresses.begin(), snap.addresses.end(),
            [](const MailboxStatus& a, const MailboxStatus& b) { return a.address < b.address; });
  std::sort(snap.unsupported_providers.begin(), snap.unsupported_providers.end());
  for (const MailboxStatus& s : snap.addresses) {
    snap.unread_count += s.unread_count;
    snap.in_flight_count += s.in_flight_count;
  }
  snap.address_count = snap.addresses.size();
  if (!snap.unsupported_providers.empty()) {
    snap.state = MailboxState::kDegraded;
  } else if (!all.empty()) {
    snap.state = MailboxState::kOnline;
  }
  return snap;
}

absl::StatusOr<RecoverResult> PostOffice::recover(std::string_view address) {
  absl::StatusOr<MailAddress> parsed = MailAddress::parse(address);
  if (!parsed.ok()) return parsed.status();
  if (absl::Status s = check_running("recover"); !s.ok()) return s;
  MailProvider* p = provider(parsed->scheme());
  if (p == nullptr) return UnknownSchemeError(parsed->scheme(), parsed->canonical());
  if (!p->can(Capability::kRecover, &*parsed)) return RecoverResult{0, false};
  absl::StatusOr<uint64_t> n =
      run_admin(p->admin(), p->scheme(), admin::Recover{parsed->canonical()});
  if (!n.ok()) return n.status();
  return RecoverResult{*n, true};
}

RecoverAllResult PostOffice::recover() {
  RecoverAllResult result;
  for (MailProvider* p : providers()) {
    absl::StatusOr<std::map<std::string, uint64_t>> r =
        p->can(Capability::kRecover) && p->can(Capability::kEnumerate)
            ? run_admin(p->admin(), p->scheme(), admin::RecoverAll{})
            : absl::StatusOr<std::map<std::string, uint64_t>>(absl::UnimplementedError(""));
    if (!r.ok()) {
      result.unreachable_providers.emplace_back(p->scheme());
      continue;
    }
    for (const auto& [address, n] : *r) {
      if (n == 0) continue;
      result.by_address[address] += n;
      result.reclaimed += n;
    }
  }
  return result;
}

absl::StatusOr<std::vector<CopyInfo>> PostOffice::locate(std::string_view message_id) {
  std::vector<CopyInfo> out;
  for (MailProvider* p : providers()) {
    if (!p->can(Capability::kLocate)) continue;
    absl::StatusOr<std::vector<CopyInfo>> found =
        run_admin(p->admin(), p->scheme(), admin::Locate{std::string(message_id)});
    if (!found.ok()) return found.status();
    for (CopyInfo& c : *found) out.push_back(std::move(c));
  }
  return out;
}

absl::StatusOr<bool> PostOffice::settle(const CopyKey& key, Disposition disposition) {
  return settle(key, to_string(disposition));
}

absl::StatusOr<bool> PostOffice::settle(const CopyKey& key, std::string_view disposition) {
  absl::StatusOr<Route> r = route(key.address, Capability::kSettleByKey, "settle", true);
  if (!r.ok()) return r.status();
  if (!parse_disposition(disposition).has_value() && !r->provider->understands(disposition)) {
    return UnsupportedCapabilityError(r->provider->scheme(),
                                      absl::StrCat("disposition:", sv(disposition)),
                                      "it understands handled, discard, unhandled and terminate");
  }
  CopyKey canonical = key;
  canonical.address = r->address.canonical();
  return run_admin(r->provider->admin(), r->provider->scheme(),
                   admin::SettleKey{std::move(canonical), std::string(disposition)});
}

absl::StatusOr<uint64_t> PostOffice::clear() {
  if (absl::Status s = check_running("clear"); !s.ok()) return s;
  uint64_t total = 0;
  for (MailProvider* p : providers()) {
    if (!p->can(Capability::kClear)) continue;
    absl::StatusOr<uint64_t> n = run_admin(p->admin(), p->scheme(), admin::Clear{});
    if (!n.ok()) return n.status();
    total += *n;
  }
  return total;
}

absl::StatusOr<MailAddress> PostOffice::dead_letter_topic(std::string_view address) {
  return admin(admin::DeadLetterTopic{std::string(address)});
}

absl::StatusOr<std::vector<Letter>> PostOffice::peek_parked(std::string_view address,
                                                            size_t limit) {
  return admin(admin::PeekParked{std::string(address), limit});
}

absl::StatusOr<uint64_t> PostOffice::purge_parked(std::string_view address) {
  return admin(admin::PurgeParked{std::string(address)});
}

absl::Status PostOffice::wait_idle(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  for (MailProvider* p : providers()) {
    if (!p->can(Capability::kWaitIdle)) continue;
    if (absl::Status s = p->wait_idle(deadline); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace postal::mail
