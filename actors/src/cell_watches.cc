// ActorCell's watches (R-SUP-2, local part; see down.h). The watched cell keeps its watchers'
// addresses under its lock and sends each a Down when it terminates; registering checks the
// terminal state under the same lock, so a watch either lands before the end (Down at the end)
// or sees the end (Down at once) — one Down either way. The watcher keeps the addresses it
// watches (runner only) and accepts a Down only for one of them, once, so an unwatch wins over
// a Down already on its way.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "actor_cell.h"

namespace postal::actors::internal {
namespace {

std::shared_ptr<ActorCell> local_cell(runtime::Proc& proc, const runtime::ActorAddr& who) {
  std::shared_ptr<runtime::Mailbox> mailbox = proc.lookup(who.id);
  if (!mailbox) return nullptr;
  return std::dynamic_pointer_cast<ActorCell>(mailbox->handler_sink_owner());
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
  if (!(who.id.proc == proc_.id())) {
    return absl::UnimplementedError(absl::StrCat(
        "cannot watch ", who.to_string(),
        ": watching an actor of another proc is not built yet (R-SUP-2, remote part)"));
  }
  if (who.id == addr_.id) return absl::InvalidArgumentError("an actor cannot watch itself");
  if (std::any_of(watching_.begin(), watching_.end(),
                  [&](const runtime::ActorAddr& a) { return a.id == who.id; })) {
    return absl::OkStatus();  // already watched: still one Down
  }
  std::shared_ptr<runtime::Mailbox> mailbox = proc_.lookup(who.id);
  std::shared_ptr<ActorCell> target =
      mailbox ? std::dynamic_pointer_cast<ActorCell>(mailbox->handler_sink_owner()) : nullptr;
  if (mailbox && !target) {
    return absl::InvalidArgumentError(absl::StrCat(who.to_string(), " is a client, not an actor"));
  }
  watching_.push_back(who);
  ActorStatus ended{ActorState::kStopped, "no such actor"};  // never existed, or reaped
  if (target && target->add_watcher(addr_, &ended)) return absl::OkStatus();
  send_down(addr_, Down{who, ended.reason, ended.state == ActorState::kFailed});  // at once
  return absl::OkStatus();
}

bool ActorCell::unwatch(const runtime::ActorAddr& who) {
  if (!erase_addr(watching_, who)) return false;
  if (std::shared_ptr<ActorCell> target = local_cell(proc_, who)) target->remove_watcher(addr_);
  return true;
}

bool ActorCell::add_watcher(const runtime::ActorAddr& watcher, ActorStatus* ended) {
  absl::MutexLock lock(&mu_);
  if (is_terminal(state_.load())) {
    *ended = ActorStatus{state_.load(), reason_};
    return false;
  }
  watchers_.push_back(watcher);
  return true;
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
    if (std::shared_ptr<ActorCell> target = local_cell(proc_, who)) target->remove_watcher(addr_);
  }
  watching_.clear();
}

bool ActorCell::accept_down(const Down& down) { return erase_addr(watching_, down.who); }

}  // namespace postal::actors::internal
