// System actors: what every networked proc runs so that others can drive it.
//
//   postal-spawner  spawns a registered actor class by name (remote spawn)
//   postal-status   reports the proc's statistics and its actors with their queue depths
//   postal-watch    remote watches: this proc's of others, others' of this one (remote_watch.h)
//
// `install_system_actors(proc)` spawns both; `spawn_remote` and `query_status` are the client
// side, usable from any SendContext on any proc that can route to the target.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "postal/actors/actor_registry.h"
#include "postal/actors/remote_watch.h"
#include "postal/runtime/port.h"
#include "postal/runtime/proc_stats.h"

namespace postal::actors {

struct SpawnResult {
  std::string error;  // empty on success
  runtime::ActorAddr actor;
  template <class A>
  void serialize(A& a) {
    a(error, actor);
  }
};

struct SpawnActor {
  using Reply = SpawnResult;
  std::string type;
  std::string name;
  SpawnParams params;
  runtime::OncePortRef<SpawnResult> reply_to;
  template <class A>
  void serialize(A& a) {
    a(type, name, params, reply_to);
  }
};

struct ActorInfo {
  std::string id;
  std::string state;
  uint64_t queued = 0;
  // R-FLOW-1: the mailbox's bytes held and its bounds (MailboxBound).
  uint64_t queued_bytes = 0;
  uint64_t max_messages = 0;
  uint64_t max_bytes = 0;
  uint64_t watchers = 0;  // R-SUP-2, R-SUP-4: actors registered to hear its end
  template <class A>
  void serialize(A& a) {
    a(id, state, queued, queued_bytes, max_messages, max_bytes, watchers);
  }
};

struct ProcStatus {
  std::string proc;  // the proc's address
  runtime::ProcStatsSnapshot stats;
  std::vector<ActorInfo> actors;
  template <class A>
  void serialize(A& a) {
    a(proc, stats, actors);
  }
};

struct StatusQuery {
  using Reply = ProcStatus;
  runtime::OncePortRef<ProcStatus> reply_to;
  template <class A>
  void serialize(A& a) {
    a(reply_to);
  }
};

inline constexpr std::string_view kSpawnerName = "postal-spawner";
inline constexpr std::string_view kStatusName = "postal-status";

// Spawns postal-spawner, postal-status and postal-watch (remote watches, remote_watch.h) on
// `proc`.
absl::Status install_system_actors(runtime::Proc& proc, const WatchOptions& watch = {});

// Spawns `type` as `name` on the proc at `proc`; returns the new actor's address (its location is
// the proc's, as given).
absl::StatusOr<runtime::ActorAddr> spawn_remote(runtime::SendContext& cx,
                                                const runtime::ProcAddr& proc,
                                                std::string type, std::string name,
                                                SpawnParams params, absl::Duration timeout);

absl::StatusOr<ProcStatus> query_status(runtime::SendContext& cx, const runtime::ProcAddr& proc,
                                        absl::Duration timeout);

}  // namespace postal::actors

POSTAL_MESSAGE(postal::actors::SpawnResult, "postal.SpawnResult");
POSTAL_MESSAGE(postal::actors::SpawnActor, "postal.SpawnActor");
POSTAL_MESSAGE(postal::actors::ProcStatus, "postal.ProcStatus");
POSTAL_MESSAGE(postal::actors::StatusQuery, "postal.StatusQuery");
