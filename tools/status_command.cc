// `postal status [NAME] [--json]`: asks every live proc of running topologies for its status.
//
// A proc the host saw exit is shown as dead (from the state file) without being asked; a live
// one that does not answer within 3 s is shown as unreachable. Exit 0 when every proc answered,
// 1 when one is dead or unreachable or no topology runs.
#include <unistd.h>

#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "commands.h"
#include "drive.h"
#include "nlohmann/json.hpp"
#include "postal/routing/node.h"
#include "topology_state.h"

namespace postal::tools {
namespace {

// One member of a topology as `postal status` reports it.
struct MemberStatus {
  std::string addr;
  long pid = 0;
  std::string state;   // "up" | "dead" | "unreachable"
  std::string detail;  // how it died, or why it did not answer
  std::optional<actors::ProcStatus> status;
};

nlohmann::json to_json(const MemberStatus& m) {
  nlohmann::json j{{"address", m.addr}, {"state", m.state}};
  if (m.pid != 0) j["pid"] = m.pid;
  if (!m.detail.empty()) j["detail"] = m.detail;
  if (!m.status) return j;
  const runtime::ProcStatsSnapshot& s = m.status->stats;
  j["stats"] = {{"posted", s.posted},
                {"delivered", s.delivered},
                {"returned", s.returned},
                {"dropped", s.dropped},
                {"overloaded", s.overloaded},
                {"dropped_oldest", s.dropped_oldest},
                {"failures",
                 {{"invalid_reference", s.invalid_reference},
                  {"transport", s.transport},
                  {"port_gone", s.port_gone},
                  {"expired", s.expired}}}};
  nlohmann::json actors = nlohmann::json::array();
  for (const auto& a : m.status->actors) {
    actors.push_back({{"id", a.id},
                      {"state", a.state},
                      {"queued", a.queued},
                      {"queued_bytes", a.queued_bytes},
                      {"max_messages", a.max_messages},
                      {"max_bytes", a.max_bytes}});
  }
  j["actors"] = std::move(actors);
  return j;
}

void print_table(const std::vector<MemberStatus>& members) {
  std::vector<actors::ProcStatus> live;
  for (const MemberStatus& m : members) {
    if (m.status) live.push_back(*m.status);
  }
  if (!live.empty()) print_status_table(live, /*with_actors=*/true);
  for (const MemberStatus& m : members) {
    if (!m.status) std::printf("%-58s %s: %s\n", m.addr.c_str(), m.state.c_str(), m.detail.c_str());
  }
}

}  // namespace

int status_command(const std::string& name, bool json) {
  std::vector<TopologyState> topologies = read_topology_states(name);
  if (topologies.empty()) {
    std::fprintf(stderr, "postal status: no running topology%s; start one with `postal up FILE`\n",
                 name.empty() ? "" : absl::StrCat(" named ", name).c_str());
    return 1;
  }
  int rc = 0;
  nlohmann::json out = {{"topologies", nlohmann::json::array()}};
  for (const TopologyState& topology : topologies) {
    // A throwaway proc to ask from, per topology: it authenticates with the topology's key
    // (R-SEC-1, from the state file), and replies come back to its abstract socket.
    absl::StatusOr<std::shared_ptr<const routing::ChannelKey>> key = channel_key(topology);
    if (!key.ok()) {
      std::fprintf(stderr, "postal status: topology %s: its secret: %s\n", topology.name.c_str(),
                   std::string(key.status().message()).c_str());
      return 1;
    }
    routing::NodeOptions o;
    o.id = runtime::ProcId{runtime::Uid::random(*runtime::Label::parse("status"))};
    o.listen = *runtime::ChannelAddr::ipc_abstract(
        absl::StrCat("postal-status-", ::getpid(), "-", topology.name));
    o.scheduler.workers = 1;
    o.system_actors = false;
    o.channel.key = *std::move(key);
    o.channel.tls = topology.tls;  // R-SEC-1: a topology with tls on refuses plaintext
    absl::StatusOr<std::unique_ptr<routing::Node>> node = routing::Node::start(std::move(o));
    if (!node.ok()) {
      std::fprintf(stderr, "postal status: %s\n", std::string(node.status().message()).c_str());
      return 1;
    }
    auto client = *runtime::Client::attach((*node)->proc(), "status");
    std::vector<MemberStatus> members;
    for (const TopologyMember& m : topology.members) {
      MemberStatus row{m.addr, m.pid, "up", "", std::nullopt};
      absl::StatusOr<runtime::ProcAddr> addr = runtime::ProcAddr::parse(m.addr);
      if (m.dead) {
        row.state = "dead";
        row.detail = m.exit;
      } else if (!addr.ok()) {
        row.state = "unreachable";
        row.detail = absl::StrCat("bad address in the state file: ", addr.status().message());
      } else if (absl::StatusOr<actors::ProcStatus> s =
                     actors::query_status(*client, *addr, absl::Seconds(3));
                 s.ok()) {
        row.status = *std::move(s);
      } else {
        row.state = "unreachable";
        row.detail = absl::StrCat("no answer: ", s.status().message());
      }
      if (row.state != "up") rc = 1;
      members.push_back(std::move(row));
    }
    if (json) {
      nlohmann::json procs = nlohmann::json::array();
      for (const MemberStatus& m : members) procs.push_back(to_json(m));
      out["topologies"].push_back({{"name", topology.name}, {"procs", std::move(procs)}});
    } else {
      std::printf("topology %s\n", topology.name.c_str());
      print_table(members);
    }
  }
  if (json) std::printf("%s\n", out.dump(2).c_str());
  return rc;
}

}  // namespace postal::tools
