// postal: compose, run and inspect topologies of procs.
//
//   postal demo                 the main job on embedded defaults (three procs, one behind a gateway)
//   postal up FILE              bring a topology file up in the foreground
//   postal status [NAME]        procs, actors, queue depths and failures of a running topology
//   postal bench [...]          benchmark routing beside raw sockets, CAF and NATS
//   postal mail VERB ADDR       post|fetch|peek|status a post: mailbox (mail_command.cc)
//   postal proc --name ...      (used by hosts) run one proc; see routing/proc_main.h
#include <unistd.h>

#include <climits>
#include <cstring>
#include <string>

#include "CLI/CLI.hpp"
#include "commands.h"
#include "postal/mail/mailbox_host.h"
#include "postal/routing/proc_main.h"

namespace {

std::string self_binary(const char* argv0) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return argv0;
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "proc") == 0) {
    postal::mail::register_mail_actors();  // `postal proc` can host postal.MailboxHost
    return postal::routing::proc_main(argc, argv);
  }

  CLI::App app{"postal: compose, run and inspect topologies of actor procs"};
  app.require_subcommand(1);
  app.add_subcommand("demo", "run a three-proc topology on embedded defaults and print what it measured");
  std::string file;
  app.add_subcommand("up", "bring a topology file up in the foreground (Ctrl-C tears it down)")
      ->add_option("file", file, "the topology file (TOML); see docs/topologies.md")
      ->required();
  std::string name;
  app.add_subcommand("status", "show procs, actors, queue depths and failure counts")
      ->add_option("name", name, "the topology's name (default: every running topology)");
  app.add_subcommand("proc", "run one proc (used by hosts; see routing/proc_main.h)");
  postal::tools::BenchOptions bench;
  postal::tools::add_bench_subcommand(app, bench);
  postal::tools::MailCommand mail;
  CLI::App* mail_app = app.add_subcommand(
      "mail", "post, fetch, peek or show the status of a post: mailbox of a running topology");
  mail_app->add_option("verb", mail.verb, "post | fetch | peek | status")->required();
  mail_app->add_option("address", mail.address, "e.g. post:orders@shop.example/inbox")->required();
  mail_app->add_option("--data", mail.data, "post: the text to send");
  mail_app->add_option("--ack", mail.ack, "fetch: handled (default) | discard | unhandled");
  mail_app->add_option("--topology", mail.topology, "the topology (default: every running one)");
  CLI11_PARSE(app, argc, argv);

  const std::string self = self_binary(argv[0]);
  if (app.got_subcommand("demo")) return postal::tools::demo_command(self);
  if (app.got_subcommand("up")) return postal::tools::up_command(self, file);
  if (app.got_subcommand("status")) return postal::tools::status_command(name);
  if (app.got_subcommand("mail")) return postal::tools::mail_command(mail);
  if (app.got_subcommand("bench")) return postal::tools::bench_command(self, bench);
  return 2;
}
