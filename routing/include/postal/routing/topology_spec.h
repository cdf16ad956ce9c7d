// topology_spec.h — `TopologySpec`, a multi-proc topology read from a TOML file.
//
// A topology file names the procs to start, the gateways between them, the actors each proc
// spawns and, optionally, a workload to drive (`postal up`, the demo, `postal bench`). The format
// is documented key by key in docs/topologies.md; examples live in examples/topologies/.
//
//   [topology]                       name (label, required), on_proc_exit, ready_timeout,
//                                    delivery_timeout
//   [[gateway]]  zero or more        name, listen, peers
//   [[proc]]     one or more         name, listen, gateway, workers, binary, args
//   [[actor]]    zero or more        proc, name, type, params
//   [workload]   optional            pattern, from, to, messages, size
//
// Guarantees of a returned spec
//   * Every name is a label (R-ADDR-1); gateway names are unique among gateways, proc names among
//     procs, actor names within their proc.
//   * Every reference resolves: a proc's gateway, a gateway's peers (never itself, no repeats),
//     an actor's proc, the workload's endpoints (each a declared actor, and distinct).
//   * No two procs or gateways listen on the same address, except tcp port 0 (the OS picks) and
//     `inproc://0`. A tcp wildcard host (0.0.0.0, ::) clashes with every host on its port.
//   * Vectors keep the order of the file.
//   * From `load_topology`, a proc's relative `binary` path (one with a '/' not at its start, e.g.
//     "./my_actors") is resolved against the topology file's directory (made absolute); absolute
//     paths and bare names (looked up in PATH by the launcher) are kept. `parse_topology` has no
//     file and keeps `binary` as written.
//
// Failure
//   `parse_topology` never throws and never crashes, whatever the bytes. On bad input it returns
//   InvalidArgument with one message, for the first problem found, of the form
//     <file>:<line>:<column>: <where>: <what is wrong>; <what to write instead>
//   e.g. `demo.toml:7:10: proc "alpha": listen "tcp://x" is not a channel address (missing
//   ':port'; ...); write e.g. "tcp://127.0.0.1:0", "ipc:///tmp/x.sock" or "ipc://@name"`.
//   Unknown tables and keys are errors that list the allowed ones, so a typo never passes.
//   `load_topology` reads a regular file of at most kMaxTopologyFileBytes. It refuses a symbolic
//   link (as the last path component), a FIFO, a directory, a device or a socket with
//   InvalidArgument, without blocking; a missing file is NotFound; other I/O errors map errno.
#ifndef POSTAL_ROUTING_TOPOLOGY_SPEC_H_
#define POSTAL_ROUTING_TOPOLOGY_SPEC_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/routing/channel.h"
#include "postal/runtime/location.h"

namespace postal::routing {

// The largest topology file `load_topology` and `parse_topology` accept.
inline constexpr std::size_t kMaxTopologyFileBytes = std::size_t{1} << 20;
// Bounds of the numeric keys.
inline constexpr std::int64_t kMaxProcWorkers = 256;
inline constexpr std::int64_t kMaxWorkloadMessageSize = std::int64_t{64} << 20;
inline constexpr absl::Duration kMaxReadyTimeout = absl::Hours(24);
// The bounds of [topology] delivery_timeout.
inline constexpr absl::Duration kMinDeliveryTimeout = absl::Milliseconds(100);
inline constexpr absl::Duration kMaxDeliveryTimeout = absl::Hours(1);

// What `postal up` does when one of its procs exits.
enum class OnProcExit : std::uint8_t {
  kTeardown,  // Stop every other proc and exit non-zero (the default).
  kIgnore,    // Keep the others running.
};

// How the workload drives its two endpoints. What each pattern sends is the driver's business;
// the spec only names it.
enum class WorkloadPattern : std::uint8_t { kPingPong, kStream, kFanOut, kFanIn };

struct GatewaySpec {
  std::string name;                // A label.
  runtime::ChannelAddr listen;     // Where the gateway serves.
  std::vector<std::string> peers;  // Names of other [[gateway]]s it forwards to by Via.

  friend bool operator==(const GatewaySpec&, const GatewaySpec&) = default;
};

struct ProcSpec {
  std::string name;                    // A label.
  runtime::ChannelAddr listen;         // Where the proc serves.
  std::optional<std::string> gateway;  // Attached behind (and advertised via) this gateway.
  std::optional<int> workers;          // 1..kMaxProcWorkers; absent: the machine's cores.
  std::optional<std::string> binary;   // The program to launch; absent: the postal binary.
                                       // (load_topology: relative to the file; see above.)
  std::vector<std::string> args;       // Extra arguments for `binary` (only with a binary).
  std::optional<std::string> log;      // Log levels (POSTAL_LOG syntax); absent: the topology's.

  friend bool operator==(const ProcSpec&, const ProcSpec&) = default;
};

// A value of an actor's `params` table.
using ActorParam = std::variant<std::string, std::int64_t, bool, double>;

struct ActorSpec {
  std::string proc;  // The [[proc]] that spawns it.
  std::string name;  // A label, unique within its proc.
  std::string type;  // A registered actor type name: [A-Za-z0-9_.:-]+.
  std::map<std::string, ActorParam, std::less<>> params;

  friend bool operator==(const ActorSpec&, const ActorSpec&) = default;
};

// An actor named by its proc: the text form `proc/actor`.
struct ActorRef {
  std::string proc;
  std::string actor;

  std::string to_string() const { return proc + "/" + actor; }
  friend bool operator==(const ActorRef&, const ActorRef&) = default;
};

struct WorkloadSpec {
  WorkloadPattern pattern = WorkloadPattern::kPingPong;
  ActorRef from;
  ActorRef to;
  std::int64_t messages = 0;  // > 0.
  std::int64_t size = 0;      // Bytes per message, 1..kMaxWorkloadMessageSize.

  friend bool operator==(const WorkloadSpec&, const WorkloadSpec&) = default;
};

struct TopologySpec {
  std::string name;  // A label.
  OnProcExit on_proc_exit = OnProcExit::kTeardown;
  std::optional<absl::Duration> ready_timeout;  // In (0, kMaxReadyTimeout]; absent: the driver's.
  // R-CHAN-2's delivery timeout of every channel of the topology (the host's gateways and every
  // launched proc, as --delivery-timeout-ms); in [kMinDeliveryTimeout, kMaxDeliveryTimeout];
  // absent: the driver's (30 s). Short for soaks, so a stopped peer is seen quickly.
  std::optional<absl::Duration> delivery_timeout;
  // Log levels of every launched proc (POSTAL_LOG syntax, e.g. "info,postal.routing=debug"),
  // handed to each as --log-level; absent: the procs inherit POSTAL_LOG.
  std::optional<std::string> log;
  // `start_nats = "127.0.0.1:4222"`: `postal up` starts a nats-server listening there before
  // anything else, for procs and gateways that listen on nats:// addresses, and stops it last.
  // For one machine; past one, run a NATS cluster yourself (docs/topologies.md).
  std::optional<std::string> start_nats;
  // `nats_tls_ca = "/etc/postal/nats-ca.pem"` (and optionally `nats_tls_cert`/`nats_tls_key`):
  // every nats:// channel of the topology — the host's and every launched proc's (as
  // --nats-tls-ca …) — talks TLS to its NATS server (ChannelOptions::nats_tls). Paths as written.
  NatsTls nats_tls;
  // `tls = "auto" | "on" | "off"` (R-SEC-1): TLS 1.3 on the topology's tcp:// channels — the
  // host's and every launched proc's (as --tls) — ChannelOptions::tls; absent: auto (TLS off
  // loopback). "on" also encrypts loopback; "off" never does (trusted networks only).
  std::optional<TlsMode> tls;
  std::vector<GatewaySpec> gateways;
  std::vector<ProcSpec> procs;  // At least one.
  std::vector<ActorSpec> actors;
  std::optional<WorkloadSpec> workload;

  // Lookups by name; null when absent. The pointers live as long as the vector is unchanged.
  const GatewaySpec* find_gateway(std::string_view name) const;
  const ProcSpec* find_proc(std::string_view name) const;
  const ActorSpec* find_actor(const ActorRef& ref) const;

  friend bool operator==(const TopologySpec&, const TopologySpec&) = default;
};

std::string_view to_string(OnProcExit value);       // "teardown" | "ignore"
std::string_view to_string(WorkloadPattern value);  // "ping-pong" | "stream" | "fan-out" | "fan-in"

// Parses and checks a topology from TOML text. `file_name` only labels error messages.
absl::StatusOr<TopologySpec> parse_topology(std::string_view toml_text,
                                            std::string_view file_name) noexcept;

// Reads `path` (see Failure above) and parses it; errors name `path` as given.
absl::StatusOr<TopologySpec> load_topology(const std::string& path) noexcept;

}  // namespace postal::routing

#endif  // POSTAL_ROUTING_TOPOLOGY_SPEC_H_
