// ActorCell's watches (R-SUP-2 local, R-SUP-4 remote; see down.h, remote_watch.h). The watched
// cell keeps its watchers' addresses under its lock and sends each a Down when it terminates;
// registering checks the terminal state under the same lock, so a watch either lands before the
// end (Down at the end) or sees the end (Down at once) — one Down either way. A watcher on
// another proc is registered the same way, by this proc's postal-watch (serve_remote_watch), and
// its Down crosses the network. The watcher keeps the addresses it watches (runner only) and
// accepts a Down only for one of them, once, so an unwatch wins over a Down already on its way;
// a remote watch goes through its own proc's postal-watch (watch_keeper.cc), which also ends it
// when the target's proc is gone.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "actor_cell.h"
#include "postal/actors/remote_watch.h"
#include "postal/wire/absl_compat.h"
#include "watch_keeper.h"

namespace postal::actors::internal {
namespace {

std::shared_ptr<ActorCell> local_cell(runtime::Proc& proc, const runtime::ActorAddr& who) {
  std::shared_ptr<runtime::Mailbox> mailbox = proc.lookup(who.id);
  if (!mailbox) return nullptr;
  return std::dynamic_pointer_cast<ActorCell>(mailbox->handler_sink_owner());
}

// What a watch of an actor that is not running reports: how its tombstone ended (the cell is
// gone, R-ACT-7) or, with no tombstone, that there is no such actor (never existed, or reaped).
ActorStatus ended_status(const runtime::Mailbox* tombstone) {
  if (tombstone == nullptr || !tombstone->sink_released()) {
    return ActorStatus{ActorState::kStopped, "no such actor"};
  }
  const bool failed = tombstone->state() == runtime::MailboxState::kFailed;
  return ActorStatus{failed ? ActorState::kFailed : ActorState::kStopped,
                     tombstone->closed_why()};
}

bool erase_addr(std::vector<runtime::ActorAddr>& v, const runtime::ActorAddr& a) {
  auto it =
      std::find_if(v.begin(), v.end(), [&](const runtime::ActorAddr& x) { return x.id == a.id; });
  if (it == v.end()) return false;
  v.erase(it);
  return true;
}

}  // namespace

absl::Status ActorCell::watch(const runtime::ActorAddr& who) {
  if (who.id == addr_.id) return absl::InvalidArgumentError("an actor cannot watch itself");
  if (std::any_of(watching_.begin(), watching_.end(),
                  [&](const runtime::ActorAddr& a) { return a.id == who.id; })) {
    return absl::OkStatus();  // already watched: still one Down
  }
  if (!(who.id.proc == proc_.id())) {  // R-SUP-4: through this proc's postal-watch
    const runtime::ActorAddr keeper = keeper_addr();
    if (!proc_.lookup(keeper.id)) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot watch ", who.to_string(), ": this proc has no ", sv(kWatchName),
                       " actor (a Node installs it; a bare Proc can watch only its own actors)"));
    }
    watching_.push_back(who);
    tell_keeper(who, WatchRemote::kWatch);
    return absl::OkStatus();
  }
  std::shared_ptr<runtime::Mailbox> mailbox = proc_.lookup(who.id);
  std::shared_ptr<ActorCell> target =
      mailbox ? std::dynamic_pointer_cast<ActorCell>(mailbox->handler_sink_owner()) : nullptr;
  if (mailbox && !target && !mailbox->sink_released()) {
    return absl::InvalidArgumentError(absl::StrCat(who.to_string(), " is a client, not an actor"));
  }
  watching_.push_back(who);
  ActorStatus ended = ended_status(mailbox.get());
  if (target && target->add_watcher(addr_, &ended)) return absl::OkStatus();
  send_down(addr_, Down{who, ended.reason, ended.state == ActorState::kFailed});  // at once
  return absl::OkStatus();
}

bool ActorCell::unwatch(const runtime::ActorAddr& who) {
  if (!erase_addr(watching_, who)) return false;
  if (!(who.id.proc == proc_.id())) {
    tell_keeper(who, WatchRemote::kUnwatch);
  } else if (std::shared_ptr<ActorCell> target = local_cell(proc_, who)) {
    target->remove_watcher(addr_);
  }
  return true;
}

runtime::ActorAddr ActorCell::keeper_addr() const {
  return proc_.addr().actor(runtime::Uid::singleton(*runtime::Label::parse(kWatchName)));
}

void ActorCell::tell_keeper(const runtime::ActorAddr& who, uint8_t op) {
  proc_.send(runtime::MessageEnvelope::make(
      addr_, keeper_addr().port(runtime::Port::handler(wire::type_hash<WatchRemote>())),
      wire::Any::make(WatchRemote{who, addr_, op}), proc_.default_ttl()));
}

bool ActorCell::add_watcher(const runtime::ActorAddr& watcher, ActorStatus* ended) {
  absl::MutexLock lock(&mu_);
  if (is_terminal(state_.load())) {
    *ended = ActorStatus{state_.load(), reason_};
    return false;
  }
  // A remote watcher's proc may register it again (a watch ended there as unreachable, then
  // renewed): still one entry, one Down.
  if (std::none_of(watchers_.begin(), watchers_.end(),
                   [&](const runtime::ActorAddr& w) { return w.id == watcher.id; })) {
    watchers_.push_back(watcher);
  }
  return true;
}

size_t ActorCell::watcher_count() const {
  absl::MutexLock lock(&mu_);
  return watchers_.size();
}

void ActorCell::remove_watcher(const runtime::ActorAddr& watcher) {
  absl::MutexLock lock(&mu_);
  erase_addr(watchers_, watcher);
}

void ActorCell::send_down(const runtime::ActorAddr& to, const Down& down) {
  proc_.send(runtime::MessageEnvelope::make(
      down.who, to.port(runtime::Port::handler(wire::type_hash<Down>())), wire::Any::make(down),
      proc_.default_ttl()));
}

// Called by terminate() once the state is terminal: later watches see it and get Down at once.
void ActorCell::notify_watchers(const ActorStatus& status) {
  std::vector<runtime::ActorAddr> watchers;
  {
    absl::MutexLock lock(&mu_);
    watchers.swap(watchers_);
  }
  const Down down{addr_, status.reason, status.state == ActorState::kFailed};
  for (const runtime::ActorAddr& w : watchers) send_down(w, down);
}

// The incarnation ended: its watches end with it (no Down reaches a successor or a tombstone).
void ActorCell::end_watches() {
  for (const runtime::ActorAddr& who : watching_) {
    if (!(who.id.proc == proc_.id())) {
      tell_keeper(who, WatchRemote::kUnwatch);
    } else if (std::shared_ptr<ActorCell> target = local_cell(proc_, who)) {
      target->remove_watcher(addr_);
    }
  }
  watching_.clear();
}

bool ActorCell::accept_down(const Down& down) {
  if (!erase_addr(watching_, down.who)) return false;
  // A remote watch is over: the keeper forgets it (one it ended itself is forgotten already, and
  // the message then changes nothing).
  if (!(down.who.id.proc == proc_.id())) tell_keeper(down.who, WatchRemote::kForget);
  return true;
}

void serve_remote_watch(runtime::Proc& proc, const WatchRequest& request) {
  std::shared_ptr<runtime::Mailbox> mailbox = proc.lookup(request.target.id);
  std::shared_ptr<ActorCell> target =
      mailbox ? std::dynamic_pointer_cast<ActorCell>(mailbox->handler_sink_owner()) : nullptr;
  if (!request.watch) {
    if (target) target->remove_watcher(request.watcher);
    return;
  }
  ActorStatus ended = mailbox && !target && !mailbox->sink_released()
                          ? ActorStatus{ActorState::kStopped, "a client, not an actor"}
                          : ended_status(mailbox.get());
  Down down{request.target, ended.reason, ended.state == ActorState::kFailed};
  if (target && target->watcher_count() >= kMaxRemoteWatches) {  // input from the network
    down = Down{request.target, absl::StrCat("it has ", kMaxRemoteWatches, " watchers already"),
                false, true};
  } else if (target && target->add_watcher(request.watcher, &ended)) {
    return;
  } else {
    down = Down{request.target, ended.reason, ended.state == ActorState::kFailed};
  }
  proc.send(runtime::MessageEnvelope::make(
      request.target, request.watcher.port(runtime::Port::handler(wire::type_hash<Down>())),
      wire::Any::make(std::move(down)), proc.default_ttl()));
}

}  // namespace postal::actors::internal
