// RoutePrefix: the id prefix a route is keyed by — a proc, an actor or a port (R-ROUTE-2).
//
// A port id `a.p:x` has three prefixes: the port itself, its actor `a.p` and its proc `p`. A
// route table (PrefixTable, FlatPrefixTable) maps prefixes to values and answers a port id with
// the value of its longest routed prefix (port ⊒ actor ⊒ proc).
#pragma once

#include <variant>

#include "postal/runtime/ids.h"

namespace postal::routing {

using RoutePrefix = std::variant<runtime::ProcId, runtime::ActorId, runtime::PortId>;

}  // namespace postal::routing
