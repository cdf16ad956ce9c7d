// The postal-watch actor (remote_watch.h, R-SUP-4; actors internal): one per networked proc,
// spawned by install_system_actors.
#pragma once

#include "absl/status/status.h"
#include "postal/actors/remote_watch.h"
#include "postal/runtime/proc.h"

namespace postal::actors::internal {

absl::Status install_watch_keeper(runtime::Proc& proc, const WatchOptions& options);

// The target's side of a WatchRequest (cell_watches.cc): adds the (remote) watcher to the local
// target, or sends it Down at once when there is no such actor or it ended; `watch` false
// removes it.
void serve_remote_watch(runtime::Proc& proc, const WatchRequest& request);

}  // namespace postal::actors::internal
