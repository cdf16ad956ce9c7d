// The conformance suite (mail_conformance.h), instantiated for the `mem` provider.
#include "mail_conformance.h"

namespace postal::mail::testing {
namespace {

ProviderFactory MemFactory() {
  return ProviderFactory{
      "mem", "mem",
      [](const ConformanceConfig& config,
         std::shared_ptr<ManualClock> clock) -> absl::StatusOr<std::unique_ptr<MailProvider>> {
        absl::StatusOr<std::unique_ptr<MemProvider>> p = MemProvider::create(MemOptions{
            .bus = MemBus::isolated(std::move(clock)),
            .retry = config.retry,
            .dead_letter = config.dead_letter,
            .delivery_settle_timeout = config.settle_timeout,
        });
        if (!p.ok()) return p.status();
        return std::unique_ptr<MailProvider>(*std::move(p));
      }};
}

INSTANTIATE_TEST_SUITE_P(Mem, MailConformance, ::testing::Values(MemFactory()), ConformanceName);

}  // namespace
}  // namespace postal::mail::testing
