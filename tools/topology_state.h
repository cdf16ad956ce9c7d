// TopologyState: what `postal up` records about a running topology for the other subcommands
// (`postal status`, `postal mail`), in /tmp/postal/<name>.state.
//
// One line per fact: `pid N` (the host), `gateway ADDR`, `proc ADDR PID`, and `dead ADDR TEXT` for a
// proc the host saw exit (TEXT says how: "exited with status 1", "killed by SIGKILL"). The host
// rewrites the file when a proc exits, so readers show a dead proc as dead without asking it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "postal/routing/host.h"

namespace postal::tools {

struct TopologyMember {
  enum class Kind { kGateway, kProc };
  Kind kind = Kind::kProc;
  std::string addr;  // the proc address as text
  long pid = 0;      // a launched proc's pid (0 for a gateway: it lives in the host)
  bool dead = false;
  std::string exit;  // how it died, when dead
};

struct TopologyState {
  std::string name;
  std::vector<TopologyMember> members;
};

// Where a running topology records its state.
std::string state_file(const std::string& topology);

// Writes `host`'s state; `exits` maps a proc's name to how it exited.
void write_topology_state(const routing::Host& host,
                          const std::vector<routing::ProcExit>& exits);

// The states of the running topology `name`, or of every running topology when `name` is empty;
// empty when none runs.
std::vector<TopologyState> read_topology_states(const std::string& name);

}  // namespace postal::tools
