// M-INBOX-4: an outbox row exists exactly when the handler's writes do (commit, failure,
// stale claim), and the publisher sends committed events, at least once, with a stable id, to a
// mail address (the mem provider here) or to an actor port fronted by another inbox
// (postal.InboxPort on a proc in this process; across a killed and restarted proc in
// inbox_port_topology_test.cc).
#include "postal/mail/outbox.h"

#include <gtest/gtest.h>

#include "inbox_test_support.h"
#include "postal/mail/inbox_letter.h"
#include "postal/mail/inbox_port.h"
#include "postal/mail/inbox_worker.h"
#include "postal/mail/mem_provider.h"
#include "postal/postal.h"
#include "postal/wire/absl_compat.h"
#include "support/virtual_time_proc.h"

namespace postal::mail::testing {
namespace {

constexpr char kConsumer[] = "orders.projection.v1";
constexpr char kAudit[] = "mem:svc@example.com/audit";

class OutboxTest : public InboxTest {
 protected:
  void SetUp() override {
    InboxTest::SetUp();
    inbox_ = open_inbox();
    exec_sql(file(), "CREATE TABLE effect (message_id TEXT NOT NULL)");
    ASSERT_TRUE(office_.register_provider(*MemProvider::create({.bus = MemBus::isolated()})).ok());
    ASSERT_TRUE(office_.start().ok());
  }
  std::filesystem::path file() const { return dir_ / "inbox.db"; }
  int64_t count(const std::string& sql) const { return query_int(file(), sql); }

  // The handler: one effect row and one outbox event, then `fate` decides.
  std::unique_ptr<InboxWorker> worker(std::function<absl::Status(HandlerContext&)> fate,
                                      InboxWorkerOptions options = {}) {
    std::vector<HandlerRegistration> handlers;
    handlers.push_back(
        {.consumer = kConsumer,
         .supports = {{"order.created", 1}},
         .handler = [fate, destination = destination_](std::string_view payload,
                                                       HandlerContext& ctx) -> absl::Status {
           const std::string& id = ctx.record.message.message_id;
           absl::Status s = ctx.tx.execute("INSERT INTO effect (message_id) VALUES (?)", {id});
           if (!s.ok()) return s;
           OutboxEvent e;
           e.event_id = "projected:" + id;
           e.destination = destination;
           e.event_type = "order.projected";
           e.payload = std::string(payload);
           e.metadata = {{"causation-id", id}};
           if (s = Outbox::emit(ctx.tx, e); !s.ok()) return s;
           return fate(ctx);
         }});
    auto w = InboxWorker::create(*inbox_, std::move(handlers), options);
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? *std::move(w) : nullptr;
  }

  std::unique_ptr<Inbox> inbox_;
  PostOffice office_;
  std::string destination_ = kAudit;  // where the handler's event goes
};

TEST_F(OutboxTest, M_INBOX_4_OutboxRowExistsExactlyWhenTheHandlersWritesDo) {
  ASSERT_TRUE(inbox_->accept(message("ok")).ok());
  ASSERT_TRUE(inbox_->accept(message("fails")).ok());
  auto w = worker([](HandlerContext& ctx) {
    return ctx.record.message.message_id == "fails" ? absl::InternalError("after the emit")
                                                    : absl::OkStatus();
  });
  absl::StatusOr<ProcessResult> r = w->run_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1);
  EXPECT_EQ(r->retryable, 1);
  EXPECT_EQ(count("SELECT count(*) FROM effect WHERE message_id = 'ok'"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM outbox WHERE event_id = 'projected:ok'"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM effect WHERE message_id = 'fails'"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM outbox WHERE event_id = 'projected:fails'"), 0);
}

TEST_F(OutboxTest, M_INBOX_4_AStaleClaimsOutboxRowRollsBackWithItsWrites) {
  ASSERT_TRUE(inbox_->accept(message("e-1")).ok());
  auto w = worker(
      [&](HandlerContext&) {
        clock_->advance(absl::Seconds(11));  // the lease ends inside the handler
        return absl::OkStatus();
      },
      {.lease = absl::Seconds(10), .handler_timeout = absl::Minutes(1)});
  EXPECT_EQ(w->run_once()->stale, 1);
  EXPECT_EQ(count("SELECT count(*) FROM effect"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM outbox"), 0);
}

TEST_F(OutboxTest, M_INBOX_4_PublisherSendsCommittedEventsWithAStableIdToAMemMailbox) {
  ASSERT_TRUE(inbox_->accept(message("e-1", R"({"orderId":7})")).ok());
  auto w = worker([](HandlerContext&) { return absl::OkStatus(); });
  ASSERT_EQ(w->run_once()->completed, 1);
  auto publisher = OutboxPublisher::create(*inbox_, office_);
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  absl::StatusOr<PublishResult> sent = (*publisher)->publish_once();
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_EQ(sent->sent, 1);
  EXPECT_EQ((*publisher)->publish_once()->sent, 0);  // sent once, marked
  absl::StatusOr<std::optional<Delivery>> got = office_.fetch(kAudit);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  absl::StatusOr<InboxEvent> event = from_letter((*got)->letter());
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->event_id, "projected:e-1");
  EXPECT_EQ(event->event_type, "order.projected");
  EXPECT_EQ(event->payload, R"({"orderId":7})");
  EXPECT_EQ(event->metadata.at("causation-id"), "e-1");
}

TEST_F(OutboxTest, M_INBOX_4_UnsentRowsAreSentAgainWithTheSameId) {
  ASSERT_TRUE(inbox_->accept(message("e-1")).ok());
  auto w = worker([](HandlerContext&) { return absl::OkStatus(); });
  ASSERT_EQ(w->run_once()->completed, 1);
  auto publisher = OutboxPublisher::create(*inbox_, office_);
  ASSERT_EQ((*publisher)->publish_once()->sent, 1);
  // A crash after the post and before the mark: the row is unsent again, and is resent.
  exec_sql(file(), "UPDATE outbox SET published_ms = NULL");
  ASSERT_EQ((*publisher)->publish_once()->sent, 1);
  absl::StatusOr<std::vector<Letter>> queued = office_.peek(kAudit, 10);
  ASSERT_TRUE(queued.ok());
  ASSERT_EQ(queued->size(), 2u);
  EXPECT_EQ((*queued)[0].id, (*queued)[1].id);  // the next inbox sees one identity
}

TEST_F(OutboxTest, M_INBOX_4_AFailedPostIsCountedAndRetried) {
  ASSERT_TRUE(inbox_->accept(message("e-1")).ok());
  auto w = worker([](HandlerContext&) { return absl::OkStatus(); });
  ASSERT_EQ(w->run_once()->completed, 1);
  exec_sql(file(), "UPDATE outbox SET destination = 'nosuch:svc@example.com/x'");
  auto publisher = OutboxPublisher::create(*inbox_, office_);
  absl::StatusOr<PublishResult> r = (*publisher)->publish_once();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->failed, 1);
  EXPECT_EQ(count("SELECT count(*) FROM outbox WHERE published_ms IS NULL AND attempts = 1"), 1);
}

// A downstream service: postal.InboxPort on its own inbox file, on a proc of this process.
class OutboxToActorTest : public OutboxTest {
 protected:
  void SetUp() override {
    OutboxTest::SetUp();
    auto downstream = Inbox::open(downstream_file(), {.consumers = {"audit.v1"}});
    ASSERT_TRUE(downstream.ok()) << downstream.status();
    InboxPortBinding binding;
    binding.source = "orders";
    binding.consumer = "audit.v1";
    auto port = actors::spawn<InboxPortActor>(t_.proc, "audit", *std::move(downstream), binding);
    ASSERT_TRUE(port.ok()) << port.status();
    destination_ = absl::StrCat(sv(kOutboxActorScheme), port->addr().to_string());
  }
  std::filesystem::path downstream_file() const { return dir_ / "downstream.db"; }
  int64_t downstream(const std::string& sql) const { return query_int(downstream_file(), sql); }
  std::unique_ptr<OutboxPublisher> publisher() {
    auto p = OutboxPublisher::create(*inbox_, OutboxTargets{.actors = &t_.client});
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  }
  test_support::VirtualTimeProc t_;
};

TEST_F(OutboxToActorTest, M_INBOX_4_AnActorPortDestinationGetsTheEventOnceAcrossAResend) {
  ASSERT_TRUE(inbox_->accept(message("e-1")).ok());
  auto w = worker([](HandlerContext&) { return absl::OkStatus(); });
  ASSERT_EQ(w->run_once()->completed, 1);
  auto p = publisher();
  absl::StatusOr<PublishResult> sent = p->publish_once();
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_EQ(sent->sent, 1) << count("SELECT count(*) FROM outbox WHERE last_error IS NOT NULL");
  EXPECT_EQ(downstream("SELECT count(*) FROM inbox WHERE message_id = 'projected:e-1' AND "
                       "consumer = 'audit.v1' AND source = 'orders'"),
            1);
  // A crash after the send and before the mark: sent again, one record downstream.
  exec_sql(file(), "UPDATE outbox SET published_ms = NULL");
  ASSERT_EQ(p->publish_once()->sent, 1);
  EXPECT_EQ(downstream("SELECT count(*) FROM inbox"), 1);
}

TEST_F(OutboxToActorTest, M_INBOX_4_AnActorThatIsNotThereFailsTheSendWhichStaysUnsent) {
  destination_ = absl::StrCat(sv(kOutboxActorScheme), "nobody.", t_.proc.id().to_string(), "@",
                              t_.proc.location().to_string());
  ASSERT_TRUE(inbox_->accept(message("e-1")).ok());
  auto w = worker([](HandlerContext&) { return absl::OkStatus(); });
  ASSERT_EQ(w->run_once()->completed, 1);
  absl::StatusOr<PublishResult> r = publisher()->publish_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->failed, 1);
  EXPECT_EQ(count("SELECT count(*) FROM outbox WHERE published_ms IS NULL AND attempts = 1 AND "
                  "last_error IS NOT NULL"),
            1);
  EXPECT_EQ(downstream("SELECT count(*) FROM inbox"), 0);
}

TEST_F(OutboxTest, M_INBOX_4_EmitRefusesADestinationThatIsNeitherAMailAddressNorAnActor) {
  for (const char* bad : {"actor:not an address", "just text"}) {
    destination_ = bad;
    auto w = worker([](HandlerContext&) { return absl::OkStatus(); });
    ASSERT_TRUE(inbox_->accept(message(bad)).ok());
    absl::StatusOr<ProcessResult> r = w->run_once();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->completed, 0) << bad;  // the handler's emit failed, so did the handler
  }
  EXPECT_EQ(count("SELECT count(*) FROM outbox"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM effect"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM inbox WHERE last_error LIKE '%InvalidPayload%'"), 2);
}

}  // namespace
}  // namespace postal::mail::testing
