// mail_queue: the worked example of docs/mail.md, kept compiling.
//
// An order queue on the in-process `mem:` provider: a worker fetches orders under a lease and
// settles each one; a malformed order is discarded into the dead-letter queue; a billing
// subscriber that fails once with a retriable error is retried by the provider.
#include <iostream>

#include "absl/synchronization/notification.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/mem_provider.h"
#include "postal/mail/post_office.h"
#include "postal/mail/system_headers.h"

struct Order {
  int id = 0;
  int quantity = 0;
  template <class A>
  void serialize(A& a) {
    a(id, quantity);
  }
};
POSTAL_MESSAGE(Order, "examples.mail.Order");

namespace mail = postal::mail;

int main() {
  // 1. A PostOffice with the mem provider: a private bus, retries, dead letters.
  absl::StatusOr<std::unique_ptr<mail::MemProvider>> mem = mail::MemProvider::create({
      .bus = mail::MemBus::isolated(),
      .retry = mail::RetryPolicy{.max_attempts = 3, .base_delay = absl::Milliseconds(10)},
      .dead_letter = mail::DeadLetterOptions{},  // give-ups land in <path>_dlq
  });
  if (!mem.ok()) return std::cerr << mem.status() << "\n", 1;
  mail::PostOffice office;
  if (!office.register_provider(*std::move(mem)).ok() || !office.start().ok()) return 1;

  // 2. Nobody subscribes to the order queue: posted orders wait there for fetch.
  const std::string orders = "mem:orders@shop.example/incoming";
  office.post(orders, mail::Letter::of(Order{1, 3}, "order-1")).IgnoreError();
  office.post(orders, mail::Letter::of(Order{2, -5}, "order-2")).IgnoreError();

  // 3. A worker fetches under a 30 s lease and settles each copy exactly once.
  while (true) {
    absl::StatusOr<std::optional<mail::Delivery>> d =
        office.fetch(orders, {.ack = mail::AckMode::kManual});
    if (!d.ok()) return std::cerr << d.status() << "\n", 1;
    if (!d->has_value()) break;  // the queue is empty
    mail::Delivery& delivery = **d;
    const Order* order = delivery.letter().body.get<Order>();
    if (order == nullptr || order->quantity <= 0) {
      std::cout << "discarding " << delivery.letter().id << "\n";
      delivery.ack(mail::Disposition::kDiscard);  // → the dead-letter queue
      continue;
    }
    std::cout << "shipping order " << order->id << " x" << order->quantity << "\n";
    delivery.ack(mail::Disposition::kHandled);
  }

  // 4. The dead-letter record says why it died.
  absl::StatusOr<mail::MailAddress> dlq = office.dead_letter_topic(orders);
  absl::StatusOr<std::optional<mail::Delivery>> dead = office.fetch(dlq->canonical());
  if (!dead.ok() || !dead->has_value()) return 1;
  const postal::wire::Headers& h = (*dead)->letter().headers;
  std::cout << "dead letter " << (*dead)->letter().id << " from "
            << h.get(mail::kDeadLetterTopic).value_or("?") << ": "
            << h.get(mail::kDeadLetterReason).value_or("?") << "\n";

  // 5. A subscriber gets every letter posted while it is subscribed. This one fails once with
  //    a retriable error; the provider calls it again after the backoff.
  absl::Notification billed;
  absl::StatusOr<mail::Subscription> billing = office.subscribe(
      "mem:billing@shop.example/invoices", [&](const mail::Letter& letter) -> absl::Status {
        uint64_t attempt = letter.headers.get(mail::kAttempt).value_or(0);
        if (attempt == 1) return mail::RetriableError("ledger is busy");
        std::cout << "billed " << letter.body.text().value_or("?") << " on attempt " << attempt
                  << "\n";
        billed.Notify();
        return absl::OkStatus();  // handled
      });
  if (!billing.ok()) return 1;
  office.post("mem:billing@shop.example/invoices", mail::Letter::text("invoice for order-1"))
      .IgnoreError();
  if (!billed.WaitForNotificationWithTimeout(absl::Seconds(10))) return 1;
  office.wait_idle(absl::Seconds(10)).IgnoreError();

  // 6. Status: every mailbox the provider knows, as JSON.
  for (const mail::MailboxStatus& s : office.status().addresses) std::cout << s.to_json() << "\n";
  office.stop();  // tears down `billing`; the backlog stays
  return 0;
}
