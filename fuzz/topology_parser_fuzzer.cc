// topology_parser_fuzzer: feeds the input to parse_topology as a topology file.
//
// Whatever the bytes, parse_topology must return (no crash, no exception, no sanitizer report)
// and then either
//   * fail with InvalidArgument whose message starts with the file name, is bounded and printable
//     (an operator reads it in a terminal), or
//   * succeed with a spec that keeps the promises of topology_spec.h: at least one proc, unique
//     names, every reference resolves, no gateway peers itself, distinct workload endpoints.
// Any violation prints the input and calls abort(), which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "postal/routing/topology_spec.h"
#include "postal/runtime/label.h"

namespace {

using postal::routing::ActorSpec;
using postal::routing::GatewaySpec;
using postal::routing::ProcSpec;
using postal::routing::TopologySpec;

constexpr std::string_view kFile = "fuzz.toml";
constexpr std::size_t kMaxMessage = 2048;

[[noreturn]] void fail(std::string_view input, const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "topology_parser_fuzzer: %s %.*s\n  input (%zu bytes): %.*s\n", what,
               static_cast<int>(detail.size()), detail.data(), input.size(),
               static_cast<int>(input.size()), input.data());
  std::abort();
}

void check_error(std::string_view input, const absl::Status& status) {
  const std::string_view message(status.message().data(), status.message().size());
  if (status.code() != absl::StatusCode::kInvalidArgument)
    fail(input, "not InvalidArgument:", message);
  if (message.substr(0, kFile.size() + 1) != std::string(kFile) + ":") {
    fail(input, "message does not start with the file name:", message);
  }
  if (message.size() > kMaxMessage) fail(input, "unbounded message");
  for (char c : message) {
    if (c < 0x20 || c > 0x7e) fail(input, "message has a non-printable byte:", message);
  }
}

void check_label(std::string_view input, const std::string& name) {
  if (!postal::runtime::Label::parse(name).ok()) fail(input, "a name is not a label:", name);
}

void check_spec(std::string_view input, const TopologySpec& spec) {
  check_label(input, spec.name);
  if (spec.procs.empty()) fail(input, "no proc");
  std::set<std::string> names;
  for (const GatewaySpec& g : spec.gateways) {
    check_label(input, g.name);
    if (!names.insert(g.name).second) fail(input, "duplicate gateway", g.name);
    for (const std::string& peer : g.peers) {
      if (peer == g.name) fail(input, "a gateway peers itself:", peer);
      if (spec.find_gateway(peer) == nullptr) fail(input, "undeclared peer:", peer);
    }
  }
  names.clear();
  for (const ProcSpec& p : spec.procs) {
    check_label(input, p.name);
    if (!names.insert(p.name).second) fail(input, "duplicate proc", p.name);
    if (p.gateway && spec.find_gateway(*p.gateway) == nullptr) fail(input, "undeclared gateway");
    if (p.workers && (*p.workers < 1 || *p.workers > postal::routing::kMaxProcWorkers)) {
      fail(input, "workers out of range");
    }
  }
  names.clear();
  for (const ActorSpec& a : spec.actors) {
    check_label(input, a.name);
    if (spec.find_proc(a.proc) == nullptr) fail(input, "undeclared proc:", a.proc);
    if (!names.insert(a.proc + "/" + a.name).second) fail(input, "duplicate actor", a.name);
  }
  if (spec.workload) {
    if (spec.find_actor(spec.workload->from) == nullptr) fail(input, "undeclared from");
    if (spec.find_actor(spec.workload->to) == nullptr) fail(input, "undeclared to");
    if (spec.workload->from == spec.workload->to) fail(input, "from == to");
    if (spec.workload->messages < 1) fail(input, "messages < 1");
    if (spec.workload->size < 1 || spec.workload->size > postal::routing::kMaxWorkloadMessageSize) {
      fail(input, "size out of range");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<TopologySpec> spec = postal::routing::parse_topology(input, kFile);
  if (spec.ok()) {
    check_spec(input, *spec);
  } else {
    check_error(input, spec.status());
  }
  return 0;
}
