#include "postal/runtime/client.h"

namespace postal::runtime {
namespace {

const HandlerTable& client_handlers() {
  static const HandlerTable table{
      {wire::type_hash<UndeliverableEnvelope>(), &decode_as<UndeliverableEnvelope>}};
  return table;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::attach(Proc& proc, std::string_view name) {
  absl::StatusOr<Label> label = Label::parse(name);
  if (!label.ok()) return label.status();
  auto returns = std::make_shared<ReceiverQueue>(proc.scheduler());
  auto mailbox = std::make_shared<Mailbox>(proc, proc.actor_addr(Uid::singleton(*label)),
                                           &client_handlers(), returns);
  if (absl::Status s = proc.attach(mailbox); !s.ok()) return s;
  return std::unique_ptr<Client>(new Client(proc, std::move(mailbox), std::move(returns)));
}

Client::Client(Proc& proc, std::shared_ptr<Mailbox> mailbox, std::shared_ptr<ReceiverQueue> returns)
    : proc_(proc), mailbox_(std::move(mailbox)), returns_(std::move(returns)) {}

Client::~Client() {
  mailbox_->close(MailboxState::kStopped, "the client was closed");  // a tombstone (R-ACT-4)
  while (returns_->try_pop()) {
  }  // the tombstone keeps the queue; not what nobody will read
}

absl::StatusOr<EnvelopePtr> Client::next_undeliverable(absl::Duration timeout) {
  absl::StatusOr<EnvelopePtr> env = returns_->wait(timeout);
  if (!env.ok()) return env.status();
  return std::move((*env)->data().get<UndeliverableEnvelope>()->envelope);
}

}  // namespace postal::runtime
