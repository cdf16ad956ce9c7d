// mq9_command.cc — `postal mq9`: serve retained mailboxes to NATS clients through the mq9 v1
// subject protocol (postal/mail/mq9_bridge.h, docs/mq9.md) until SIGINT or SIGTERM.
//
// The store is a SQLite file (`--store FILE`; critical and urgent messages survive a restart, as
// mq9 asks), JetStream on a NATS cluster (`--store nats://…`, nats_mail_store.h) or memory. The
// token, when wanted, comes from an environment variable named by
// `--token-env`, never from argv (other users can read a process's argv).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "commands.h"
#include "postal/mail/mem_mail_store.h"
#include "postal/mail/mq9_bridge.h"
#include "postal/mail/nats_mail_store.h"
#include "postal/mail/retained_mailboxes.h"
#include "postal/mail/sqlite_mail_store.h"
#include "postal/runtime/logger.h"
#include "postal/wire/absl_compat.h"

namespace postal::tools {
namespace {

constexpr int kUsageError = 2;

int fail(std::string_view what) {
  runtime::Logger::tools().error(absl::StrCat("postal mq9: ", sv(what)));
  return 1;
}

absl::StatusOr<std::shared_ptr<mail::MailStore>> open_store(const Mq9Command& command) {
  if (command.store.empty()) return std::shared_ptr<mail::MailStore>(mail::MemMailStore::create());
  if (command.store.starts_with("nats://")) {
    mail::NatsStoreOptions no{.url = command.store,
                              .prefix = command.nats_prefix,
                              .tls_ca_file = command.nats_tls_ca,
                              .tls_cert_file = command.nats_tls_cert,
                              .tls_key_file = command.nats_tls_key,
                              .replicas = command.nats_replicas};
    if (!command.nats_token_env.empty()) {
      const char* token = std::getenv(command.nats_token_env.c_str());
      if (!token || !*token) {
        return absl::InvalidArgumentError(absl::StrCat("--nats-token-env ", command.nats_token_env,
                                                       ": the variable is not set or empty"));
      }
      no.token = token;
    }
    return mail::NatsMailStore::open(std::move(no));
  }
  mail::SqliteStoreOptions so;
  so.durability = command.durability == "disk" ? mail::Durability::kDisk : mail::Durability::kOs;
  return mail::SqliteMailStore::open(command.store, so);
}

}  // namespace

int mq9_command(const Mq9Command& command) {
  mail::Mq9BridgeOptions options;
  const size_t colon = command.listen.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(sv(std::string_view(command.listen).substr(colon + 1)), &port) ||
      port > 65535) {
    std::fprintf(stderr, "postal mq9: --listen takes HOST:PORT, e.g. 127.0.0.1:4222 (got \"%s\")\n",
                 command.listen.c_str());
    return kUsageError;
  }
  options.host = command.listen.substr(0, colon);
  options.port = static_cast<uint16_t>(port);
  if (!command.token_env.empty()) {
    const char* token = std::getenv(command.token_env.c_str());
    if (!token || !*token) {
      std::fprintf(stderr, "postal mq9: --token-env %s: the variable is not set or empty\n",
                   command.token_env.c_str());
      return kUsageError;
    }
    options.auth_token = token;
  }
  options.max_connections = command.max_connections;

  absl::StatusOr<std::shared_ptr<mail::MailStore>> store = open_store(command);
  if (!store.ok()) return fail(store.status().ToString());
  auto mailboxes = mail::RetainedMailboxes::create({.store = *std::move(store)});
  if (!mailboxes.ok()) return fail(mailboxes.status().ToString());
  options.mailboxes = std::move(*mailboxes);

  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before any thread starts: they inherit it

  auto bridge = mail::Mq9Bridge::start(std::move(options));
  if (!bridge.ok()) return fail(bridge.status().ToString());
  // The one line a script waits for (tests read the port from it).
  std::printf("mq9 bridge serving %s (store: %s)\n", (*bridge)->url().c_str(),
              command.store.empty() ? "memory" : command.store.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  const mail::Mq9BridgeStats st = (*bridge)->stats();
  runtime::Logger::tools().info(absl::StrCat(
      "postal mq9: stopping on signal ", sig, "; accepted ", st.accepted, " connections, refused ",
      st.refused, ", stored ", st.published, " messages, pushed ", st.pushed));
  bridge->reset();
  return 0;
}

}  // namespace postal::tools
