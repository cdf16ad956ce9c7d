// The `postal` subcommands.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "postal/bench/bench_command.h"  // `postal bench` (benchmarks/routing/)

namespace postal::tools {

// `postal demo`: a three-proc topology on embedded defaults, a workload routed through it.
int demo_command(const std::string& self_binary);
// `postal up FILE`: bring a topology up in the foreground until Ctrl-C or a proc dies.
int up_command(const std::string& self_binary, const std::string& file);
// `postal status [NAME] [--json]`: the procs, actors, queue depths and failures of running
// topologies; dead procs as dead.
int status_command(const std::string& name, bool json);
// `postal nats-users FILE --secret-fd N`: the nats-server users and permissions of a topology
// (R-SEC-4), for a cluster the operator runs (nats_users_command.cc).
int nats_users_command(const std::string& file, int secret_fd);

// `postal mail VERB [ADDR]`: one mail verb against a running topology's MailboxHost
// (mail_command.cc).
struct MailCommand {
  std::string verb;             // post | fetch | peek | status | create | delete | list | subscribe
  std::string address;          // a post: mail address (every verb but list); import: the JSON file
  std::string data;             // post: the text body
  std::string priority;         // post: critical | urgent | normal (retained mailboxes)
  std::string ack = "handled";  // fetch: handled | discard | unhandled | terminate
  std::string topology;         // empty: every running topology
  // nats: addresses: the NATS server(s) and JetStream prefix of the nats provider.
  std::string nats_url = "nats://127.0.0.1:4222";
  std::string nats_prefix = "POSTAL";
  int64_t ttl_s = 0;            // create: the TTL in seconds (0: none)
  uint64_t max_messages = 0, max_message_bytes = 0;  // create: bounds (0: none)
  bool durable_all = false;                          // create
  bool is_private = false;  // create: a private mailbox, its address drawn by the store
  size_t batch = 1;         // fetch: up to this many copies
  int64_t wait_s = 0;       // fetch: wait up to this long for the first (the long poll)
  uint64_t count = 0;  // subscribe: exit after this many letters (0: run until killed)
  std::string deliver = "all";  // subscribe: all | new | last (M-KIND-3)
  std::string group;            // subscribe: join this queue group (M-RECV-4)
  std::string file;             // export: the JSON file to write
  std::string store;            // export, import: the SQLite store file (offline)
  // policy (M-RETRY-6): -1 / empty leaves a field as it is.
  int64_t max_attempts = -1, base_delay_ms = -1, max_delay_ms = -1, rounds = -1;
  int64_t settle_timeout_ms = -1;
  std::string dead_letter;  // on | off
  bool clear = false;       // policy: clear the mailbox's policy
};
int mail_command(const MailCommand& command);

// `postal soak FILE`: chaos under load, then every payload accounted for (soak_command.cc).
struct SoakOptions {
  std::string file;
  absl::Duration duration = absl::Seconds(30);
  uint64_t seed = 1;
  uint64_t rate = 1500;  // payloads per second, all targets together
  uint64_t window = 32;  // unresolved payloads per target
};
int soak_command(const std::string& self_binary, const SoakOptions& options);

// `postal inbox status|retry FILE`: an inbox file's counts, or its DEAD records retried
// (inbox_command.cc).
struct InboxCommand {
  std::string verb;      // status | retry
  std::string file;      // the inbox file
  std::string consumer;  // retry: only this consumer's records (empty: all)
  bool json = false;     // status: as JSON
};
int inbox_command(const InboxCommand& command);

// `postal mq9`: retained mailboxes served to NATS clients, the mq9 subject protocol
// (mq9_command.cc).
struct Mq9Command {
  std::string listen = "127.0.0.1:4222";
  std::string store;              // a SQLite store file, or nats://HOST:PORT[,…]; empty: memory
  std::string durability = "os";  // os | disk (SQLite)
  std::string token_env;          // the environment variable holding the auth token
  size_t max_connections = 1024;
  std::string nats_prefix = "POSTAL";  // the NATS store's stream and bucket names
  int nats_replicas = 1;               // 1, or 3 in a cluster
  std::string nats_token_env;          // the variable holding the NATS server's token
  std::string nats_tls_ca;             // TLS to the NATS store's servers; empty: plain TCP
  std::string nats_tls_cert;
  std::string nats_tls_key;
};
int mq9_command(const Mq9Command& command);

}  // namespace postal::tools
