// SupervisionEvent: what a parent receives when a child fails (R-ACT-3).
#pragma once

#include <string>

#include "postal/runtime/address.h"
#include "postal/wire/type_registry.h"

namespace postal::actors {

struct SupervisionEvent {
  runtime::ActorAddr child;
  std::string error;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(child, error);
  }
};

}  // namespace postal::actors

POSTAL_MESSAGE(postal::actors::SupervisionEvent, "postal.SupervisionEvent");
