#include "postal/runtime/proc.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace postal::runtime {
namespace {

// R-ACT-7: reaped mailboxes wait in the graveyard until this many are there (or a tombstone is
// due), so a proc past max_tombstones — which reaps one per ended actor — frees them in batches
// instead of taking the tombstones' lock on every spawn.
constexpr size_t kGraveyardBatch = 32;

ProcId default_proc_id() {
  static const Label kProc = *Label::parse("proc");
  return ProcId{Uid::random(kProc)};
}

// R-ADDR-4: `inproc://<instance number>`. A named proc (a singleton uid, whose number is 0) or
// instance 0 gets a random non-zero number instead, drawn like an instance number, so no two
// procs of a process print as `inproc://0` (the "any free number" of the inproc transport).
Location default_location(const ProcId& id) {
  uint64_t number = id.uid.is_singleton() ? 0 : id.uid.number();
  while (number == 0) number = Uid::random().number();
  return Location::addr(ChannelAddr::inproc(number));
}

}  // namespace

namespace {

// Debian's abseil is built with absl::Mutex deadlock detection on, which turns every lock into a
// graph update (3× slower muxer and router lookups). postal's locks are leaf locks; turn it off
// once, before the first proc takes any.
void disable_mutex_deadlock_detection() {
  static std::once_flag once;
  std::call_once(once,
                 [] { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); });
}

}  // namespace

Proc::Proc(ProcOptions options)
    : id_(options.id ? *options.id : default_proc_id()),
      addr_{id_, options.location ? *options.location : default_location(id_)},
      system_addr_(actor_addr(Uid::singleton(*Label::parse("postal-system")))),
      default_ttl_(options.default_ttl == 0 ? kDefaultTtl : options.default_ttl),
      mailbox_bound_(options.mailbox),
      scheduler_(options.scheduler),
      forwarder_(&no_route_),
      clock_(std::move(options.clock)),
      tombstone_grace_(std::max(options.tombstone_grace, absl::ZeroDuration())),
      max_tombstones_(options.max_tombstones),
      timers_([this] { return now(); }, !options.scheduler.manual) {
  disable_mutex_deadlock_detection();
  if (scheduler_.manual()) scheduler_.set_before_step([this] { timers_.fire_due(); });
  scheduler_.start();
}

Proc::~Proc() {
  timers_.stop();  // no callback posts into a proc being torn down
  scheduler_.stop();
  // Destroying a mailbox can close others (an actor that owns a Client closes its mailbox), which
  // calls back into this proc (tombstoned, sends): empty the muxer while every member is alive
  // and destroy its mailboxes outside the locks, not inside the members' own destructors.
  std::vector<std::shared_ptr<Mailbox>> members;
  std::vector<std::shared_ptr<Mailbox>> graveyard;
  {
    absl::MutexLock lock(&tomb_mu_);
    graveyard.swap(graveyard_);
    tombstones_.clear();
  }
  for (MuxerShard& s : shards_) {
    absl::flat_hash_map<Uid, std::shared_ptr<Mailbox>> map;
    {
      absl::MutexLock lock(&s.mu);
      map.swap(s.map);
    }
    for (auto& [uid, mailbox] : map) members.push_back(std::move(mailbox));
  }
  // In address order: a proc that spawned many actors (150,000 tombstones after Savina's
  // Fibonacci) is torn down by walking cold memory, and the hash map's order is random; the
  // allocator handed the mailboxes out in runs of adjacent blocks, which the hardware prefetcher
  // follows when they are visited in that order.
  std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) {
    return std::less<const Mailbox*>()(a.get(), b.get());
  });
  // Live actors referencing each other (or themselves) form cycles through their mailboxes;
  // nothing runs them any more, so their state goes first, then the mailboxes.
  for (const std::shared_ptr<Mailbox>& mailbox : members) {
    if (const std::shared_ptr<PortSink>& sink = mailbox->handler_sink_owner()) sink->abandon();
  }
  members.clear();
  graveyard.clear();
  absl::MutexLock lock(&tomb_mu_);
  tombstones_.clear();  // anything a destroyed mailbox recorded while closing
}

Proc::MuxerShard& Proc::shard(const Uid& uid) const {
  static_assert(kMuxerShards == 16, "shard() takes the hash's top four bits");
  // The top bits: the shard's own table places entries by the low ones.
  return shards_[absl::Hash<Uid>{}(uid) >> (64 - 4)];
}

void Proc::set_forwarder(MailboxSender* forwarder) {
  forwarder_.store(forwarder != nullptr ? forwarder : &no_route_, std::memory_order_release);
}

absl::Status Proc::attach(std::shared_ptr<Mailbox> mailbox) {
  const ActorId& id = mailbox->owner().id;
  if (!(id.proc == id_)) {
    return absl::InvalidArgumentError(absl::StrCat("mailbox of ", id.to_string(),
                                                   " cannot attach to proc ", id_.to_string()));
  }
  std::vector<std::shared_ptr<Mailbox>> to_free;  // freed after the locks are released
  // R-ACT-7: every spawn reaps what has outlived its grace (the clock is read only while a
  // tombstone waits, the lock taken only when one is due or the graveyard holds a batch).
  const int64_t due = next_due_ns_.load(std::memory_order_acquire);
  if (graveyard_full_.load(std::memory_order_acquire) ||
      (due != INT64_MAX && absl::ToUnixNanos(now()) >= due)) {
    absl::MutexLock lock(&tomb_mu_);
    sweep(to_free);
  }
  Mailbox* raw = mailbox.get();
  MuxerShard& s = shard(id.uid);
  absl::MutexLock lock(&s.mu);
  auto [it, inserted] = s.map.try_emplace(id.uid, std::move(mailbox));
  if (!inserted) {
    return absl::AlreadyExistsError(
        absl::StrCat("actor ", id.to_string(), " already exists on this proc; choose another name"));
  }
  raw->attached_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

bool Proc::notify_on_room(const ActorId& actor, std::function<void()> on_room) {
  std::shared_ptr<Mailbox> mailbox = lookup(actor);
  if (mailbox == nullptr) return false;
  const std::shared_ptr<PortSink>& sink = mailbox->handler_sink_owner();
  return sink != nullptr && sink->notify_on_room(std::move(on_room));
}

std::shared_ptr<Mailbox> Proc::lookup(const ActorId& id) const {
  if (!(id.proc == id_)) return nullptr;
  std::shared_ptr<Mailbox> found;
  {
    MuxerShard& s = shard(id.uid);
    absl::ReaderMutexLock lock(&s.mu);
    auto it = s.map.find(id.uid);
    if (it == s.map.end()) return nullptr;
    found = it->second;
  }
  // R-ACT-7: a tombstone past its grace is gone, whether or not a sweep removed it yet.
  const MailboxState st = found->state();
  if ((st == MailboxState::kStopped || st == MailboxState::kFailed) && expired(*found)) {
    return nullptr;
  }
  return found;
}

bool Proc::expired(const Mailbox& mailbox) const {
  if (tombstone_grace_ == absl::InfiniteDuration()) return false;
  std::optional<absl::Time> closed = mailbox.closed_at();
  return closed && now() >= *closed + tombstone_grace_;
}

void Proc::tombstoned(const Mailbox& mailbox, absl::Time closed) {
  if (tombstone_grace_ == absl::InfiniteDuration()) return;  // kept for the proc's life
  // Only the mailbox in the muxer under its uid: one refused by `attach` never got the flag.
  if (!mailbox.attached_.load(std::memory_order_acquire)) return;
  absl::MutexLock lock(&tomb_mu_);
  tombstones_.push_back(Tombstone{closed + tombstone_grace_, mailbox.owner().id.uid, &mailbox});
  // Past the bound the oldest goes now; the next spawn frees it (the graveyard is flagged).
  bool evicted = false;
  while (tombstones_.size() > max_tombstones_) evicted |= reap_oldest();
  if (tombstones_.size() == 1 || evicted) publish_due();
}

bool Proc::reap_oldest() {
  Tombstone stone = tombstones_.front();
  tombstones_.pop_front();
  MuxerShard& s = shard(stone.uid);
  absl::MutexLock lock(&s.mu);
  auto it = s.map.find(stone.uid);
  if (it == s.map.end() || it->second.get() != stone.mailbox) return false;
  it->second->reaped_.store(true, std::memory_order_release);
  graveyard_.push_back(std::move(it->second));
  s.map.erase(it);
  return true;
}

void Proc::publish_due() {
  next_due_ns_.store(tombstones_.empty() ? INT64_MAX : absl::ToUnixNanos(tombstones_.front().due),
                     std::memory_order_release);
  graveyard_full_.store(graveyard_.size() >= kGraveyardBatch, std::memory_order_release);
}

size_t Proc::sweep(std::vector<std::shared_ptr<Mailbox>>& to_free) {
  size_t removed = 0;
  if (!tombstones_.empty()) {
    const absl::Time t = now();
    // Oldest first: with one grace period for the proc, closing order is due order.
    while (!tombstones_.empty() && tombstones_.front().due <= t) {
      if (reap_oldest()) ++removed;
    }
  }
  // Free what is done with its mailbox; an actor still ending its last slice waits here.
  for (std::shared_ptr<Mailbox>& m : graveyard_) {
    if (m->reapable()) to_free.push_back(std::move(m));
  }
  std::erase(graveyard_, nullptr);
  publish_due();
  return removed;
}

size_t Proc::reap_tombstones() {
  std::vector<std::shared_ptr<Mailbox>> to_free;
  absl::MutexLock lock(&tomb_mu_);
  return sweep(to_free);
}

size_t Proc::mailbox_count() const {
  size_t n = 0;
  for (const MuxerShard& s : shards_) {
    absl::ReaderMutexLock lock(&s.mu);
    n += s.map.size();
  }
  return n;
}

void Proc::for_each_mailbox(const std::function<void(const Mailbox&)>& fn) const {
  std::vector<std::shared_ptr<Mailbox>> snapshot;
  for (const MuxerShard& s : shards_) {
    absl::ReaderMutexLock lock(&s.mu);
    for (const auto& [uid, mailbox] : s.map) snapshot.push_back(mailbox);
  }
  for (const auto& mailbox : snapshot) fn(*mailbox);
}

void Proc::send(EnvelopePtr env, Mailbox* local) {
  stats_.add(Counter::kPosted);
  trace(TraceEventKind::kPosted, *env);
  if (local != nullptr && &local->proc() == this && env->ttl() > 0) {
    env->set_ttl(env->ttl() - 1);  // R-ENV-3, as post() does
    local->post_unchecked(std::move(env), *this);
    return;
  }
  post(std::move(env), *this);
}

namespace {

// R-FAIL-6: the return handle of `try_post`'s local part: keeps the failure instead of returning
// the envelope. Used only for calls that complete before `try_post` returns (the muxer and a
// local mailbox never keep the handle), never handed to the forwarder.
class CaptureFailure final : public ReturnHandle {
 public:
  void return_envelope(EnvelopePtr env) override { keep(*env); }
  void drop(EnvelopePtr env, DropCause) override { keep(*env); }
  const std::optional<DeliveryFailure>& failure() const { return failure_; }

 private:
  void keep(const MessageEnvelope& env) {
    if (!failure_ && !env.delivery_failures().empty()) failure_ = env.delivery_failures().back();
  }
  std::optional<DeliveryFailure> failure_;
};

// R-FLOW-2, R-FAIL-6: the envelope `try_post` hands to the forwarder, while that call runs on
// this thread. A forwarder that refuses it at once as Overloaded (a channel queue past its
// bound) returns it through the proc; `return_envelope` recognizes it and keeps the failure for
// try_post's result instead.
struct AtForwarder {
  const Proc* proc;
  const MessageEnvelope* env;
  CaptureFailure* capture;
};
thread_local AtForwarder* at_forwarder = nullptr;

}  // namespace

absl::Status Proc::try_post(EnvelopePtr env, Mailbox* local) {
  NoBlockScope no_block;  // R-FLOW-1: a full mailbox is the result at once (R-FAIL-6)
  stats_.add(Counter::kPosted);
  trace(TraceEventKind::kPosted, *env);
  CaptureFailure capture;
  if (env->ttl() == 0) {  // R-ENV-3
    std::string target = env->dest().to_string();
    MessageEnvelope::undeliverable(std::move(env), DeliveryFailure::expired(std::move(target)),
                                   capture);
  } else {
    env->set_ttl(env->ttl() - 1);
    std::shared_ptr<Mailbox> found;
    if (local == nullptr || &local->proc() != this) {
      const ActorId& dest = env->next_hop().id.actor;
      if (!(dest.proc == id_)) {
        MailboxSender* forwarder = forwarder_.load(std::memory_order_acquire);
        if (forwarder == &no_route_) {
          no_route_.post_unchecked(std::move(env), capture);  // known here: no route
        } else {
          CaptureFailure overloaded;
          AtForwarder scope{this, env.get(), &overloaded};
          AtForwarder* outer = std::exchange(at_forwarder, &scope);
          forwarder->post_unchecked(std::move(env), *this);  // beyond here: asynchronous
          at_forwarder = outer;
          if (!overloaded.failure()) return absl::OkStatus();
          stats_.failure(overloaded.failure()->kind);
          return overloaded.failure()->to_status();  // R-FLOW-2: the channel's queue is full
        }
      } else if ((found = lookup(dest)) == nullptr) {
        std::string target = env->dest().to_string();
        MessageEnvelope::undeliverable(
            std::move(env),
            DeliveryFailure::invalid_reference(std::move(target), InvalidReason::kActorNotExist),
            capture);
      }
      local = found.get();
    }
    if (env) local->post_unchecked(std::move(env), capture);
  }
  if (!capture.failure()) return absl::OkStatus();
  stats_.failure(capture.failure()->kind);
  return capture.failure()->to_status();
}

void Proc::post_unchecked(EnvelopePtr env, ReturnHandle& ret) {
  const ActorId& dest = env->next_hop().id.actor;
  if (!(dest.proc == id_)) {
    forwarder_.load(std::memory_order_acquire)->post(std::move(env), ret);
    return;
  }
  std::shared_ptr<Mailbox> mailbox = lookup(dest);
  if (!mailbox) {
    std::string target = env->dest().to_string();
    MessageEnvelope::undeliverable(
        std::move(env),
        DeliveryFailure::invalid_reference(std::move(target), InvalidReason::kActorNotExist),
        ret);
    return;
  }
  mailbox->post_unchecked(std::move(env), ret);
}

void Proc::return_envelope(EnvelopePtr env) {
  if (at_forwarder != nullptr && at_forwarder->proc == this && at_forwarder->env == env.get() &&
      env->root_failure() != nullptr &&
      env->root_failure()->transport == TransportReason::kOverloaded) {
    at_forwarder->capture->return_envelope(std::move(env));  // try_post's result (R-FLOW-2)
    return;
  }
  stats_.failure(env->delivery_failures().back().kind);
  stats_.add(Counter::kReturned);
  trace(TraceEventKind::kReturned, *env);
  PortAddr to = env->sender().port(Port::handler(wire::type_hash<UndeliverableEnvelope>()));
  auto ret = MessageEnvelope::make(system_addr_, std::move(to),
                                   wire::Any::make(UndeliverableEnvelope{std::move(env)}),
                                   default_ttl_);
  ret->set_return_undeliverable(false);  // R-FAIL-3: a failed return is dropped, not bounced
  post(std::move(ret), *this);
}

void Proc::drop(EnvelopePtr env, DropCause cause) {
  if (!env->delivery_failures().empty()) stats_.failure(env->delivery_failures().back().kind);
  stats_.drop(cause);
  trace(TraceEventKind::kDropped, *env);
  log_drop(*env, cause);
}

void Proc::log_drop(const MessageEnvelope& env, DropCause cause) {
  const Logger& log = Logger::runtime();
  if (!log.enabled(LogLevel::kWarn)) return;
  const DeliveryFailure* f = env.delivery_failures().empty() ? nullptr
                                                             : &env.delivery_failures().back();
  drop_log_limits_[static_cast<size_t>(cause)].log(
      log, LogLevel::kWarn,
      absl::StrCat("proc ", id_.to_string(), " dropped an envelope (", sv(to_string(cause)),
                   "): ", f ? f->to_string() : std::string("no failure recorded"),
                   " [drops of this cause are counted and logged at most once a second]"));
}

void Proc::set_trace(TraceHook hook) {
  const bool on = static_cast<bool>(hook.fn);
  absl::MutexLock lock(&trace_mu_);
  trace_ = on ? std::make_shared<const TraceHook>(std::move(hook)) : nullptr;
  tracing_.store(on, std::memory_order_release);
}

void Proc::trace_slow(TraceEventKind kind, const MessageEnvelope& env) {
  std::shared_ptr<const TraceHook> hook;
  {
    absl::MutexLock lock(&trace_mu_);
    hook = trace_;
  }
  if (!hook) return;
  if (hook->type_hash && env.data().type_hash() != *hook->type_hash) return;
  hook->fn(TraceEvent{kind, env});
}

}  // namespace postal::runtime
