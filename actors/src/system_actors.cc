#include "postal/actors/system_actors.h"

#include <algorithm>

#include "postal/actors/context.h"
#include "watch_keeper.h"

namespace postal::actors {
namespace {

class Spawner : public Actor, public Handles<SpawnActor> {
 public:
  absl::Status handle(Context& cx, SpawnActor m) override {
    SpawnResult result;
    absl::StatusOr<std::shared_ptr<ActorControl>> spawned =
        spawn_by_type(cx.proc(), m.type, m.name, m.params);
    if (spawned.ok()) {
      result.actor = (*spawned)->addr();
    } else {
      result.error = spawned.status().ToString();
    }
    m.reply_to.send(cx, std::move(result));
    return absl::OkStatus();  // a failed spawn is the caller's error, not the spawner's
  }
};

class StatusReporter : public Actor, public Handles<StatusQuery> {
 public:
  absl::Status handle(Context& cx, StatusQuery q) override {
    ProcStatus status;
    status.proc = cx.proc().addr().to_string();
    status.stats = cx.proc().stats();
    cx.proc().for_each_mailbox([&](const runtime::Mailbox& mailbox) {
      runtime::SinkInfo info = mailbox.sink_info();
      if (info.state.empty()) return;  // a client, not an actor
      status.actors.push_back(ActorInfo{mailbox.owner().id.to_string(), info.state, info.queued,
                                        info.queued_bytes, info.max_messages, info.max_bytes,
                                        info.watchers});
    });
    std::sort(status.actors.begin(), status.actors.end(),
              [](const ActorInfo& a, const ActorInfo& b) { return a.id < b.id; });
    q.reply_to.send(cx, std::move(status));
    return absl::OkStatus();
  }
};

runtime::PortAddr system_port(const runtime::ProcAddr& proc, std::string_view name,
                              uint64_t type_hash) {
  return proc.actor(runtime::Uid::singleton(*runtime::Label::parse(name)))
      .port(runtime::Port::handler(type_hash));
}

}  // namespace

absl::Status install_system_actors(runtime::Proc& proc, const WatchOptions& watch) {
  if (auto s = spawn<Spawner>(proc, kSpawnerName); !s.ok()) return s.status();
  if (auto s = spawn<StatusReporter>(proc, kStatusName); !s.ok()) return s.status();
  return internal::install_watch_keeper(proc, watch);
}

absl::StatusOr<runtime::ActorAddr> spawn_remote(runtime::SendContext& cx,
                                                const runtime::ProcAddr& proc,
                                                std::string type, std::string name,
                                                SpawnParams params, absl::Duration timeout) {
  runtime::PortRef<SpawnActor> spawner(
      system_port(proc, kSpawnerName, wire::type_hash<SpawnActor>()));
  absl::StatusOr<SpawnResult> result = runtime::request(
      cx, spawner, SpawnActor{std::move(type), std::move(name), std::move(params), {}}, timeout);
  if (!result.ok()) return result.status();
  if (!result->error.empty()) return absl::FailedPreconditionError(result->error);
  // The spawner answers with its own proc's view of the location; callers reach the actor the
  // way they reached the proc.
  return runtime::ActorAddr{result->actor.id, proc.location};
}

absl::StatusOr<ProcStatus> query_status(runtime::SendContext& cx, const runtime::ProcAddr& proc,
                                        absl::Duration timeout) {
  runtime::PortRef<StatusQuery> reporter(
      system_port(proc, kStatusName, wire::type_hash<StatusQuery>()));
  return runtime::request(cx, reporter, StatusQuery{}, timeout);
}

}  // namespace postal::actors
