// TopologyState: what `postal up` records about a running topology for the other subcommands
// (`postal status`, `postal mail`), in <state_dir()>/<name>.state.
//
// R-SEC-3: the folder is $XDG_RUNTIME_DIR/postal-<uid> (or /tmp/postal-<uid>), created 0700 and
// used only while it is a real folder owned by the user that no one else can write; files are
// written fresh (O_EXCL|O_NOFOLLOW, 0600) and renamed into place, and read without following a
// link or blocking, only when they are regular files owned by the user. Anything else is
// refused with a logged reason, never followed or trusted.
//
// One line per fact: `pid N` (the host), `secret HEX`, `tls MODE` (R-SEC-1, when the topology
// sets one: the subcommands' channels follow it), `gateway ADDR`, `proc ADDR PID`, and
// `dead ADDR TEXT` for a proc the host saw exit (TEXT says how: "exited with status 1", "killed
// by SIGKILL"). The host rewrites the file when a proc exits, so readers show a dead proc as
// dead without asking it.
//
// R-SEC-1: `secret` is the topology secret (hex), so the user's own `postal status` and
// `postal mail` can authenticate to the topology's procs; the file's mode (0600) and folder
// (0700, owned by the user) keep it from everyone else (docs/security.md).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "postal/routing/channel_key.h"
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
  std::string secret;  // R-SEC-1: the topology secret (bytes); empty when it runs without
  routing::TlsMode tls = routing::TlsMode::kAuto;  // R-SEC-1: the topology's `tls`
  ~TopologyState() { routing::ChannelKey::wipe(secret); }
  TopologyState() = default;
  TopologyState(TopologyState&&) = default;
  TopologyState& operator=(TopologyState&&) = default;
  TopologyState(const TopologyState&) = default;
  TopologyState& operator=(const TopologyState&) = default;
};

// R-SEC-1: the channel key of a topology, for a client node that talks to its procs; null when
// the topology runs unauthenticated.
absl::StatusOr<std::shared_ptr<const routing::ChannelKey>> channel_key(const TopologyState& state);

// Where running topologies record their state, and the file of one.
std::string state_dir();
std::string state_file(const std::string& topology);

// Writes `host`'s state; `exits` are the procs the host saw exit. Fails (writing nothing) when
// the folder is not safely ours.
absl::Status write_topology_state(const routing::Host& host,
                                  const std::vector<routing::ProcExit>& exits);
// Removes a topology's state file (at teardown).
void remove_topology_state(const std::string& topology);

// The states of the running topology `name`, or of every running topology when `name` is empty;
// empty when none runs.
std::vector<TopologyState> read_topology_states(const std::string& name);

}  // namespace postal::tools
