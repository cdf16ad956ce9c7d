#include "postal/mail/retained_mailboxes.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"
#include "retained_core.h"

namespace postal::mail {

using retained_internal::Core;
using retained_internal::Group;
using retained_internal::Sub;

namespace retained_internal {

Core::Core(RetainedOptions o)
    : options(std::move(o)),
      store(options.store),
      clock(options.clock ? options.clock : std::make_shared<SystemClock>()),
      executor(options.max_delivery_threads) {}

void Core::post(const std::shared_ptr<Sub>& sub, std::function<void(Sub&)> task,
                std::function<void()> skipped) {
  {
    absl::MutexLock lock(&idle_mu);
    ++pending;
  }
  auto run = [this, sub, task = std::move(task), skipped = std::move(skipped)]() mutable {
    bool go = false;
    {
      absl::MutexLock lock(&sub->mu);
      go = !sub->closed;
      if (go) {
        sub->running = true;
        sub->runner = std::this_thread::get_id();
      }
    }
    if (go) {
      task(*sub);
      absl::MutexLock lock(&sub->mu);
      sub->running = false;
    } else if (skipped) {
      skipped();
    }
    absl::MutexLock lock(&idle_mu);
    --pending;
  };
  if (!executor.post(sub->strand, std::move(run))) {
    absl::MutexLock lock(&idle_mu);
    --pending;
  }
}

void Core::route_locked(const RetainedMessage& message) {
  auto it = groups.find(message.mailbox);
  if (it == groups.end()) return;
  for (auto& [key, group] : it->second) route_to_group_locked(message, key, group);
}

void Core::route_to_group_locked(const RetainedMessage& message, const std::string& key,
                                 Group& group) {
  if (group.members.empty()) return;
  std::shared_ptr<Sub> target = group.replayer.lock();
  const bool member = target != nullptr && std::find(group.members.begin(), group.members.end(),
                                                     target) != group.members.end();
  // Up to the group's replay snapshot a message may also be in the replay: only the replaying
  // member can tell, so it gets it (exactly one delivery within the group).
  if (message.seq > group.replay_through || !member) {
    target = group.members[group.next++ % group.members.size()];
  }
  std::weak_ptr<Core> weak = self;
  post(
      target, [message](Sub& sub) { retained_internal::deliver(sub, message); },
      [weak, message, key] {
        std::shared_ptr<Core> core = weak.lock();
        if (core == nullptr) return;
        absl::MutexLock lock(&core->mu);
        auto box = core->groups.find(message.mailbox);
        if (box == core->groups.end()) return;  // ended: the message stays stored
        auto g = box->second.find(key);
        if (g != box->second.end()) core->route_to_group_locked(message, key, g->second);
      });
}

void Core::end_locked(const std::string& mailbox, const absl::Status& why) {
  auto it = groups.find(mailbox);
  if (it != groups.end()) {
    for (auto& [key, group] : it->second) {
      for (const std::shared_ptr<Sub>& sub : group.members) {
        post(sub, [why](Sub& s) {
          if (s.on_end) s.on_end(why);
        });
      }
      members.fetch_sub(group.members.size());
    }
    groups.erase(it);
  }
  if (auto t = expiry_timers.find(mailbox); t != expiry_timers.end()) {
    clock->cancel(t->second);
    expiry_timers.erase(t);
  }
}

void Core::notify_locked(const MailboxEvent& event) {
  if (!event.mailbox.is_public) return;  // M-BOX-4: private mailboxes are never listed
  for (const std::shared_ptr<Sub>& w : watchers) {
    post(w, [event](Sub& s) { s.on_event(event); });
  }
}

void Core::arm_expiry_locked(const MailboxInfo& info) {
  if (info.expires_at == absl::InfiniteFuture() || expiry_timers.contains(info.id)) return;
  std::weak_ptr<Core> weak = self;
  expiry_timers[info.id] = clock->schedule_at(info.expires_at, [weak] {
    if (std::shared_ptr<Core> core = weak.lock()) (void)sweep_expired(*core);
  });
}

void Core::remove_sub(const std::shared_ptr<Sub>& sub) {
  absl::MutexLock lock(&mu);
  std::erase(watchers, sub);
  auto it = groups.find(sub->mailbox);
  if (it == groups.end()) return;
  auto g = it->second.find(sub->group);
  if (g == it->second.end()) return;
  if (std::erase(g->second.members, sub) > 0) members.fetch_sub(1);
  Group& group = g->second;
  if (group.members.empty()) {
    it->second.erase(g);  // the group ends; a new one replays what it did not settle
    if (it->second.empty()) groups.erase(it);
    return;
  }
  // M-RECV-4: the replaying member left before its replay was done — another takes it over
  // (its ledger skips what a member already had). Posted behind what the leaver's strand still
  // runs would race it; the ledger's claims make that harmless.
  std::shared_ptr<Sub> replayer = group.replayer.lock();
  if (group.ledger != nullptr && (replayer == nullptr || replayer == sub) &&
      group.ledger->deliver != DeliverPolicy::kNew && !group.ledger->replay_done()) {
    std::shared_ptr<Sub> next = group.members.front();
    group.replayer = next;
    post(next, [](Sub& s) { retained_internal::replay_group(s); });
  }
}

absl::StatusOr<std::shared_ptr<GroupLedger>> form_ledger(const std::shared_ptr<MailStore>& store,
                                                         const MailboxInfo& mailbox,
                                                         const std::string& name,
                                                         uint64_t snapshot,
                                                         DeliverPolicy deliver) {
  // Fails with BudgetExhausted when the mailbox has no room for another settling group.
  if (absl::Status s = store->settle(mailbox.id, name, {}); !s.ok()) return s;
  absl::StatusOr<std::vector<uint64_t>> settled = store->settled(mailbox.id, name);
  if (!settled.ok()) return settled.status();
  auto ledger = std::make_shared<GroupLedger>();
  ledger->name = name;
  ledger->store = store;
  ledger->replay_through = snapshot;
  ledger->deliver = deliver;
  absl::MutexLock lock(&ledger->mu);
  ledger->taken.insert(settled->begin(), settled->end());
  ledger->replayed = deliver == DeliverPolicy::kNew;
  return ledger;
}

void arm_sweep(const std::shared_ptr<Core>& core) {
  std::weak_ptr<Core> weak = core;
  absl::MutexLock lock(&core->mu);
  if (core->stopped) return;
  core->sweep_timer = core->clock->schedule_after(core->options.sweep_interval, [weak] {
    std::shared_ptr<Core> c = weak.lock();
    if (c == nullptr) return;
    (void)sweep_expired(*c);
    arm_sweep(c);
  });
}

absl::Status sweep_expired(Core& core) {
  absl::MutexLock lock(&core.mu);
  if (core.stopped) return absl::OkStatus();
  absl::StatusOr<std::vector<MailboxInfo>> gone = core.store->expire(core.clock->now());
  if (!gone.ok()) return gone.status();
  for (const MailboxInfo& info : *gone) {
    core.end_locked(info.id, MailboxNotFoundError(info.id, "the store (its TTL ended)"));
    core.notify_locked(MailboxEvent{.kind = MailboxEventKind::kExpired, .mailbox = info});
  }
  return absl::OkStatus();
}

}  // namespace retained_internal

RetainedMailboxes::RetainedMailboxes(std::shared_ptr<Core> core) : core_(std::move(core)) {}

absl::StatusOr<std::unique_ptr<RetainedMailboxes>> RetainedMailboxes::create(
    RetainedOptions options) {
  if (options.store == nullptr) {
    return absl::InvalidArgumentError("RetainedOptions::store is required");
  }
  auto core = std::make_shared<Core>(std::move(options));
  core->self = core;
  std::unique_ptr<RetainedMailboxes> r(new RetainedMailboxes(core));
  if (core->options.sweep_interval > absl::ZeroDuration()) retained_internal::arm_sweep(core);
  return r;
}

RetainedMailboxes::~RetainedMailboxes() {
  {
    absl::MutexLock lock(&core_->pending_mu);
    core_->pending_mu.Await(absl::Condition(
        +[](uint64_t* pending) { return *pending == 0; }, &core_->pending_appends));
  }
  {
    absl::MutexLock lock(&core_->mu);
    core_->stopped = true;
    core_->clock->cancel(core_->sweep_timer);
    for (const auto& [id, timer] : core_->expiry_timers) core_->clock->cancel(timer);
    core_->expiry_timers.clear();
  }
  core_->executor.shutdown();
}

absl::StatusOr<CreateResult> RetainedMailboxes::create_mailbox(const MailboxSpec& spec) {
  absl::MutexLock lock(&core_->mu);
  absl::StatusOr<CreateResult> r = core_->store->create(spec);
  if (!r.ok()) return r;
  core_->arm_expiry_locked(r->mailbox);
  if (r->created) {
    core_->notify_locked(MailboxEvent{.kind = MailboxEventKind::kCreated, .mailbox = r->mailbox});
  }
  return r;
}

absl::Status RetainedMailboxes::remove(std::string_view mailbox) {
  absl::MutexLock lock(&core_->mu);
  absl::StatusOr<MailboxInfo> info = core_->store->mailbox(mailbox);
  if (!info.ok()) return info.status();
  if (absl::Status s = core_->store->remove(mailbox); !s.ok()) return s;
  core_->end_locked(info->id, MailboxNotFoundError(mailbox, "the store (it was removed)"));
  core_->notify_locked(MailboxEvent{.kind = MailboxEventKind::kRemoved, .mailbox = *info});
  return absl::OkStatus();
}

absl::StatusOr<MailboxInfo> RetainedMailboxes::mailbox(std::string_view mailbox) {
  return core_->store->mailbox(mailbox);
}

absl::StatusOr<std::vector<MailboxInfo>> RetainedMailboxes::list_public() {
  return core_->store->list_public();
}

absl::Status RetainedMailboxes::sweep() { return retained_internal::sweep_expired(*core_); }

absl::StatusOr<uint64_t> RetainedMailboxes::publish(std::string_view mailbox, Priority priority,
                                                    std::string body) {
  std::string copy = body;
  absl::StatusOr<uint64_t> seq = core_->store->append(mailbox, priority, std::move(body));
  if (!seq.ok()) return seq;
  RetainedMessage message{.mailbox = std::string(mailbox),
                          .seq = *seq,
                          .priority = priority,
                          .stored_at = core_->clock->now(),
                          .body = std::move(copy)};
  absl::MutexLock lock(&core_->mu);
  core_->route_locked(message);
  return seq;
}

void RetainedMailboxes::publish_async(std::string_view mailbox, Priority priority, std::string body,
                                      PublishDone done, PublishAsync how) {
  retained_internal::Core* core = core_.get();
  {
    absl::MutexLock lock(&core->pending_mu);
    ++core->pending_appends;
  }
  // Routing takes `mu`, which the store's writer must never wait for (retained_core.h): it runs
  // on the core's `published` strand, in commit order.
  auto route = [core, name = std::string(mailbox), priority,
                copy = body](absl::StatusOr<uint64_t> seq) mutable {
    if (!seq.ok()) return;
    RetainedMessage message{.mailbox = std::move(name),
                            .seq = *seq,
                            .priority = priority,
                            .stored_at = core->clock->now(),
                            .body = std::move(copy)};
    absl::MutexLock lock(&core->mu);
    core->route_locked(message);
  };
  auto finished = [core] {
    absl::MutexLock lock(&core->pending_mu);
    --core->pending_appends;
  };
  core->store->append_async(
      mailbox, priority, std::move(body),
      [core, how, route = std::move(route), finished = std::move(finished),
       done = std::move(done)](absl::StatusOr<uint64_t> seq) mutable {
        if (how.done_where_committed) {
          std::move(done)(seq);
          if (core->members.load() == 0) return finished();  // nobody to route to (Core::members)
        }
        core->executor.post(core->published, [how, route = std::move(route),
                                              finished = std::move(finished),
                                              done = std::move(done),
                                              seq = std::move(seq)]() mutable {
          route(seq);
          if (!how.done_where_committed) std::move(done)(std::move(seq));
          finished();
        });
      },
      MailStore::AppendAsync{.commit_here_if_idle = how.commit_here_if_idle});
}

absl::StatusOr<bool> RetainedMailboxes::erase(std::string_view mailbox, uint64_t seq) {
  return core_->store->erase(mailbox, seq);
}

absl::StatusOr<RetainedSubscription> RetainedMailboxes::subscribe(
    std::string_view mailbox, RetainedHandler handler, RetainedSubscribeOptions options) {
  if (!options.queue_group.empty()) {
    if (absl::Status s = check_queue_group(options.queue_group); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("subscribe ", sv(mailbox), ": ", s.message()));
    }
  }
  auto sub = std::make_shared<Sub>();
  sub->mailbox = std::string(mailbox);
  sub->handler = std::move(handler);
  sub->on_end = std::move(options.on_end);
  sub->strand = core_->executor.make_strand();
  absl::MutexLock lock(&core_->mu);
  core_->members.fetch_add(1);  // before the snapshot below (Core::members)
  auto undo = [&](absl::Status s) {
    core_->members.fetch_sub(1);
    return s;
  };
  // Under mu: a removal or expiry either happened before (NotFound) or will end this one.
  absl::StatusOr<MailboxInfo> info = core_->store->mailbox(mailbox);
  if (!info.ok()) return undo(info.status());
  sub->max_message_bytes = info->max_message_bytes;
  sub->group = options.queue_group.empty() ? absl::StrCat("\x01solo-", ++core_->solo_count)
                                           : absl::StrCat("g:", options.queue_group);
  auto box = core_->groups.find(sub->mailbox);
  const bool forms = box == core_->groups.end() || !box->second.contains(sub->group);
  std::shared_ptr<retained_internal::GroupLedger> ledger;
  const uint64_t snapshot = core_->store->last_seq();
  if (forms && !options.queue_group.empty()) {
    // M-RECV-4: a new lifetime of a named group starts from what the group settled before.
    absl::StatusOr<std::shared_ptr<retained_internal::GroupLedger>> made =
        retained_internal::form_ledger(core_->store, *info, options.queue_group, snapshot,
                                       options.deliver);
    if (!made.ok()) return undo(made.status());
    ledger = *std::move(made);
  }
  Group& group = core_->groups[sub->mailbox][sub->group];
  if (forms) {
    // This subscription forms the group: it replays what is stored up to this snapshot; live
    // messages routed from now on wait on its strand behind the replay.
    group.replay_through = snapshot;
    group.replayer = sub;
    group.ledger = ledger;
    sub->ledger = ledger;
    sub->replay_through = group.replay_through;
    sub->deliver = options.deliver;
    if (ledger != nullptr) {
      if (options.deliver != DeliverPolicy::kNew) {
        core_->post(sub, [](Sub& s) { retained_internal::replay_group(s); });
      }
    } else if (options.deliver != DeliverPolicy::kNew) {
      std::shared_ptr<MailStore> store = core_->store;
      core_->post(sub, [store](Sub& s) { retained_internal::replay(s, *store); });
    }
  } else {
    sub->ledger = group.ledger;
  }
  group.members.push_back(sub);
  core_->arm_expiry_locked(*info);
  RetainedSubscription handle;
  handle.core_ = core_;
  handle.sub_ = std::move(sub);
  return handle;
}

absl::StatusOr<ListingWatch> RetainedMailboxes::watch_public(
    std::vector<MailboxInfo>* snapshot, std::function<void(const MailboxEvent&)> on_event) {
  auto sub = std::make_shared<Sub>();
  sub->on_event = std::move(on_event);
  sub->strand = core_->executor.make_strand();
  absl::MutexLock lock(&core_->mu);
  absl::StatusOr<std::vector<MailboxInfo>> listed = core_->store->list_public();
  if (!listed.ok()) return listed.status();
  *snapshot = *std::move(listed);
  core_->watchers.push_back(sub);
  ListingWatch watch;
  watch.core_ = core_;
  watch.sub_ = std::move(sub);
  return watch;
}

bool RetainedMailboxes::wait_idle(absl::Duration timeout) {
  absl::MutexLock lock(&core_->idle_mu);
  return core_->idle_mu.AwaitWithTimeout(
      absl::Condition(
          +[](Core* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->idle_mu) { return c->pending == 0; },
          core_.get()),
      timeout);
}

namespace retained_internal {

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    close();
    core_ = std::move(other.core_);
    sub_ = std::move(other.sub_);
  }
  return *this;
}

void Handle::close() {
  if (sub_ == nullptr) return;
  if (std::shared_ptr<Core> c = core_.lock()) c->remove_sub(sub_);
  sub_->close();
  sub_.reset();
  core_.reset();
}

}  // namespace retained_internal

uint64_t RetainedSubscription::delivered() const {
  return sub_ == nullptr ? 0 : sub_->delivered.load();
}

}  // namespace postal::mail
