// inbox_mail_consumer.h — `InboxMailConsumer`: the mail-layer transport adapter of the inbox,
// "accept before acknowledging" (seed 001, M-INBOX-1).
//
// `poll_once()` fetches one letter from `address` with a lease (AckMode::kManual), turns it into
// an InboxMessage (`from_letter`, inbox_letter.h: the letter id is the message id), `accept`s it
// — which commits — and only then settles the lease:
//   accepted or duplicate                 → handled: the inbox owns the message now
//   IdentityConflict, InvalidPayload,     → discard: a rejection, never an endless redelivery
//   or not an inbox event                   (the provider dead-letters it where it can)
//   any other error (storage, contention) → unhandled: back to the queue, delivered again, and
//                                           the inbox reconciles whatever did commit
// A crash between the accept and the settlement leaves the lease to expire; the letter comes
// back and is a duplicate. The scope, source and consumer come from the consumer's options (the
// transport's authenticated context), never from the letter.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/disposition.h"
#include "postal/mail/inbox.h"
#include "postal/mail/post_office.h"

namespace postal::mail {

struct InboxMailConsumerOptions {
  std::string address{};  // the mailbox to fetch from
  InboxScope scope{};
  std::string source{};
  std::string consumer{};
  absl::Duration lease = absl::Seconds(30);
};

struct MailAcceptOutcome {
  absl::StatusOr<AcceptReceipt> receipt;  // what accept answered (or why it did not run)
  Disposition settled = Disposition::kHandled;
  bool settlement_took_effect = false;  // false: the lease had ended; the letter comes back
};

class InboxMailConsumer {
 public:
  InboxMailConsumer(Inbox& inbox, PostOffice& office, InboxMailConsumerOptions options)
      : inbox_(inbox), office_(office), options_(std::move(options)) {}

  // nullopt when the mailbox had nothing; an error when the fetch itself failed.
  absl::StatusOr<std::optional<MailAcceptOutcome>> poll_once();

 private:
  Inbox& inbox_;
  PostOffice& office_;
  const InboxMailConsumerOptions options_;
};

}  // namespace postal::mail
