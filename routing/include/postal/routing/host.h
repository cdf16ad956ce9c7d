// Host: the agent that brings a topology up on this machine (`postal up`).
//
// From a TopologySpec it starts, in its own process, one gateway node per [[gateway]] (peered as
// the file says) — or a plain host node when there is none — then launches every [[proc]] as an
// OS process (the postal binary's `proc` mode, or the proc's own binary calling proc_main),
// waits for each to report ready (within the ready timeout), attaches procs that name a gateway
// behind it, and spawns the [[actor]]s by registered type name with their parameters.
//
// Children die with the host: they are killed on teardown and on destruction (SIGTERM, then
// SIGKILL after HostOptions::teardown_grace), and they ask the kernel to signal them if the host
// dies (PR_SET_PDEATHSIG, checked against --parent-pid so a host that died before the child set
// it is seen too). The kernel sends that signal when the *thread* that launched the child exits,
// so `up` and `restart` must be called from a thread that lives as long as the host (the main
// thread in `postal up` and `postal soak`). A child that exits is a supervision event at the host: `next_exit`
// reports it with its exit status. (The OS side — spawning, reaping, killing — is the host's
// ProcSupervisor, routing/src/proc_supervisor.h.)
//
// Any failure while coming up tears down what was started and returns an error naming the proc
// and what went wrong.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/actors/system_actors.h"
#include "postal/routing/node.h"
#include "postal/routing/proc_exit.h"
#include "postal/routing/topology_spec.h"
#include "postal/runtime/client.h"

namespace postal::routing {

namespace internal {
class ProcSupervisor;
class LocalNats;
}  // namespace internal

struct HostOptions {
  std::string postal_binary;  // the program for procs without `binary` (usually argv[0])
  absl::Duration ready_timeout = absl::Seconds(10);
  absl::Duration spawn_timeout = absl::Seconds(10);
  // On teardown a child gets SIGTERM, then SIGKILL if it is still there after this long.
  absl::Duration teardown_grace = absl::Seconds(3);
  ChannelOptions channel;  // for the gateways' channels and, as flags, the procs'
  // R-SEC-1 (docs/security.md): the topology secret every gateway and proc of this host
  // authenticates its channels with (its key replaces channel.key). Empty: `up` draws a fresh
  // one (32 bytes, getrandom) unless `authenticate` is false, which runs the topology
  // unauthenticated as before issue 10. Launched procs receive it on an inherited pipe
  // (--secret-fd), never in argv or the environment.
  bool authenticate = true;
  std::string secret;
  int proc_workers = 0;    // default workers for procs that do not say (0: one per core)
  std::function<void(const std::string&)> log;  // progress lines; may be empty
  // When >= 0, an fd that becomes readable (an eventfd, a pipe) when the caller wants the host to
  // stop — `postal up` signals it on SIGINT/SIGTERM. `up` (and `restart`) waiting for a proc's
  // ready line then give up at once with Cancelled, and `up` tears down what it started. Not
  // owned: the caller keeps it open for the host's life and never drains it.
  int cancel_fd = -1;
};

struct LaunchedProc {
  std::string name;
  pid_t pid = -1;
  runtime::ProcAddr addr;       // how it is reached (via its gateway when it has one)
  runtime::ChannelAddr listen;  // where it serves
  std::optional<std::string> gateway;
};

class Host {
 public:
  static absl::StatusOr<std::unique_ptr<Host>> up(const TopologySpec& spec, HostOptions options);
  ~Host();

  const TopologySpec& spec() const { return spec_; }
  // R-CHAN-2's delivery timeout of the topology's channels (HostOptions, or the file's).
  absl::Duration delivery_timeout() const { return options_.channel.delivery_timeout; }
  runtime::Proc& proc() { return entry_->proc(); }
  runtime::Client& client() { return *client_; }
  const std::vector<LaunchedProc>& procs() const { return procs_; }
  const LaunchedProc* find_proc(std::string_view name) const;
  std::vector<const Node*> gateways() const;
  // The address of [[actor]] `actor` on [[proc]] `proc`, when it was spawned.
  std::optional<runtime::ActorAddr> actor_addr(std::string_view proc, std::string_view actor) const;

  // Spawns a registered actor type on a launched proc (remote spawn).
  absl::StatusOr<runtime::ActorAddr> spawn(std::string_view proc, std::string type,
                                           std::string name, actors::SpawnParams params);

  // The next child exit (a supervision event), or nullopt after `timeout`.
  std::optional<ProcExit> next_exit(absl::Duration timeout);
  // Relaunches a proc that exited, with the same name, address and arguments.
  absl::Status restart(std::string_view name);
  // Sends `signal` to a child (tests: kill -9 mid-stream).
  absl::Status kill(std::string_view name, int signal);

  // Every proc's status, in file order (a proc that does not answer in time gets an entry whose
  // `proc` names it and says so).
  std::vector<actors::ProcStatus> status(absl::Duration timeout);

  // Stops every child (SIGTERM, then SIGKILL after a grace period) and the gateways.
  void teardown();

  // R-SEC-1: the topology secret (empty when the topology runs unauthenticated), for the state
  // file that lets `postal status` and `postal mail` of the same user join (docs/security.md).
  const std::string& secret() const { return options_.secret; }

 private:
  explicit Host(TopologySpec spec, HostOptions options);
  absl::Status make_key();
  absl::Status start_nats();  // TopologySpec::start_nats
  absl::Status start_gateways();
  absl::Status launch(LaunchedProc& proc, const ProcSpec& spec);
  absl::Status spawn_actors();
  void log(const std::string& line) const;
  bool cancelled() const;  // HostOptions::cancel_fd is readable

  TopologySpec spec_;
  HostOptions options_;
  std::vector<std::unique_ptr<Node>> gateway_nodes_;
  std::unique_ptr<Node> plain_entry_;
  Node* entry_ = nullptr;  // the node whose proc the host's client lives on
  std::unique_ptr<runtime::Client> client_;
  std::vector<LaunchedProc> procs_;
  std::vector<std::pair<std::string, runtime::ActorAddr>> actors_;  // "proc/actor" → address
  std::unique_ptr<internal::ProcSupervisor> supervisor_;  // spawns, reaps and kills the children
  std::unique_ptr<internal::LocalNats> nats_;  // TopologySpec::start_nats: stopped last
};

}  // namespace postal::routing
