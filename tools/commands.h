// The `postal` subcommands.
#pragma once

#include <string>

#include "postal/bench/bench_command.h"  // `postal bench` (benchmarks/routing/)

namespace postal::tools {

// `postal demo`: a three-proc topology on embedded defaults, a workload routed through it.
int demo_command(const std::string& self_binary);
// `postal up FILE`: bring a topology up in the foreground until Ctrl-C or a proc dies.
int up_command(const std::string& self_binary, const std::string& file);
// `postal status [NAME] [--json]`: the procs, actors, queue depths and failures of running
// topologies; dead procs as dead.
int status_command(const std::string& name, bool json);

// `postal mail VERB ADDR`: one mail verb against a running topology's MailboxHost
// (mail_command.cc).
struct MailCommand {
  std::string verb;      // post | fetch | peek | status
  std::string address;   // a post: mail address
  std::string data;      // post: the text body
  std::string ack = "handled";  // fetch: handled | discard | unhandled
  std::string topology;  // empty: every running topology
};
int mail_command(const MailCommand& command);

}  // namespace postal::tools
