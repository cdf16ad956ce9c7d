// ActorCell's supervision (R-SUP-1): restart under the child's policy, the backoff, and the
// parent's side of all-for-one. See supervision.h for what a new incarnation sees.
#include "absl/strings/str_cat.h"
#include "actor_cell.h"
#include "postal/runtime/logger.h"
#include "postal/wire/absl_compat.h"

namespace postal::actors {

std::string_view to_string(RestartPolicy policy) {
  switch (policy) {
    case RestartPolicy::kEscalate:
      return "escalate";
    case RestartPolicy::kOneForOne:
      return "one-for-one";
    case RestartPolicy::kAllForOne:
      return "all-for-one";
  }
  return "unknown";
}

namespace internal {

absl::Status check_supervision(const SpawnOptions& options, bool has_parent, bool can_remake) {
  const Supervision& s = options.supervision;
  if (!s.restarts()) return absl::OkStatus();
  if (!can_remake) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", sv(to_string(s.policy)),
                     " child is re-created from its spawn arguments, so they must be copyable"));
  }
  if (s.policy == RestartPolicy::kAllForOne && !has_parent) {
    return absl::InvalidArgumentError(
        "all-for-one restarts the siblings under one parent; a root or detached actor has none "
        "(use one-for-one)");
  }
  if (s.max_restarts < 0 || s.window <= absl::ZeroDuration() || s.backoff < absl::ZeroDuration() ||
      s.max_backoff < s.backoff) {
    return absl::InvalidArgumentError(
        "supervision needs max_restarts >= 0, a positive window and 0 <= backoff <= max_backoff");
  }
  return absl::OkStatus();
}

bool ActorCell::on_failure(std::string error) {
  std::optional<absl::Duration> backoff;
  if (!stop_requested()) backoff = budget_.on_failure(proc_.now());
  if (!backoff) {  // escalate (R-ACT-3)
    if (supervision().restarts() && !stop_requested()) {
      absl::StrAppend(&error, " (restart limit reached: ", budget_.recent(), " restarts within ",
                      absl::FormatDuration(supervision().window), ")");
    }
    terminate(ActorState::kFailed, std::move(error));
    return false;
  }
  return restart(error, *backoff, /*failed=*/true);
}

bool ActorCell::restart(const std::string& why, absl::Duration backoff, bool failed) {
  // The failed incarnation ends as if it had failed, except that the cell and mailbox live on.
  stop_children("parent restarting");
  cancel_timers();  // R-SUP-3
  end_watches();    // R-SUP-2: the new incarnation watches what it chooses to
  receive_all();    // the new incarnation handles what the old one put aside (R-ACT-9)
  drop_replies();   // R-ACT-10: continuations belong to the failed incarnation
  run_on_stop(ActorStatus{ActorState::kFailed, why});
  actor_.reset();
  ++incarnation_;
  // Replies to the old incarnation's requests never reach the new one: PortGone.
  mailbox_->close_ephemeral_ports();
  state_.store(ActorState::kRestarting, std::memory_order_release);
  runtime::Logger::actors().warn(absl::StrCat("actor ", self_addr().id.to_string(), " restarts (",
                                              sv(to_string(supervision().policy)), ") in ",
                                              absl::FormatDuration(backoff), ": ", why));
  if (failed) {
    report(SupervisionEvent{self_addr(), why, true, static_cast<uint32_t>(budget_.recent())});
  }
  // This slice keeps `scheduled_`: deliveries queue up without running the cell until the
  // backoff hands it back to the scheduler.
  backoff_pending_.store(true, std::memory_order_seq_cst);
  std::weak_ptr<ActorCell> weak = weak_from_this();
  backoff_timer_.store(proc_.timers().schedule(proc_.now() + backoff, [weak] {
    if (std::shared_ptr<ActorCell> cell = weak.lock()) cell->end_backoff();
  }));
  if (stop_requested()) end_backoff();  // a stop that raced with the restart
  return false;
}

void ActorCell::end_backoff() {
  if (backoff_pending_.exchange(false, std::memory_order_seq_cst)) {
    proc_.scheduler().schedule(this);
  }
}

bool ActorCell::supervise(const SupervisionEvent& event) {
  // A child of an earlier incarnation, stopped at the restart: not this incarnation's business.
  if (event.parent_incarnation != incarnation_) return false;
  if (!event.restarting) return true;
  std::shared_ptr<ActorCell> from;
  for (const std::weak_ptr<ActorCell>& weak : children_) {
    std::shared_ptr<ActorCell> child = weak.lock();
    if (child && child->addr() == event.child) {
      from = std::move(child);
      break;
    }
  }
  if (from && from->supervision().policy == RestartPolicy::kAllForOne) {
    for (const std::weak_ptr<ActorCell>& weak : children_) {
      std::shared_ptr<ActorCell> sibling = weak.lock();
      if (sibling && sibling != from &&
          sibling->supervision().policy == RestartPolicy::kAllForOne) {
        sibling->request_restart(
            absl::StrCat("all-for-one: sibling ", event.child.id.to_string(), " failed"));
      }
    }
  }
  return true;
}

}  // namespace internal
}  // namespace postal::actors
