// Rig: the topology one group of `postal bench` scenarios runs on — kFanWidth postal.Driver
// actors on one proc, kFanWidth postal.Echo actors on another (or the same, inproc hops 0),
// joined by the transport and the gateway hops of the group (see bench_scenario.h).
//
// `echoes()` are the addresses the drivers send to: for hops 2 they name both gateways as Via
// hops. `pids()` are the OS processes besides this one that belong to the topology (the `postal
// proc` children); the gateways and, for inproc, every proc run in this process. A rig is torn
// down on destruction.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench_scenario.h"
#include "postal/routing/host.h"
#include "postal/runtime/client.h"

namespace postal::tools::bench {

struct RigOptions {
  std::string postal_binary;  // for the `postal proc` children
  int workers = 1;            // worker threads per proc
  bool verbose = false;       // print the host's bring-up lines
  bool authenticate = true;   // R-SEC-1: the topology's channels prove its secret (--no-auth)
  bool tls = false;           // R-SEC-1: TLS on every tcp channel, loopback included (--tls)
};

class Rig {
 public:
  virtual ~Rig() = default;
  virtual runtime::Client& client() = 0;
  const std::vector<runtime::ActorAddr>& drivers() const { return drivers_; }
  const std::vector<runtime::ActorAddr>& echoes() const { return echoes_; }
  virtual std::vector<pid_t> pids() const = 0;

 protected:
  std::vector<runtime::ActorAddr> drivers_;
  std::vector<runtime::ActorAddr> echoes_;
};

// Brings up the rig for `transport` and `hops`; errors name what failed.
absl::StatusOr<std::unique_ptr<Rig>> make_rig(Transport transport, int hops,
                                              const RigOptions& options);

// A rig over a Host the caller already brought up from a topology file (`--topology`).
std::unique_ptr<Rig> host_rig(std::unique_ptr<routing::Host> host,
                              std::vector<runtime::ActorAddr> drivers,
                              std::vector<runtime::ActorAddr> echoes);

}  // namespace postal::tools::bench
