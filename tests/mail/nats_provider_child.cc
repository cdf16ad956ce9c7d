// nats_provider_child: a second process on a nats provider, for nats_conformance_test.cc.
//
//   nats_provider_child URL PREFIX ADDRESS
//       connects with a 1 s server ack wait, takes one copy of ADDRESS under a lease that never
//       expires (waiting up to 60 s for one), prints "holding TEXT", then waits to be killed.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "postal/mail/nats_provider.h"
#include "postal/mail/post_office.h"

namespace mail = postal::mail;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fputs("usage: nats_provider_child URL PREFIX ADDRESS\n", stderr);
    return 2;
  }
  absl::StatusOr<std::unique_ptr<mail::NatsProvider>> p = mail::NatsProvider::create(
      {.url = argv[1], .prefix = argv[2], .server_ack_wait = absl::Seconds(1)});
  mail::PostOffice office;
  if (!p.ok() || !office.register_provider(*std::move(p)).ok() || !office.start().ok()) {
    std::fputs("cannot start the nats provider\n", stderr);
    return 1;
  }
  absl::StatusOr<std::vector<mail::Delivery>> got =
      office.fetch_batch(argv[3], {.ack = mail::AckMode::kManual,
                                   .ack_timeout = absl::ZeroDuration(),
                                   .max_messages = 1,
                                   .max_wait = absl::Seconds(60)});
  if (!got.ok() || got->empty()) {
    std::fputs("nothing to hold\n", stderr);
    return 1;
  }
  std::printf("holding %s\n", got->front().letter().body.text().value_or("?").c_str());
  std::fflush(stdout);
  while (true) ::pause();
}
