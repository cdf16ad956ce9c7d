// The conformance suite (mail_conformance.h), instantiated for the `nats` provider against a real
// nats-server with JetStream (one per test program, each test on a prefix of its own), and what
// only `nats` promises: mailboxes shared by providers on separate connections, a held copy kept
// from everyone else while its holder lives, the server's ack wait as the backstop.
#include "postal/mail/nats_provider.h"

#include <atomic>
#include <memory>

#include "absl/strings/str_cat.h"
#include "mail_conformance.h"
#include "support/nats_server.h"
#include "support/scratch_dir.h"

namespace postal::mail::testing {
namespace {

using test_support::NatsServer;

// The test program's one nats-server; null (and the reason logged) when none starts.
NatsServer* server() {
  static test_support::ScratchDir* dir = new test_support::ScratchDir();
  static std::unique_ptr<NatsServer> s = [] {
    if (NatsServer::binary().empty()) return std::unique_ptr<NatsServer>();
    return std::make_unique<NatsServer>(dir->path() / "nats");
  }();
  return s != nullptr && s->ready() ? s.get() : nullptr;
}

std::string fresh_prefix() {
  static std::atomic<int> n{0};
  return absl::StrCat("CONF", n.fetch_add(1), "_", ::getpid());
}

ProviderFactory NatsFactory() {
  return ProviderFactory{
      "nats", "nats",
      [](const ConformanceConfig&,
         std::shared_ptr<ManualClock> clock) -> absl::StatusOr<std::unique_ptr<MailProvider>> {
        NatsServer* s = server();
        if (s == nullptr) return absl::UnavailableError(NatsServer::kMissing);
        absl::StatusOr<std::unique_ptr<NatsProvider>> p = NatsProvider::create(
            {.url = s->url(), .prefix = fresh_prefix(), .clock = std::move(clock)});
        if (!p.ok()) return p.status();
        return std::unique_ptr<MailProvider>(*std::move(p));
      }};
}

INSTANTIATE_TEST_SUITE_P(Nats, MailConformance, ::testing::Values(NatsFactory()), ConformanceName);

}  // namespace
}  // namespace postal::mail::testing
