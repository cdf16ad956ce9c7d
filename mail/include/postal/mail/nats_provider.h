// nats_provider.h — `NatsProvider`, the `nats:` scheme: queue mailboxes kept in NATS JetStream,
// shared by every process that reaches the cluster (issue 15; docs/mail.md, "nats").
//
//   auto p = NatsProvider::create({.url = "nats://127.0.0.1:4222"});
//   office.register_provider(*std::move(p));
//   office.post("nats://orders@shop.test/inbox", Letter::text("hi"));
//   auto d = office.fetch("nats://orders@shop.test/inbox", {.ack = AckMode::kManual});
//
// The mapping (decisions.md, "The nats provider"):
//   mailbox            one subject `<p>.queue.<hex of the canonical address>` of one work-queue
//                      stream `<P>_QUEUE` (file storage), so many mailboxes cost one stream
//   fetch              a pull from the mailbox's durable consumer, shared by every process and
//                      every fetch (JetStream's queue group); messages come in stream order,
//                      redelivered copies first
//   settlement         handled = ack, unhandled = nak, discard and terminate = term
//                      (each confirmed by the server before `ack()` returns true)
//   lease              the server's ack wait is the backstop (a process that dies holding
//                      leases gets them redelivered after `server_ack_wait`); the lease a fetch
//                      asks for runs on this provider's clock, and while it runs the provider
//                      tells the server the copy is in progress
//   nack(delay)        the copy stays held until `delay` has passed on the provider's clock,
//                      then goes back (JetStream 2.9's nak delay runs on the server's clock)
//   mbx-round          the server's delivery count
//
// What JetStream cannot give, declared by `can()` instead of imitated:
//   * subscribe (M-KIND-1): a post is pushed to every live subscriber *or* queued, decided by the
//     broker at the moment of the post. A stock nats-server cannot tell a publisher whether a
//     consumer exists in a way that also settles every pushed copy (M-RETRY-1); consumers pull.
//   * peek, locate, settle-by-key, dead letters, parking, policies, retained mailboxes
//     (the NATS *store*, nats_mail_store.h, serves retained mailboxes to a MailboxHost or mq9).
// Status counts are the server's (messages in the subject, the consumer's ack-pending count),
// corrected by what this process itself returned and has not seen handed out again; another
// process's nak shows as in flight here until the copy is handed out again. Last activity is
// this process's.
//
// Errors: IoFailed naming the server when the cluster cannot be reached; the contract's
// statuses otherwise. While the server is away nothing is held back for a later resend (a
// settlement reported false never takes effect afterwards), but a post that timed out may still
// have reached the server, as with any broker: it is then stored once. Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/mail/clock.h"
#include "postal/mail/mail_provider.h"

namespace postal::mail {

struct NatsProviderOptions {
  std::string url = "nats://127.0.0.1:4222";  // comma-separated for a cluster
  // Names the stream and subjects: [A-Z0-9_], 1–32 characters. Providers with one prefix on one
  // cluster share their mailboxes; other prefixes are apart.
  std::string prefix = "POSTAL";
  std::string token = {};  // the server's authorization token, if it asks for one
  int replicas = 1;        // of the stream and the consumers: 1, or 3 in a cluster
  absl::Duration timeout = absl::Seconds(5);  // each request to the server
  // The consumers' ack wait: how long a copy handed to a process that then died stays unseen.
  // A live process keeps its held copies in progress well within it.
  absl::Duration server_ack_wait = absl::Seconds(30);
  // Copies unsettled at once per mailbox (the consumer's max_ack_pending).
  int64_t max_held = 65536;
  std::shared_ptr<Clock> clock = nullptr;  // leases, nak delays, long polls; null: SystemClock
};

class NatsProvider final : public MailProvider, private MailAdmin {
 public:
  static constexpr std::string_view kScheme = "nats";

  // InvalidArgument for a bad prefix, replica count or duration. Connects at `start()`.
  static absl::StatusOr<std::unique_ptr<NatsProvider>> create(NatsProviderOptions options);
  ~NatsProvider() override;  // stop() without purge

  std::string_view scheme() const override { return kScheme; }
  bool can(Capability op, const MailAddress* address = nullptr) const override;

  // Connects and finds or creates the stream; IoFailed when no server answers.
  absl::Status start() override;
  // Returns every copy this process holds (nak) and disconnects; `purge` also empties the
  // stream, for every process of this prefix.
  void stop(const StopOptions& options) override;

  absl::StatusOr<PostReceipt> post(const MailAddress& to, Letter letter) override;
  // Many posts in flight on one connection (up to 4,096 wait for their ack); `done` runs on the
  // provider's ack thread once the server stored the letter.
  void post_async(const MailAddress& to, Letter letter, PostDone done) override;
  absl::StatusOr<Subscription> subscribe(const MailAddress& address, MailHandler handler,
                                         const SubscribeOptions& options) override;
  absl::StatusOr<std::optional<Delivery>> fetch(const MailAddress& address,
                                                const FetchOptions& options) override;
  absl::StatusOr<std::vector<Delivery>> fetch_batch(const MailAddress& address,
                                                    const FetchOptions& options) override;
  absl::StatusOr<MailboxStatus> status(const MailAddress& address) override;
  // No push deliveries: always OK.
  absl::Status wait_idle(absl::Time deadline) override;
  // recover, recover_all, clear, list_status (every mailbox of the prefix).
  MailAdmin* admin() override { return this; }

  struct State;  // nats_provider_state.h

 private:
  explicit NatsProvider(NatsProviderOptions options);
  absl::StatusOr<AdminResult> run(const AdminRequest& request) override;
  absl::Status check_running(std::string_view verb, const MailAddress& address) const;
  // Strips and mints the system headers of `letter` posted to `to`; its receipt.
  PostReceipt mint(const MailAddress& to, Letter& letter) const;

  std::shared_ptr<State> state_;
};

}  // namespace postal::mail
