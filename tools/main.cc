// postal: compose, run and inspect topologies of procs.
//
//   postal demo                 the main job on embedded defaults (three procs, one behind a gateway)
//   postal up FILE              bring a topology file up in the foreground
//   postal status [NAME]        procs, actors, queue depths and failures of a running topology
//   postal bench [...]          benchmark routing beside raw sockets, CAF and NATS
//   postal mail VERB [ADDR]     post|fetch|peek|status|create|delete|list|subscribe|export|import
//                               (mail_command.cc)
//   postal mq9 [--listen H:P]   serve mailboxes to NATS clients, mq9 protocol (mq9_command.cc)
//   postal inbox VERB FILE      status [--json] | retry [--consumer C] (inbox_command.cc)
//   postal soak FILE [...]      kill -9, SIGSTOP and restart procs under load; account for every payload
//   postal proc --name ...      (used by hosts) run one proc; see routing/proc_main.h
//   postal version              the version and the wire version (also `postal --version`)
//
// Every subcommand takes --log-level (POSTAL_LOG's syntax, e.g. info,postal.routing=debug).
// Exit codes, for every subcommand: 0 ok, 1 a runtime failure, 2 a usage error.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "commands.h"
#include "postal/mail/mailbox_host.h"
#include "postal/routing/channel.h"
#if defined(POSTAL_WITH_MIMALLOC)
#include <mimalloc.h>
#endif
#include "postal/routing/proc_main.h"
#include "postal/runtime/logger.h"

namespace {

constexpr int kUsageError = 2;

std::string self_binary(const char* argv0) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return argv0;
  return std::string(buf, static_cast<size_t>(n));
}

std::string version_text() {
#if defined(POSTAL_WITH_MIMALLOC)
  const int mi = mi_version();  // also what keeps the allocator linked in (--as-needed)
  const std::string allocator = absl::StrCat("mimalloc ", mi / 100, ".", mi / 10 % 10, ".", mi % 10);
#else
  const std::string allocator = "glibc malloc";
#endif
  return absl::StrCat("postal ", POSTAL_VERSION, " (wire version ", postal::routing::kWireVersion,
                      ", ", allocator, ")");
}

// The first argument that is not an option, when it names no subcommand: CLI11 would call it
// an unexpected argument; say what it is instead.
bool unknown_subcommand(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--log-level") {
      ++i;  // its value
      continue;
    }
    if (arg.empty() || arg[0] == '-') continue;
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (sub->get_name() == arg) return false;
    }
    std::string known;
    for (const CLI::App* sub : app.get_subcommands({})) {
      absl::StrAppend(&known, known.empty() ? "" : ", ", sub->get_name());
    }
    std::fprintf(stderr, "postal: unknown subcommand '%s' (known: %s); see postal --help\n",
                 argv[i], known.c_str());
    return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "proc") == 0) {
    postal::mail::register_mail_actors();  // `postal proc` can host postal.MailboxHost
    return postal::routing::proc_main(argc, argv);
  }

  CLI::App app{"postal: compose, run and inspect topologies of actor procs"};
  app.require_subcommand(1);
  app.fallthrough();  // --log-level may follow any subcommand
  app.set_version_flag("--version", version_text());
  std::string log_level;
  app.add_option("--log-level", log_level,
                 "log levels, e.g. debug or info,postal.routing=debug (default: $POSTAL_LOG, "
                 "else info)");
  app.add_subcommand("version", "print the version and the wire version");
  app.add_subcommand("demo", "run a three-proc topology on embedded defaults and print what it measured");
  std::string file;
  app.add_subcommand("up", "bring a topology file up in the foreground (Ctrl-C tears it down)")
      ->add_option("file", file, "the topology file (TOML); see docs/topologies.md")
      ->required();
  std::string name;
  bool json = false;
  CLI::App* status = app.add_subcommand("status", "show procs, actors, queue depths and failure counts");
  status->add_option("name", name, "the topology's name (default: every running topology)");
  status->add_flag("--json", json, "print the status as JSON");
  app.add_subcommand("proc", "run one proc (used by hosts; `postal proc --help` for its flags)");
  std::string users_file;
  int users_secret_fd = -1;
  CLI::App* users = app.add_subcommand(
      "nats-users", "print the nats-server authorization block (users and permissions) of a "
                    "topology, for a NATS cluster you run (docs/topologies.md)");
  users->add_option("file", users_file, "the topology file (TOML)")->required();
  users->add_option("--secret-fd", users_secret_fd,
                    "an fd holding the topology's secret (default: $POSTAL_SECRET_FD)");
  postal::tools::BenchOptions bench;
  postal::tools::add_bench_subcommand(app, bench);
  postal::tools::MailCommand mail;
  CLI::App* mail_app = app.add_subcommand(
      "mail", "post, fetch, peek or show the status of a post: mailbox of a running topology; "
              "create, delete, list or subscribe to its retained mailboxes; export or import "
              "a retained mailbox of a store file");
  mail_app->add_option("verb", mail.verb,
                       "post | fetch | peek | status | create | delete | list | subscribe | "
                       "policy | export | import")
      ->required();
  mail_app->add_option("address", mail.address,
                       "e.g. post:orders@shop.example/inbox (import: the JSON file)");
  mail_app->add_option("file", mail.file, "export: the JSON file to write");
  mail_app->add_option("--store", mail.store,
                       "export, import: the SQLite store file, with no MailboxHost serving it");
  mail_app->add_option("--data", mail.data, "post: the text to send");
  mail_app->add_option("--priority", mail.priority, "post: critical | urgent | normal (retained)");
  mail_app->add_option("--ttl", mail.ttl_s, "create: time to live in seconds (default: none)");
  mail_app->add_option("--max-messages", mail.max_messages, "create: bound (default: none)");
  mail_app->add_option("--max-message-bytes", mail.max_message_bytes, "create: bound");
  mail_app->add_flag("--durable-all", mail.durable_all, "create: normal messages on disk too");
  mail_app->add_option("--count", mail.count, "subscribe: exit after this many letters");
  mail_app->add_option("--deliver", mail.deliver, "subscribe: all (default) | new | last")
      ->check(CLI::IsMember({"all", "new", "last"}));
  mail_app->add_option("--group", mail.group,
                       "subscribe: compete in this queue group; what it prints is settled for "
                       "the group, which never gets it again");
  mail_app->add_option("--ack", mail.ack,
                       "fetch: handled (default) | discard | unhandled | terminate");
  mail_app->add_option("--batch", mail.batch, "fetch: up to this many messages (default 1)")
      ->check(CLI::Range(size_t{1}, postal::mail::kMaxFetchBatch));
  mail_app->add_option("--wait", mail.wait_s, "fetch: seconds to wait for the first (default 0)")
      ->check(CLI::Range(int64_t{0}, int64_t{300}));
  mail_app->add_flag("--private", mail.is_private,
                     "create: a private mailbox; prints the drawn address (give no address)");
  mail_app->add_option("--topology", mail.topology, "the topology (default: every running one)");
  mail_app->add_option("--nats", mail.nats_url,
                       "nats: addresses: the NATS server(s), comma-separated (default "
                       "nats://127.0.0.1:4222)");
  mail_app->add_option("--nats-prefix", mail.nats_prefix,
                       "nats: addresses: the JetStream prefix of the mailboxes (default POSTAL)");
  mail_app->add_option("--max-attempts", mail.max_attempts, "policy: retry attempts in all")
      ->check(CLI::Range(int64_t{0}, int64_t{1'000'000}));
  mail_app->add_option("--base-delay-ms", mail.base_delay_ms, "policy: first retry wait")
      ->check(CLI::NonNegativeNumber);
  mail_app->add_option("--max-delay-ms", mail.max_delay_ms, "policy: longest retry wait")
      ->check(CLI::NonNegativeNumber);
  mail_app->add_option("--rounds", mail.rounds, "policy: delivery rounds before a give-up (0: "
                                                "unlimited)")
      ->check(CLI::NonNegativeNumber);
  mail_app->add_option("--settle-timeout-ms", mail.settle_timeout_ms,
                       "policy: the settle watchdog (0: none)")
      ->check(CLI::NonNegativeNumber);
  mail_app->add_option("--dead-letter", mail.dead_letter, "policy: on | off")
      ->check(CLI::IsMember({"on", "off"}));
  mail_app->add_flag("--clear", mail.clear, "policy: clear the mailbox's policy");
  postal::tools::InboxCommand inbox;
  CLI::App* inbox_app = app.add_subcommand(
      "inbox", "show an inbox file's counts by consumer and status, or retry its DEAD records");
  inbox_app->add_option("verb", inbox.verb, "status | retry")->required();
  inbox_app->add_option("file", inbox.file, "the inbox file")->required();
  inbox_app->add_flag("--json", inbox.json, "status: print it as JSON");
  inbox_app->add_option("--consumer", inbox.consumer, "retry: only this consumer's records");

  postal::tools::Mq9Command mq9;
  CLI::App* mq9_app = app.add_subcommand(
      "mq9", "serve retained mailboxes to any NATS client over the mq9 subject protocol "
             "(docs/mq9.md) until Ctrl-C");
  mq9_app->add_option("--listen", mq9.listen, "HOST:PORT to listen on (default 127.0.0.1:4222; "
                                              "port 0: any free port)");
  mq9_app->add_option("--store", mq9.store,
                      "the SQLite store file, or nats://HOST:PORT[,nats://…] for JetStream on a "
                      "NATS cluster (default: memory)");
  mq9_app->add_option("--nats-prefix", mq9.nats_prefix,
                      "with a nats:// store: names its stream and buckets (default POSTAL)");
  mq9_app->add_option("--nats-replicas", mq9.nats_replicas,
                      "with a nats:// store: 1 (default), or 3 in a 3-node cluster")
      ->check(CLI::IsMember({1, 3}));
  mq9_app->add_option("--nats-token-env", mq9.nats_token_env,
                      "with a nats:// store: the environment variable holding the server's token");
  mq9_app->add_option("--nats-tls-ca", mq9.nats_tls_ca,
                      "with a nats:// store: talk TLS to it, trusting this CA's certificates");
  mq9_app->add_option("--nats-tls-cert", mq9.nats_tls_cert,
                      "with --nats-tls-ca: a client certificate (PEM) for servers that verify "
                      "clients")
      ->needs("--nats-tls-ca");
  mq9_app->add_option("--nats-tls-key", mq9.nats_tls_key,
                      "with --nats-tls-cert: its private key (PEM)")
      ->needs("--nats-tls-cert");
  mq9_app->get_option("--nats-tls-cert")->needs("--nats-tls-key");
  mq9_app->add_option("--durability", mq9.durability, "os (default) | disk")
      ->check(CLI::IsMember({"os", "disk"}));
  mq9_app->add_option("--token-env", mq9.token_env,
                      "require clients to present the token held by this environment variable");
  mq9_app->add_option("--max-connections", mq9.max_connections, "connection cap (default 1024)")
      ->check(CLI::Range(size_t{1}, size_t{1'000'000}));

  postal::tools::SoakOptions soak;
  double soak_seconds = 0, soak_minutes = 0;
  CLI::App* soak_app = app.add_subcommand(
      "soak", "kill -9, SIGTERM, SIGSTOP and restart a topology's procs at random under load, then "
              "account for every payload (exit 0: none duplicated, none uncounted)");
  soak_app->add_option("file", soak.file, "the topology file (TOML); see docs/topologies.md")
      ->required();
  soak_app->add_option("--seconds", soak_seconds, "how long the chaos lasts (default 30)");
  soak_app->add_option("--minutes", soak_minutes, "how long the chaos lasts, in minutes");
  soak_app->add_option("--seed", soak.seed, "the random seed (the same sequence of random choices; timing still varies)");
  soak_app->add_option("--rate", soak.rate, "payloads per second in all (default 1500)");
  soak_app->add_option("--window", soak.window, "unresolved payloads per proc (default 32)");

  if (unknown_subcommand(app, argc, argv)) return kUsageError;
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kUsageError;
  }
  if (!log_level.empty()) {
    if (absl::Status s = postal::runtime::configure_logging(log_level); !s.ok()) {
      std::fprintf(stderr, "postal: --log-level: %s\n", std::string(s.message()).c_str());
      return kUsageError;
    }
  }

  const std::string self = self_binary(argv[0]);
  if (app.got_subcommand("version")) {
    std::printf("%s\n", version_text().c_str());
    return 0;
  }
  if (app.got_subcommand("demo")) return postal::tools::demo_command(self);
  if (app.got_subcommand("up")) return postal::tools::up_command(self, file);
  if (app.got_subcommand("status")) return postal::tools::status_command(name, json);
  if (app.got_subcommand("nats-users")) {
    return postal::tools::nats_users_command(users_file, users_secret_fd);
  }
  if (app.got_subcommand("mail")) return postal::tools::mail_command(mail);
  if (app.got_subcommand("inbox")) return postal::tools::inbox_command(inbox);
  if (app.got_subcommand("mq9")) return postal::tools::mq9_command(mq9);
  if (app.got_subcommand("bench")) return postal::tools::bench_command(self, bench);
  if (app.got_subcommand("soak")) {
    if (soak_minutes > 0) soak.duration = absl::Seconds(soak_minutes * 60);
    if (soak_seconds > 0) soak.duration = absl::Seconds(soak_seconds);
    return postal::tools::soak_command(self, soak);
  }
  return kUsageError;
}
