#include "topology_state.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace postal::tools {
namespace {

constexpr char kStateDir[] = "/tmp/postal";

TopologyState read_state(const std::filesystem::path& file) {
  TopologyState state;
  state.name = file.stem();
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind, addr;
    words >> kind >> addr;
    if (kind == "gateway" || kind == "proc") {
      TopologyMember m;
      m.kind = kind == "gateway" ? TopologyMember::Kind::kGateway : TopologyMember::Kind::kProc;
      m.addr = addr;
      if (!(words >> m.pid)) m.pid = 0;
      state.members.push_back(std::move(m));
    } else if (kind == "dead") {
      std::string rest;
      std::getline(words, rest);
      for (TopologyMember& m : state.members) {
        if (m.addr == addr) {
          m.dead = true;
          m.exit = std::string(absl::StripLeadingAsciiWhitespace(rest));
        }
      }
    }
  }
  return state;
}

}  // namespace

std::string state_file(const std::string& topology) {
  return absl::StrCat(kStateDir, "/", topology, ".state");
}

void write_topology_state(const routing::Host& host,
                          const std::vector<routing::ProcExit>& exits) {
  std::string path = state_file(host.spec().name);
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::trunc);
  out << "pid " << ::getpid() << "\n";
  for (const routing::Node* g : host.gateways()) {
    out << "gateway " << const_cast<routing::Node*>(g)->proc().addr().to_string() << "\n";
  }
  for (const auto& p : host.procs()) out << "proc " << p.addr.to_string() << " " << p.pid << "\n";
  for (const routing::ProcExit& exit : exits) {
    const routing::LaunchedProc* p = host.find_proc(exit.name);
    if (p != nullptr) out << "dead " << p->addr.to_string() << " " << exit.to_string() << "\n";
  }
}

std::vector<TopologyState> read_topology_states(const std::string& name) {
  std::vector<TopologyState> states;
  if (!name.empty()) {
    if (std::filesystem::exists(state_file(name))) states.push_back(read_state(state_file(name)));
    return states;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(kStateDir, ec)) return states;
  for (const auto& e : std::filesystem::directory_iterator(kStateDir, ec)) {
    if (e.path().extension() == ".state") states.push_back(read_state(e.path()));
  }
  return states;
}

}  // namespace postal::tools
