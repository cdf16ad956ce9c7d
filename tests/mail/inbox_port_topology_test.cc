// M-INBOX-1 across processes: an actor port fronted by an inbox (InboxPost, inbox_port.h) on a
// real proc (mail_test_proc's test.CrashOnceInboxPort) that commits the first event and is
// killed with SIGKILL before it replies. The sender learns nothing, so it sends the event again,
// with the same stable id, over the channel to the restarted proc: the inbox answers duplicate
// with the same record, and there is one record. Then the outbox publisher (M-INBOX-4) sends to
// the same port across the channel, twice for one event (a lost mark), and it is one record too.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "inbox/inbox_test_support.h"
#include "postal/mail/inbox_errors.h"
#include "postal/mail/inbox_port.h"
#include "postal/mail/outbox.h"
#include "postal/routing/host.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

using testing::exec_sql;
using testing::query_int;

constexpr absl::Duration kDeadline = absl::Seconds(30);
constexpr absl::Duration kNoAnswer = absl::Seconds(2);  // the killed proc never replies
constexpr char kPortType[] = "test.CrashOnceInboxPort";

class InboxPortTopologyTest : public test_support::ScratchDirTest {
 protected:
  void TearDown() override { host_.reset(); }

  std::filesystem::path inbox_file() const { return dir_ / "orders.db"; }
  actors::SpawnParams params() const {
    actors::SpawnParams p;
    p.set_value("file", inbox_file().string());
    p.set_value("consumer", std::string("orders.projection.v1"));
    p.set_value("crash_marker", (dir_ / "crashed").string());
    return p;
  }

  void up() {
    routing::TopologySpec spec;
    spec.name = "inbox";
    spec.on_proc_exit = routing::OnProcExit::kIgnore;
    spec.procs.push_back(
        {"sink",
         *runtime::ChannelAddr::parse(absl::StrCat("ipc://", dir_.string(), "/sink.sock")),
         std::nullopt,
         1,
         MAIL_TEST_PROC,
         {},
         std::nullopt});
    routing::HostOptions o;
    o.postal_binary = POSTAL_BINARY;
    o.proc_workers = 1;
    auto host = routing::Host::up(spec, o);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = *std::move(host);
    spawn_port();
  }

  // (Re)spawns the port on sink; right after a restart the first dials may still fail.
  void spawn_port() {
    absl::StatusOr<runtime::ActorAddr> a = absl::UnavailableError("not spawned yet");
    for (int attempt = 0; attempt < 20 && !a.ok(); ++attempt) {
      a = host_->spawn("sink", kPortType, "orders", params());
    }
    ASSERT_TRUE(a.ok()) << a.status();
    port_ = *a;
  }

  absl::StatusOr<InboxPostReply> post(const InboxEvent& e, absl::Duration timeout) {
    const runtime::PortRef<InboxPost> to(
        port_.port(runtime::Port::handler(wire::type_hash<InboxPost>())));
    return runtime::request(host_->client(), to, InboxPost{.event = e}, timeout,
                            with_message_id(e.event_id));
  }

  int64_t records(const std::string& where = "1") const {
    return query_int(inbox_file(), absl::StrCat("SELECT count(*) FROM inbox WHERE ", where));
  }

  std::unique_ptr<routing::Host> host_;
  runtime::ActorAddr port_;
};

InboxEvent order(std::string id, int n) {
  InboxEvent e;
  e.event_id = std::move(id);
  e.event_type = "order.created";
  e.payload = absl::StrCat(R"({"orderId":)", n, "}");
  return e;
}

TEST_F(InboxPortTopologyTest, M_INBOX_1_AnEventResentToTheRestartedProcIsOneRecord) {
  up();
  // The proc commits the accept and dies before replying: the sender sees no answer.
  absl::StatusOr<InboxPostReply> lost = post(order("order-7", 7), kNoAnswer);
  EXPECT_FALSE(lost.ok()) << "the port should have died before replying";
  std::optional<routing::ProcExit> exit = host_->next_exit(kDeadline);
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(WIFSIGNALED(exit->wait_status) && WTERMSIG(exit->wait_status) == SIGKILL)
      << exit->to_string();
  ASSERT_EQ(records("message_id = 'order-7'"), 1);  // committed before the kill
  const int64_t id = query_int(inbox_file(), "SELECT id FROM inbox WHERE message_id = 'order-7'");

  ASSERT_TRUE(host_->restart("sink").ok());
  spawn_port();
  absl::StatusOr<InboxPostReply> again = post(order("order-7", 7), kDeadline);  // the resend
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE(again->accepted()) << again->to_status();
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->record_id, id);
  EXPECT_EQ(records(), 1);

  // The same id with another payload is refused, and the record is unchanged (M-INBOX-2).
  absl::StatusOr<InboxPostReply> conflict = post(order("order-7", 8), kDeadline);
  ASSERT_TRUE(conflict.ok()) << conflict.status();
  EXPECT_TRUE(IsIdentityConflict(conflict->to_status())) << conflict->to_status();
  absl::StatusOr<InboxPostReply> next = post(order("order-8", 8), kDeadline);
  ASSERT_TRUE(next.ok() && next->accepted()) << next.status();
  EXPECT_FALSE(next->duplicate);
  EXPECT_EQ(records(), 2);
}

TEST_F(InboxPortTopologyTest, M_INBOX_4_TheOutboxPublishesToAnActorPortOnAnotherProc) {
  std::ofstream(dir_ / "crashed") << "do not crash\n";
  up();
  auto upstream = Inbox::open(dir_ / "upstream.db", {.consumers = {"c"}});
  ASSERT_TRUE(upstream.ok()) << upstream.status();
  // An outbox row as a committed handler leaves it (Outbox::emit is covered in outbox_test.cc).
  exec_sql(dir_ / "upstream.db",
           absl::StrCat("INSERT INTO outbox (event_id, destination, event_type, schema_version, "
                        "payload, metadata, created_ms) VALUES ('projected:o-1', '",
                        sv(kOutboxActorScheme), port_.to_string(),
                        "', 'order.projected', 1, '{\"orderId\":1}', '{}', 0)"));
  auto publisher = OutboxPublisher::create(**upstream, OutboxTargets{.actors = &host_->client()});
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  absl::StatusOr<PublishResult> r = (*publisher)->publish_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sent, 1) << query_int(dir_ / "upstream.db", "SELECT attempts FROM outbox");
  exec_sql(dir_ / "upstream.db", "UPDATE outbox SET published_ms = NULL");  // the mark was lost
  EXPECT_EQ((*publisher)->publish_once()->sent, 1);
  EXPECT_EQ(records("message_id = 'projected:o-1'"), 1);
}

}  // namespace
}  // namespace postal::mail
