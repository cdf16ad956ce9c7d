// MailboxHost: the post wire protocol onto an isolated mem provider.
#include "postal/mail/mailbox_host.h"

#include <atomic>
#include <limits>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "admin_wire.h"
#include "host_core.h"
#include "host_replies.h"
#include "postal/actors/context.h"
#include "postal/mail/inbox_port.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/sqlite_mail_store.h"
#include "postal/runtime/scheduler.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

using post_internal::failed;
using post_internal::HostCore;
using post_internal::LateReplies;
using post_internal::mem_address;
using post_internal::sender_proc;

std::optional<int64_t> int_param(const actors::SpawnParams& p, std::string_view name) {
  const wire::HeaderValue* v = p.find(name);
  if (v == nullptr) return std::nullopt;
  if (const auto* i = std::get_if<int64_t>(v)) return *i;
  if (const auto* u = std::get_if<uint64_t>(v)) return static_cast<int64_t>(*u);
  if (const auto* s = std::get_if<std::string>(v)) {
    int64_t n;
    if (absl::SimpleAtoi(*s, &n)) return n;
  }
  return std::nullopt;
}

// `store = "/path/mail.db"` (with `durability = "os" | "disk"`, `max_mailboxes`): the host also
// serves retained mailboxes from that SQLite store (kRetained).
absl::Status open_retained(const actors::SpawnParams& p, MemOptions& o) {
  const wire::HeaderValue* path = p.find("store");
  if (path == nullptr) return absl::OkStatus();
  const auto* text = std::get_if<std::string>(path);
  if (text == nullptr || text->empty()) {
    return absl::InvalidArgumentError("store must be the path of the SQLite store file");
  }
  SqliteStoreOptions so;
  if (const wire::HeaderValue* d = p.find("durability")) {
    const auto* tier = std::get_if<std::string>(d);
    if (tier == nullptr || (*tier != "os" && *tier != "disk")) {
      return absl::InvalidArgumentError("durability must be \"os\" or \"disk\"");
    }
    so.durability = *tier == "disk" ? Durability::kDisk : Durability::kOs;
  }
  if (auto n = int_param(p, "max_mailboxes")) {
    if (*n < 1) return absl::InvalidArgumentError("max_mailboxes must be >= 1");
    so.limits.max_mailboxes = static_cast<size_t>(*n);
  }
  absl::StatusOr<std::unique_ptr<MailStore>> store = SqliteMailStore::open(*text, so);
  if (!store.ok()) return store.status();
  absl::StatusOr<std::unique_ptr<RetainedMailboxes>> retained =
      RetainedMailboxes::create({.store = *std::move(store)});
  if (!retained.ok()) return retained.status();
  o.retained = *std::move(retained);
  return absl::OkStatus();
}

// One reply once every post of the batch has its outcome (each may complete on another
// thread: a post to a retained mailbox is answered after its commit).
struct PostAnswers {
  PostAnswers(size_t n, runtime::OncePortRef<MailReply> to, std::shared_ptr<LateReplies> l)
      : left(n), reply_to(std::move(to)), late(std::move(l)) {
    reply.receipts.resize(n);
  }
  absl::Mutex mu;
  size_t left ABSL_GUARDED_BY(mu);
  MailReply reply ABSL_GUARDED_BY(mu);
  runtime::OncePortRef<MailReply> reply_to;
  std::shared_ptr<LateReplies> late;
  void set(size_t i, const absl::StatusOr<PostReceipt>& receipt) {
    WirePostReceipt w = WirePostReceipt::of(receipt);
    MailReply done;
    {
      absl::MutexLock lock(&mu);
      reply.receipts[i] = std::move(w);
      if (--left != 0) return;
      done = std::move(reply);
    }
    late->send(reply_to, std::move(done));
  }
};

}  // namespace

MailboxHost::MailboxHost(MemOptions options) : options_(std::move(options)) {
  if (!options_.bus) options_.bus = MemBus::isolated();
}

MailboxHost::~MailboxHost() {
  if (core_) core_->shutdown();
}

absl::StatusOr<std::unique_ptr<MailboxHost>> MailboxHost::create(const actors::SpawnParams& p) {
  MemOptions o;
  if (auto ms = int_param(p, "settle_timeout_ms")) {
    if (*ms < 0) return absl::InvalidArgumentError("settle_timeout_ms must be >= 0");
    o.delivery_settle_timeout = absl::Milliseconds(*ms);
  }
  if (auto n = int_param(p, "retry_max_attempts")) {
    if (*n < 1) return absl::InvalidArgumentError("retry_max_attempts must be >= 1");
    RetryPolicy retry{
        .max_attempts = static_cast<uint32_t>(*n),
        .base_delay = absl::Milliseconds(int_param(p, "retry_base_delay_ms").value_or(100))};
    o.retry = retry;
  }
  if (const wire::HeaderValue* v = p.find("dead_letter"); v && std::holds_alternative<bool>(*v)) {
    if (std::get<bool>(*v)) o.dead_letter = DeadLetterOptions{};
  }
  if (auto ms = int_param(p, "lease_sweep_ms")) o.lease_sweep_interval = absl::Milliseconds(*ms);
  // Checked before the store is opened: a refused spawn creates no file.
  absl::Duration server_spin = kDefaultServerSpin;
  if (p.find("server_spin_us") != nullptr) {
    std::optional<int64_t> us = int_param(p, "server_spin_us");
    if (!us || *us < 0 || *us > absl::ToInt64Microseconds(runtime::Scheduler::kMaxServerSpin)) {
      return absl::InvalidArgumentError(
          "server_spin_us must be a whole number of microseconds, 0 (off) to 10000");
    }
    server_spin = absl::Microseconds(*us);
  }
  if (absl::Status s = open_retained(p, o); !s.ok()) return s;
  auto host = std::make_unique<MailboxHost>(std::move(o));
  host->server_spin_ = server_spin;
  return host;
}

absl::Status MailboxHost::init(actors::Context& cx) {
  absl::StatusOr<std::unique_ptr<MemProvider>> provider = MemProvider::create(options_);
  if (!provider.ok()) return provider.status();
  if (absl::Status s = (*provider)->start(); !s.ok()) return s;
  // The pusher sends pushes from the provider's executor threads, where no actor context exists.
  static std::atomic<uint64_t> next_pusher{1};
  absl::StatusOr<std::unique_ptr<runtime::Client>> pusher =
      runtime::Client::attach(cx.proc(), absl::StrCat("mail-pusher-", next_pusher.fetch_add(1)));
  if (!pusher.ok()) return pusher.status();
  core_ = std::make_shared<HostCore>(*std::move(provider), *std::move(pusher));
  cx.proc().scheduler().raise_server_spin(server_spin_);
  return absl::OkStatus();
}

void MailboxHost::on_stop(actors::Context&, const actors::ActorStatus&) {
  if (core_) core_->shutdown();
}

absl::Status MailboxHost::handle(actors::Context& cx, MailHello m) {
  MailReply r;
  for (uint8_t op = 0; op <= static_cast<uint8_t>(kLastCapability); ++op) {
    if (core_->provider().can(static_cast<Capability>(op))) r.count |= uint64_t{1} << op;
  }
  m.reply_to.send(cx, std::move(r));
  return absl::OkStatus();
}

absl::Status MailboxHost::handle(actors::Context& cx, MailPost m) {
  const size_t n = m.letters.size();
  if (n != m.addresses.size() || n > kMaxPostBatch) {
    m.reply_to.send(cx, failed(absl::InvalidArgumentError(absl::StrCat(
                            "post: a batch carries 0 to ", kMaxPostBatch,
                            " letters, one address each; got ", n, " letters and ",
                            m.addresses.size(), " addresses"))));
    return absl::OkStatus();
  }
  if (n == 0) {
    m.reply_to.send(cx, MailReply{});
    return absl::OkStatus();
  }
  auto answers = std::make_shared<PostAnswers>(n, std::move(m.reply_to), core_->late_replies());
  // A batch's posts mostly go to one mailbox: its address is parsed once per run of equal ones.
  absl::StatusOr<MailAddress> to = absl::UnknownError("no address parsed yet");
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 || m.addresses[i] != m.addresses[i - 1]) to = mem_address(m.addresses[i]);
    if (!to.ok()) {
      answers->set(i, to.status());
      continue;
    }
    // A post to a retained mailbox is answered after its commit, where the commit completes:
    // the store's writer thread, so the actor goes on at once and concurrent posters share
    // commits — or, for the batch's last post when no other message waits for this actor and
    // the store is idle, this worker, which then commits and answers without handing the post
    // to another thread. The answer only sends (no store call, no wait): `done_where_committed`
    // allows that.
    const RetainedMailboxes::PublishAsync how{
        .commit_here_if_idle = i + 1 == n && cx.queued_behind() == 0,
        .done_where_committed = true};
    core_->provider().post_async(
        *to, m.letters[i].to_letter(),
        [answers, i](absl::StatusOr<PostReceipt> receipt) { answers->set(i, receipt); }, how);
  }
  return absl::OkStatus();
}

absl::Status MailboxHost::handle(actors::Context& cx, MailStatusQuery m) {
  MailReply r;
  absl::StatusOr<MailAddress> at = mem_address(m.address);
  absl::StatusOr<MailboxStatus> s =
      at.ok() ? core_->provider().status(*at) : absl::StatusOr<MailboxStatus>(at.status());
  if (!s.ok())
    r = failed(s.status());
  else
    r.statuses.push_back(WireMailboxStatus::of(*s));
  m.reply_to.send(cx, std::move(r));
  return absl::OkStatus();
}

absl::Status MailboxHost::handle(actors::Context& cx, MailSubscribe m) {
  absl::StatusOr<MailAddress> at = mem_address(m.address);
  if (at.ok() && m.deliver > static_cast<uint8_t>(DeliverPolicy::kLast)) {
    at = absl::InvalidArgumentError(absl::StrCat(
        "subscribe ", m.address, ": deliver policy ", m.deliver, " is unknown; use all, new or last"));
  }
  SubscribeOptions options{.label = m.label,
                           .deliver = static_cast<DeliverPolicy>(m.deliver),
                           .queue_group = m.queue_group};
  if (m.retry) {
    options.retry = RetryPolicy{.max_attempts = m.max_attempts,
                                .base_delay = absl::Nanoseconds(m.base_delay_ns),
                                .max_delay = absl::Nanoseconds(m.max_delay_ns),
                                .factor = m.factor,
                                .jitter = m.jitter};
  }
  if (m.settle_timeout_ns >= 0) options.settle_timeout = absl::Nanoseconds(m.settle_timeout_ns);
  // The mem provider validates the policy: a bad one is refused with what to change.
  absl::StatusOr<std::string> id =
      at.ok() ? core_->subscribe(*at, options, m.subscriber,
                                 m.subscriber.addr().id.actor.proc.to_string())
              : absl::StatusOr<std::string>(at.status());
  MailReply r = id.ok() ? MailReply{} : failed(id.status());
  if (id.ok()) r.text = *id;
  m.reply_to.send(cx, std::move(r));
  return absl::OkStatus();
}

absl::Status MailboxHost::handle(actors::Context&, MailUnsubscribe m) {
  // Unsubscribing waits for a running callback — a remote one, possibly for long: never on the
  // actor's worker. The reply goes out through the pusher once it is done.
  std::weak_ptr<HostCore> weak = core_;
  core_->run_blocking([weak, m = std::move(m)] {
    std::shared_ptr<HostCore> core = weak.lock();
    if (!core) return;
    MailReply r;
    r.flag = core->unsubscribe(m.subscription_id);
    m.reply_to.send(core->pusher(), std::move(r));
  });
  return absl::OkStatus();
}

absl::Status MailboxHost::handle(actors::Context&, MailWaitIdle m) {
  // Waits for deliveries, possibly for long: never on the actor's worker.
  std::weak_ptr<HostCore> weak = core_;
  core_->run_blocking([weak, timeout = absl::Nanoseconds(m.timeout_ns),
                       reply_to = std::move(m.reply_to)] {
    std::shared_ptr<HostCore> core = weak.lock();
    if (!core) return;
    absl::Status s = core->provider().wait_idle(absl::Now() + timeout);
    reply_to.send(core->pusher(), s.ok() ? MailReply{} : failed(s));
  });
  return absl::OkStatus();
}

absl::Status MailboxHost::handle(actors::Context& cx, MailAdminCall m) {
  m.reply_to.send(cx, post_internal::serve_admin(*core_->provider().admin(), m));
  return absl::OkStatus();
}

void register_mail_actors() {
  static const bool once = [] {
    actors::ActorRegistry::global().add(kMailboxHostType, actors::factory_for<MailboxHost>());
    actors::ActorRegistry::global().add(kInboxPortType, actors::factory_for<InboxPortActor>());
    return true;
  }();
  (void)once;
}

}  // namespace postal::mail
