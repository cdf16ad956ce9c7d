// ActorState and ActorStatus: where an actor is in its life (R-ACT-1).
//
//   Created → Initializing → Idle ⇄ Processing → Stopping → Stopped(reason) | Failed(error)
//
// Supervised with a restart policy (R-SUP-1), a failure leads to Restarting (the backoff) and
// then Initializing again, in the same cell, instead of Failed.
//
// Stopped and Failed are terminal; an actor in either stays known to its proc as a tombstone
// (R-ACT-4), so later sends fail with ActorStopped / ActorFailed rather than ActorNotExist.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace postal::actors {

enum class ActorState : uint8_t {
  kCreated,
  kInitializing,
  kIdle,
  kProcessing,
  kRestarting,
  kStopping,
  kStopped,
  kFailed,
};

std::string_view to_string(ActorState state);

inline bool is_terminal(ActorState s) {
  return s == ActorState::kStopped || s == ActorState::kFailed;
}

struct ActorStatus {
  ActorState state = ActorState::kCreated;
  std::string reason;  // why it stopped, or the error it failed with
  std::string to_string() const;
};

}  // namespace postal::actors
