// mail_test_proc: a proc binary for the multi-process mail tests. Besides postal.MailboxHost it
// registers `test.HoldingSubscriber`, a push subscriber that keeps every MailPush unanswered
// (its delivery stays in flight) so a test can kill its proc mid-delivery.
#include "postal/actors/actor_registry.h"
#include "postal/mail/mailbox_host.h"
#include "postal/routing/proc_main.h"

namespace {

class HoldingSubscriber final : public postal::actors::Actor,
                                public postal::actors::Handles<postal::mail::MailPush> {
 public:
  static absl::StatusOr<std::unique_ptr<HoldingSubscriber>> create(
      const postal::actors::SpawnParams&) {
    return std::make_unique<HoldingSubscriber>();
  }
  absl::Status handle(postal::actors::Context&, postal::mail::MailPush m) override {
    held_.push_back(std::move(m));  // never settled: in flight until this proc dies
    return absl::OkStatus();
  }

 private:
  std::vector<postal::mail::MailPush> held_;
};

POSTAL_ACTOR(HoldingSubscriber, "test.HoldingSubscriber");

}  // namespace

int main(int argc, char** argv) {
  postal::mail::register_mail_actors();
  return postal::routing::proc_main(argc, argv);
}
