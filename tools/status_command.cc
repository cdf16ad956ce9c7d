// `postal status [NAME]`: asks every proc of running topologies for its status.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "commands.h"
#include "drive.h"
#include "postal/routing/node.h"

namespace postal::tools {

int status_command(const std::string& name) {
  std::vector<std::filesystem::path> files;
  if (!name.empty()) {
    files.push_back(state_file(name));
    if (!std::filesystem::exists(files.back())) {
      std::fprintf(stderr, "postal status: no running topology named %s (no %s); start one with "
                           "`postal up FILE`\n", name.c_str(), files.back().c_str());
      return 1;
    }
  } else if (std::filesystem::is_directory("/tmp/postal")) {
    for (const auto& e : std::filesystem::directory_iterator("/tmp/postal")) {
      if (e.path().extension() == ".state") files.push_back(e.path());
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "postal status: no running topology; start one with `postal up FILE`\n");
    return 1;
  }
  // A throwaway proc to ask from; replies come back to its abstract socket.
  routing::NodeOptions o;
  o.id = runtime::ProcId{runtime::Uid::random(*runtime::Label::parse("status"))};
  o.listen = *runtime::ChannelAddr::ipc_abstract(absl::StrCat("postal-status-", ::getpid()));
  o.scheduler.workers = 1;
  o.system_actors = false;
  absl::StatusOr<std::unique_ptr<routing::Node>> node = routing::Node::start(std::move(o));
  if (!node.ok()) {
    std::fprintf(stderr, "postal status: %s\n", std::string(node.status().message()).c_str());
    return 1;
  }
  auto client = *runtime::Client::attach((*node)->proc(), "status");
  int rc = 0;
  for (const auto& file : files) {
    std::printf("topology %s\n", file.stem().c_str());
    std::ifstream in(file);
    std::string line;
    std::vector<actors::ProcStatus> all;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string kind, addr_text;
      words >> kind >> addr_text;
      if (kind != "proc" && kind != "gateway") continue;
      absl::StatusOr<runtime::ProcAddr> addr = runtime::ProcAddr::parse(addr_text);
      if (!addr.ok()) continue;
      absl::StatusOr<actors::ProcStatus> s = actors::query_status(*client, *addr, absl::Seconds(3));
      if (s.ok()) {
        all.push_back(*std::move(s));
      } else {
        actors::ProcStatus missing;
        missing.proc = absl::StrCat(addr_text, ": no answer (", s.status().message(), ")");
        all.push_back(std::move(missing));
        rc = 1;
      }
    }
    print_status_table(all, /*with_actors=*/true);
  }
  return rc;
}

}  // namespace postal::tools
