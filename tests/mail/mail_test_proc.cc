// mail_test_proc: a proc binary for the multi-process mail tests. Besides postal.MailboxHost and
// postal.InboxPort it registers
//   - `test.HoldingSubscriber`, a push subscriber that keeps every MailPush unanswered (its
//     delivery stays in flight) so a test can kill its proc mid-delivery;
//   - `test.CrashOnceInboxPort`, postal.InboxPort's accept (same parameters: file, consumer) that
//     kills its own proc with SIGKILL right after its first accept committed, before replying,
//     unless the file `crash_marker` exists (it creates it first): the reply is lost, the record
//     is not.
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "postal/actors/actor_registry.h"
#include "postal/mail/inbox_port.h"
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

class CrashOnceInboxPort final : public postal::actors::Actor,
                                 public postal::actors::Handles<postal::mail::InboxPost> {
 public:
  CrashOnceInboxPort(std::unique_ptr<postal::mail::Inbox> inbox, std::string consumer,
                     std::string marker)
      : inbox_(std::move(inbox)), marker_(std::move(marker)) {
    binding_.source = std::string(postal::mail::kInboxPortDefaultSource);
    binding_.consumer = std::move(consumer);
  }
  static absl::StatusOr<std::unique_ptr<CrashOnceInboxPort>> create(
      const postal::actors::SpawnParams& p) {
    auto text = [&](std::string_view name) {
      const postal::wire::HeaderValue* v = p.find(name);
      const auto* t = v == nullptr ? nullptr : std::get_if<std::string>(v);
      return t == nullptr ? std::string() : *t;
    };
    if (text("file").empty() || text("consumer").empty() || text("crash_marker").empty()) {
      return absl::InvalidArgumentError("file, consumer and crash_marker are required");
    }
    auto inbox = postal::mail::Inbox::open(text("file"), {.consumers = {text("consumer")}});
    if (!inbox.ok()) return inbox.status();
    return std::make_unique<CrashOnceInboxPort>(*std::move(inbox), text("consumer"),
                                                text("crash_marker"));
  }
  absl::Status handle(postal::actors::Context& cx, postal::mail::InboxPost m) override {
    absl::StatusOr<postal::mail::AcceptReceipt> r =
        postal::mail::accept_event(*inbox_, binding_, m.event);
    if (r.ok() && !std::filesystem::exists(marker_)) {
      std::ofstream(marker_) << "crashed\n";
      ::raise(SIGKILL);  // committed, not answered
    }
    m.reply_to.send(cx, postal::mail::InboxPostReply::of(r));
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<postal::mail::Inbox> inbox_;
  postal::mail::InboxPortBinding binding_;
  std::string marker_;
};

POSTAL_ACTOR(CrashOnceInboxPort, "test.CrashOnceInboxPort");

}  // namespace

int main(int argc, char** argv) {
  postal::mail::register_mail_actors();
  return postal::routing::proc_main(argc, argv);
}
