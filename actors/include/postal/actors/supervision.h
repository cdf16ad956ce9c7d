// Supervision and SpawnOptions: what a parent decides for a child when it spawns it (R-SUP-1).
//
//   cx.spawn<Worker>(SpawnOptions{Supervision::one_for_one(3, absl::Minutes(1))}, "worker", cfg);
//
// `escalate` (the default) is R-ACT-3: the failed child stays Failed and its parent fails in
// turn unless `on_child_failed` absorbs it. `one_for_one` restarts the failed child;
// `all_for_one` restarts it and every sibling spawned `all_for_one` by the same parent. A restart
// re-creates the actor from the arguments it was spawned with (copies kept by the spawn, so they
// must be copyable) and runs `init` again, in the same cell and mailbox: the address, the handler
// ports and every PortRef / ActorRef to it stay valid. What the new incarnation sees:
//   - children of the failed incarnation are stopped ("parent restarting"); init spawns anew;
//   - its timers are cancelled (R-SUP-3), its ephemeral ports (the once ports of its requests)
//     are closed: a late reply to the old incarnation gets PortGone, never reaches the new one;
//   - handler messages that arrive during the backoff wait in its queue and are handled by the
//     new incarnation, in order (there is no mailbox bound yet, R-FLOW-1); a stop during the
//     backoff ends it early: the new incarnation starts, drains what was admitted and stops.
// At most `max_restarts` restarts within `window` (the proc's clock); the failure after that
// escalates as above. The n-th restart in the window waits `backoff · 2^(n-1)`, at most
// `max_backoff`. The parent hears of each restart at `Actor::on_child_restarted`.
//
// `detached` (root-like): the child does not stop with its parent and reports to nobody (its
// failure is logged, as a root actor's).
#pragma once

#include <optional>

#include <string_view>

#include "absl/time/time.h"
#include "postal/runtime/mailbox_bound.h"

namespace postal::actors {

enum class RestartPolicy : uint8_t { kEscalate, kOneForOne, kAllForOne };

std::string_view to_string(RestartPolicy policy);

struct Supervision {
  RestartPolicy policy = RestartPolicy::kEscalate;
  int max_restarts = 3;
  absl::Duration window = absl::Minutes(1);
  absl::Duration backoff = absl::Milliseconds(10);
  absl::Duration max_backoff = absl::Seconds(5);

  static Supervision escalate() { return {}; }
  static Supervision one_for_one(int max_restarts = 3, absl::Duration window = absl::Minutes(1)) {
    return Supervision{RestartPolicy::kOneForOne, max_restarts, window};
  }
  static Supervision all_for_one(int max_restarts = 3, absl::Duration window = absl::Minutes(1)) {
    return Supervision{RestartPolicy::kAllForOne, max_restarts, window};
  }
  Supervision with_backoff(absl::Duration first, absl::Duration max) const {
    Supervision s = *this;
    s.backoff = first;
    s.max_backoff = max;
    return s;
  }
  bool restarts() const { return policy != RestartPolicy::kEscalate; }
};

struct SpawnOptions {
  Supervision supervision;
  bool detached = false;
  // R-FLOW-1: the actor's mailbox bound and overload policy (runtime/mailbox_bound.h); empty
  // means the proc's default (ProcOptions::mailbox).
  std::optional<runtime::MailboxBound> mailbox = std::nullopt;

  static SpawnOptions bounded(runtime::MailboxBound bound) {
    SpawnOptions o;
    o.mailbox = bound;
    return o;
  }

  static SpawnOptions detach() {
    SpawnOptions o;
    o.detached = true;
    return o;
  }
};

}  // namespace postal::actors
