// SupervisionEvent: what a parent receives when a child fails (R-ACT-3) or, supervised with a
// restart policy, is being restarted after a failure (R-SUP-1: `restarting`, and `restarts` is
// how many restarts of this child fall within its window, this one included).
#pragma once

#include <string>

#include "postal/runtime/address.h"
#include "postal/wire/type_registry.h"

namespace postal::actors {

struct SupervisionEvent {
  runtime::ActorAddr child;
  std::string error;
  bool restarting = false;
  uint32_t restarts = 0;
  // Which incarnation of the parent spawned the child (R-SUP-1): a restarted parent ignores the
  // events of its earlier incarnations' children.
  uint32_t parent_incarnation = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(child, error, restarting, restarts, parent_incarnation);
  }
};

}  // namespace postal::actors

POSTAL_MESSAGE(postal::actors::SupervisionEvent, "postal.SupervisionEvent");
