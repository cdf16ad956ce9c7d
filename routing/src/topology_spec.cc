#include "postal/routing/topology_spec.h"

namespace postal::routing {

const GatewaySpec* TopologySpec::find_gateway(std::string_view name) const {
  for (const GatewaySpec& g : gateways) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

const ProcSpec* TopologySpec::find_proc(std::string_view name) const {
  for (const ProcSpec& p : procs) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const ActorSpec* TopologySpec::find_actor(const ActorRef& ref) const {
  for (const ActorSpec& a : actors) {
    if (a.proc == ref.proc && a.name == ref.actor) return &a;
  }
  return nullptr;
}

std::string_view to_string(OnProcExit value) {
  return value == OnProcExit::kIgnore ? "ignore" : "teardown";
}

std::string_view to_string(WorkloadPattern value) {
  switch (value) {
    case WorkloadPattern::kStream:
      return "stream";
    case WorkloadPattern::kFanOut:
      return "fan-out";
    case WorkloadPattern::kFanIn:
      return "fan-in";
    case WorkloadPattern::kPingPong:
      break;
  }
  return "ping-pong";
}

}  // namespace postal::routing
