// The mq9 bridge (mail/include/postal/mail/mq9_bridge.h, docs/mq9.md) driven by a stock NATS
// client: libnats talks to the bridge as it would to a nats-server. Rules: M-KIND-2 (store,
// then push; every subscribe replays), M-PRIO-1 (critical, urgent, normal, FIFO within each),
// M-BOX-1 (idempotent create keeps the first TTL), M-BOX-4 (public listing, private ids),
// M-RECV-4 (queue groups), M-RECV-5 (delete), and the bounds against hostile input.
#include <nats/nats.h>

#include <poll.h>

#include <atomic>
#include <set>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "postal/mail/clock.h"
#include "postal/mail/mem_mail_store.h"
#include "postal/mail/mq9_bridge.h"
#include "postal/mail/nats_mail_store.h"
#include "postal/mail/retained_mailboxes.h"
#include "postal/mail/sqlite_mail_store.h"
#include "support/nats_server.h"

namespace postal::mail {
namespace {

using nlohmann::json;

// Deadline for what must arrive (only a failing run waits it out): generous, since under a
// sanitizer and a loaded machine a durable append or a replay can take seconds.
constexpr int64_t kWaitMs = 20000;

// One libnats connection, closed and destroyed with the object.
class Client {
 public:
  explicit Client(const std::string& url, const char* token = nullptr, bool reconnect = false) {
    natsOptions* opts = nullptr;
    natsOptions_Create(&opts);
    natsOptions_SetURL(opts, url.c_str());
    natsOptions_SetAllowReconnect(opts, reconnect);
    if (token) natsOptions_SetToken(opts, token);
    natsOptions_SetErrorHandler(opts, &Client::on_error, this);
    status_ = natsConnection_Connect(&nc_, opts);
    natsOptions_Destroy(opts);
  }
  ~Client() {
    for (natsSubscription* s : subs_) natsSubscription_Destroy(s);
    if (nc_) {
      natsConnection_Close(nc_);
      natsConnection_Destroy(nc_);
    }
  }
  natsStatus status() const { return status_; }
  natsConnection* nc() { return nc_; }

  // A request; the reply's body parsed as JSON (null on a timeout).
  json request(const std::string& subject, const std::string& body) {
    natsMsg* reply = nullptr;
    natsStatus s = natsConnection_Request(&reply, nc_, subject.c_str(), body.data(),
                                          static_cast<int>(body.size()), kWaitMs);
    if (s != NATS_OK) return nullptr;
    json j = json::parse(std::string(natsMsg_GetData(reply), natsMsg_GetDataLength(reply)),
                         nullptr, false);
    natsMsg_Destroy(reply);
    return j;
  }
  std::string create(const std::string& body) {
    json r = request("$mq9.AI.MAILBOX.CREATE", body);
    return r.is_object() && r.contains("mail_id") ? r["mail_id"].get<std::string>() : "";
  }
  uint64_t post(const std::string& mailbox, const std::string& priority, const std::string& body) {
    std::string subject = "$mq9.AI.MAILBOX.MSG." + mailbox;
    if (!priority.empty()) subject += "." + priority;
    json r = request(subject, body);
    return r.is_object() && r.contains("msg_id") ? r["msg_id"].get<uint64_t>() : 0;
  }
  natsSubscription* subscribe(const std::string& subject, const char* queue = nullptr) {
    natsSubscription* sub = nullptr;
    natsStatus s = queue ? natsConnection_QueueSubscribeSync(&sub, nc_, subject.c_str(), queue)
                         : natsConnection_SubscribeSync(&sub, nc_, subject.c_str());
    if (s != NATS_OK) return nullptr;
    natsConnection_Flush(nc_);  // the bridge has seen the SUB
    subs_.push_back(sub);
    return sub;
  }
  int errors() const { return errors_.load(); }
  std::string last_error() {
    absl::MutexLock lock(&mu_);
    return last_error_;
  }

 private:
  static void on_error(natsConnection* nc, natsSubscription*, natsStatus, void* self) {
    auto* c = static_cast<Client*>(self);
    const char* text = nullptr;
    natsConnection_GetLastError(nc, &text);
    absl::MutexLock lock(&c->mu_);
    c->last_error_ = text ? text : "";
    c->errors_.fetch_add(1);
  }

  natsConnection* nc_ = nullptr;
  natsStatus status_ = NATS_ERR;
  std::vector<natsSubscription*> subs_;
  std::atomic<int> errors_{0};
  absl::Mutex mu_;
  std::string last_error_;
};

struct Pushed {
  std::string subject, body, reply, msg_id, priority;
};

// The next message of `sub`, or an empty subject after the deadline.
Pushed next(natsSubscription* sub, int64_t timeout_ms = kWaitMs) {
  natsMsg* m = nullptr;
  if (natsSubscription_NextMsg(&m, sub, timeout_ms) != NATS_OK) return {};
  Pushed p{natsMsg_GetSubject(m), std::string(natsMsg_GetData(m), natsMsg_GetDataLength(m)),
           natsMsg_GetReply(m) ? natsMsg_GetReply(m) : "", "", ""};
  const char* v = nullptr;
  if (natsMsgHeader_Get(m, "Mq9-Msg-Id", &v) == NATS_OK) p.msg_id = v;
  if (natsMsgHeader_Get(m, "Mq9-Priority", &v) == NATS_OK) p.priority = v;
  natsMsg_Destroy(m);
  return p;
}

class Mq9BridgeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { start(); }
  void start(Mq9BridgeOptions options = {}, std::shared_ptr<Clock> clock = nullptr) {
    bridge_.reset();
    mailboxes_.reset();
    std::shared_ptr<MailStore> store;
    if (GetParam() == "sqlite") {
      dir_ = std::filesystem::temp_directory_path() /
             absl::StrCat("mq9_bridge_test_", ::getpid(), "_", counter_++);
      std::filesystem::create_directories(dir_);
      auto s = SqliteMailStore::open(dir_ / "store.db", {.clock = clock});
      ASSERT_TRUE(s.ok()) << s.status();
      store = std::move(*s);
    } else if (GetParam() == "nats") {
      ASSERT_FALSE(test_support::NatsServer::binary().empty()) << test_support::NatsServer::kMissing;
      if (nats_ == nullptr) {
        dir_ = std::filesystem::temp_directory_path() /
               absl::StrCat("mq9_bridge_test_", ::getpid(), "_", counter_++);
        nats_ = std::make_unique<test_support::NatsServer>(dir_ / "nats");
        ASSERT_TRUE(nats_->ready()) << nats_->log();
      }
      // A store of its own on the test's server for each start.
      auto s = NatsMailStore::open(
          {.url = nats_->url(), .prefix = absl::StrCat("MQ9T", counter_++), .clock = clock});
      ASSERT_TRUE(s.ok()) << s.status();
      store = std::move(*s);
    } else {
      store = MemMailStore::create({.clock = clock});
    }
    auto m = RetainedMailboxes::create({.store = store, .clock = clock});
    ASSERT_TRUE(m.ok()) << m.status();
    mailboxes_ = std::move(*m);
    options.mailboxes = mailboxes_;
    auto b = Mq9Bridge::start(std::move(options));
    ASSERT_TRUE(b.ok()) << b.status();
    bridge_ = std::move(*b);
  }
  void TearDown() override {
    bridge_.reset();
    mailboxes_.reset();
    nats_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string url() const { return bridge_->url(); }

  std::shared_ptr<RetainedMailboxes> mailboxes_;
  std::unique_ptr<Mq9Bridge> bridge_;
  std::filesystem::path dir_;
  std::unique_ptr<test_support::NatsServer> nats_;  // the "nats" store's server
  static inline int counter_ = 0;
};

INSTANTIATE_TEST_SUITE_P(Stores, Mq9BridgeTest, ::testing::Values("mem", "sqlite", "nats"),
                         [](const auto& info) { return info.param; });

TEST_P(Mq9BridgeTest, M_KIND_2_APlainSubscribeReplaysInPriorityOrderThenContinuesLive) {
  Client c(url());
  ASSERT_EQ(c.status(), NATS_OK);
  const std::string id = c.create(R"({"ttl":3600,"public":false})");
  ASSERT_EQ(id.size(), 32u) << "a private id is 128 random bits in hex";
  ASSERT_NE(c.post(id, "", "n1"), 0u);
  ASSERT_NE(c.post(id, "urgent", "u1"), 0u);
  ASSERT_NE(c.post(id, "", "n2"), 0u);
  ASSERT_NE(c.post(id, "critical", "c1"), 0u);

  natsSubscription* sub = c.subscribe("$mq9.AI.MAILBOX.MSG." + id + ".*");
  ASSERT_NE(sub, nullptr);
  std::vector<std::string> got;
  for (int i = 0; i < 4; ++i) got.push_back(next(sub).body);
  EXPECT_EQ(got, (std::vector<std::string>{"c1", "u1", "n1", "n2"}));

  ASSERT_NE(c.post(id, "urgent", "live"), 0u);
  Pushed live = next(sub);
  EXPECT_EQ(live.body, "live");
  EXPECT_EQ(live.subject, "$mq9.AI.MAILBOX.MSG." + id + ".urgent");
  EXPECT_EQ(live.priority, "urgent");
  EXPECT_EQ(live.reply, "$mq9.AI.MAILBOX.DELETE." + id + "." + live.msg_id);
  EXPECT_EQ(next(sub, 200).subject, "") << "nothing doubled across the switch";
}

TEST_P(Mq9BridgeTest, M_KIND_2_EverySubscriptionReplaysEverythingTheServerKeepsNoPosition) {
  Client a(url()), b(url());
  const std::string id = a.create(R"({"ttl":60})");
  ASSERT_FALSE(id.empty());
  a.post(id, "", "one");
  a.post(id, "critical", "two");
  natsSubscription* sa = a.subscribe("$mq9.AI.MAILBOX.MSG." + id);
  natsSubscription* sb = b.subscribe("$mq9.AI.MAILBOX.MSG." + id);
  EXPECT_EQ(next(sa).body, "two");
  EXPECT_EQ(next(sa).body, "one");
  EXPECT_EQ(next(sb).body, "two");
  EXPECT_EQ(next(sb).body, "one");
  // Unsubscribing and subscribing again replays again.
  natsSubscription_Unsubscribe(sa);
  natsSubscription* again = a.subscribe("$mq9.AI.MAILBOX.MSG." + id + ".>");
  EXPECT_EQ(next(again).body, "two");
  EXPECT_EQ(next(again).body, "one");
}

TEST_P(Mq9BridgeTest, M_PRIO_1_ASubjectNamingOnePriorityGetsOnlyThatPriority) {
  Client c(url());
  const std::string id = c.create("{}");
  c.post(id, "", "normal");
  c.post(id, "critical", "critical");
  c.post(id, "urgent", "urgent");
  natsSubscription* sub = c.subscribe("$mq9.AI.MAILBOX.MSG." + id + ".critical");
  EXPECT_EQ(next(sub).body, "critical");
  EXPECT_EQ(next(sub, 200).subject, "");
}

TEST_P(Mq9BridgeTest, M_RECV_5_AnsweringAPushedMessageDeletesItSoItNeverReplaysAgain) {
  Client c(url());
  const std::string id = c.create("{}");
  c.post(id, "", "keep");
  c.post(id, "", "done");
  natsSubscription* sub = c.subscribe("$mq9.AI.MAILBOX.MSG." + id);
  EXPECT_EQ(next(sub).body, "keep");
  Pushed done = next(sub);
  ASSERT_EQ(done.body, "done");
  json r = c.request(done.reply, "");
  EXPECT_EQ(r, json({{"deleted", true}}));
  EXPECT_EQ(c.request(done.reply, ""), json({{"deleted", false}})) << "a second delete finds nothing";
  // The explicit subject form, with the msg_id from the header.
  natsSubscription* again = c.subscribe("$mq9.AI.MAILBOX.MSG." + id + ".*");
  EXPECT_EQ(next(again).body, "keep");
  EXPECT_EQ(next(again, 200).subject, "");
}

TEST_P(Mq9BridgeTest, M_BOX_1_CreateIsIdempotentAndKeepsTheFirstTtl) {
  Client c(url());
  json first = c.request("$mq9.AI.MAILBOX.CREATE", R"({"public":true,"name":"task.queue","ttl":3600})");
  ASSERT_TRUE(first.is_object()) << first;
  EXPECT_EQ(first["mail_id"], "task.queue");
  EXPECT_EQ(first["created"], true);
  EXPECT_EQ(first["ttl"], 3600);
  json second = c.request("$mq9.AI.MAILBOX.CREATE", R"({"public":true,"name":"task.queue","ttl":5})");
  EXPECT_EQ(second["created"], false);
  EXPECT_EQ(second["ttl"], 3600);
  EXPECT_EQ(second["expires_at"], first["expires_at"]);
}

TEST_P(Mq9BridgeTest, M_BOX_4_PublicMailboxesAreListedAndWatchedPrivateOnesNever) {
  Client c(url());
  ASSERT_FALSE(c.create(R"({"public":true,"name":"vision.results","ttl":600})").empty());
  ASSERT_FALSE(c.create(R"({"ttl":600})").empty());
  json list = c.request("$mq9.AI.PUBLIC.LIST", "");
  ASSERT_TRUE(list.contains("mailboxes")) << list;
  ASSERT_EQ(list["mailboxes"].size(), 1u) << list;
  EXPECT_EQ(list["mailboxes"][0]["mail_id"], "vision.results");

  natsSubscription* events = c.subscribe("$mq9.AI.PUBLIC.LIST");
  json listed = json::parse(next(events).body);
  EXPECT_EQ(listed["event"], "listed");
  EXPECT_EQ(listed["mailbox"]["mail_id"], "vision.results");
  c.create(R"({"ttl":600})");  // private: no event
  c.create(R"({"public":true,"name":"task.queue","ttl":600})");
  json created = json::parse(next(events).body);
  EXPECT_EQ(created["event"], "created");
  EXPECT_EQ(created["mailbox"]["mail_id"], "task.queue");
  EXPECT_EQ(next(events, 200).subject, "");
}

TEST_P(Mq9BridgeTest, M_BOX_3_WhenTheTtlEndsSubscribersGetOneEndMessageAndTheMailboxIsGone) {
  auto clock = std::make_shared<ManualClock>();
  start({}, clock);
  Client c(url());
  const std::string id = c.create(R"({"ttl":60})");
  c.post(id, "critical", "stored");
  natsSubscription* sub = c.subscribe("$mq9.AI.MAILBOX.MSG." + id + ".*");
  EXPECT_EQ(next(sub).body, "stored");
  clock->advance(absl::Seconds(61));
  natsMsg* end = nullptr;
  ASSERT_EQ(natsSubscription_NextMsg(&end, sub, kWaitMs), NATS_OK);
  const char* why = nullptr;
  ASSERT_EQ(natsMsgHeader_Get(end, "Mq9-Ended", &why), NATS_OK);
  EXPECT_STREQ(why, "MailboxNotFound");
  EXPECT_EQ(natsMsg_GetDataLength(end), 0);
  natsMsg_Destroy(end);
  EXPECT_EQ(next(sub, 200).subject, "") << "nothing after the end";
  json gone = c.request("$mq9.AI.MAILBOX.MSG." + id, "late");
  EXPECT_EQ(gone["error"]["code"], "MailboxNotFound") << gone;
}

TEST_P(Mq9BridgeTest, M_RECV_4_AQueueGroupHandsEachLiveMessageToOneMember) {
  Client producer(url()), w1(url()), w2(url());
  ASSERT_FALSE(producer.create(R"({"public":true,"name":"jobs","ttl":600})").empty());
  natsSubscription* s1 = w1.subscribe("$mq9.AI.MAILBOX.MSG.jobs.*", "workers");
  natsSubscription* s2 = w2.subscribe("$mq9.AI.MAILBOX.MSG.jobs.*", "workers");
  constexpr int kJobs = 20;
  for (int i = 0; i < kJobs; ++i) ASSERT_NE(producer.post("jobs", "", absl::StrCat("job", i)), 0u);
  std::set<std::string> seen;
  int from1 = 0, from2 = 0;
  // Until every job came (a deadline, not a quiet gap: a loaded machine pauses), then a short
  // look at both for a job delivered twice.
  const absl::Time deadline = absl::Now() + absl::Milliseconds(kWaitMs);
  while (seen.size() < static_cast<size_t>(kJobs) && absl::Now() < deadline) {
    for (auto [sub, count] : {std::pair{s1, &from1}, std::pair{s2, &from2}}) {
      Pushed p = next(sub, 50);
      if (p.subject.empty()) continue;
      ++*count;
      EXPECT_TRUE(seen.insert(p.body).second) << p.body << " twice";
    }
  }
  EXPECT_EQ(next(s1, 200).subject, "") << "a job twice";
  EXPECT_EQ(next(s2, 200).subject, "") << "a job twice";
  EXPECT_EQ(seen.size(), static_cast<size_t>(kJobs));
  EXPECT_GT(from1, 0);
  EXPECT_GT(from2, 0);
}

TEST_P(Mq9BridgeTest, FailuresComeBackAsErrorRepliesAndTheConnectionStays) {
  Client c(url());
  json missing = c.request("$mq9.AI.MAILBOX.MSG.nobody", "x");
  EXPECT_EQ(missing["error"]["code"], "MailboxNotFound") << missing;
  json bad = c.request("$mq9.AI.MAILBOX.CREATE", R"({"public":true,"name":"a.critical"})");
  EXPECT_EQ(bad["error"]["code"], "INVALID_ARGUMENT") << bad;
  json bad_ttl = c.request("$mq9.AI.MAILBOX.CREATE", R"({"ttl":"soon"})");
  EXPECT_EQ(bad_ttl["error"]["code"], "INVALID_ARGUMENT") << bad_ttl;
  json unknown = c.request("$mq9.AI.MAILBOX.FETCH.x", "");
  EXPECT_EQ(unknown["error"]["code"], "INVALID_ARGUMENT") << unknown;
  // A subscription to a mailbox that does not exist is refused as nats-server refuses one.
  natsSubscription* sub = c.subscribe("$mq9.AI.MAILBOX.MSG.nobody");
  ASSERT_NE(sub, nullptr);
  for (int i = 0; i < 100 && c.errors() == 0; ++i) natsConnection_Flush(c.nc());
  EXPECT_EQ(c.errors(), 1);
  EXPECT_NE(c.last_error().find("MailboxNotFound"), std::string::npos) << c.last_error();
  EXPECT_FALSE(c.create("{}").empty()) << "the connection is still usable";
}

TEST_P(Mq9BridgeTest, PlainSubjectsAreRoutedBetweenClientsAsByANatsServer) {
  Client a(url()), b(url());
  natsSubscription* sub = b.subscribe("chat.*");
  natsConnection_PublishString(a.nc(), "chat.room1", "hello");
  natsConnection_Flush(a.nc());
  Pushed p = next(sub);
  EXPECT_EQ(p.subject, "chat.room1");
  EXPECT_EQ(p.body, "hello");
}

// A raw TCP client: what it reads until the bridge closes the connection.
class Raw {
 public:
  explicit Raw(uint16_t port) : socket_(io_) {
    socket_.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  }
  void send(std::string_view bytes) { boost::asio::write(socket_, boost::asio::buffer(bytes)); }
  // What arrives until `needle` has been read `times` times, or 5 s passed.
  std::string read_until(std::string_view needle, int times) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    std::string out;
    char buf[4096];
    auto count = [&] {
      int n = 0;
      for (size_t at = out.find(needle); at != std::string::npos; at = out.find(needle, at + 1)) ++n;
      return n;
    };
    while (count() < times) {
      pollfd p{socket_.native_handle(), POLLIN, 0};
      const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
      boost::system::error_code ec;
      size_t n = socket_.read_some(boost::asio::buffer(buf), ec);
      if (ec) break;
      out.append(buf, n);
    }
    return out;
  }
  // Everything until EOF (the bridge's close), bounded by the bridge's own timers.
  std::string read_all() {
    std::string out;
    boost::system::error_code ec;
    char buf[4096];
    for (;;) {
      size_t n = socket_.read_some(boost::asio::buffer(buf), ec);
      if (ec) break;
      out.append(buf, n);
    }
    return out;
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
};

TEST_P(Mq9BridgeTest, MalformedInputGetsTheNatsErrorAndACloseAndOthersAreUnaffected) {
  Client bystander(url());
  const std::string id = bystander.create("{}");
  {
    Raw raw(bridge_->port());
    raw.send("CONNECT {}\r\nHELLO there\r\n");
    std::string got = raw.read_all();
    EXPECT_NE(got.find("-ERR 'Unknown Protocol Operation'"), std::string::npos) << got;
  }
  {
    Raw raw(bridge_->port());
    raw.send("CONNECT {}\r\nPUB $mq9.AI.MAILBOX.MSG.x 99999999\r\n");
    std::string got = raw.read_all();
    EXPECT_NE(got.find("-ERR 'Maximum Payload Violation'"), std::string::npos) << got;
  }
  {
    Raw raw(bridge_->port());
    raw.send("CONNECT {}\r\nSUB " + std::string(5000, 'a'));
    std::string got = raw.read_all();
    EXPECT_NE(got.find("-ERR 'Maximum Control Line Exceeded'"), std::string::npos) << got;
  }
  EXPECT_NE(bystander.post(id, "", "still here"), 0u);
  EXPECT_GE(bridge_->stats().protocol_errors, 3u);
}

TEST_P(Mq9BridgeTest, PipelinedVerbsRunInTheOrderSent) {
  // CREATE and a publish to the new mailbox in one write, the publish not waiting for CREATE's
  // reply: the publish must see the mailbox (verbs run in the order sent; a publish that took a
  // shortcut past a queued CREATE would fail MailboxNotFound, or its reply would beat the SUB).
  for (int round = 0; round < 20; ++round) {
    Raw raw(bridge_->port());
    const std::string name = absl::StrCat("pipelined", round);
    const std::string create = absl::StrCat(R"({"public":true,"name":")", name, R"("})");
    raw.send(absl::StrCat("CONNECT {}\r\nSUB _INBOX.r.* 1\r\nPUB $mq9.AI.MAILBOX.CREATE _INBOX.r.1 ",
                          create.size(), "\r\n", create, "\r\nPUB $mq9.AI.MAILBOX.MSG.", name,
                          " _INBOX.r.2 1\r\nx\r\n"));
    const std::string got = raw.read_until("MSG _INBOX.r.", 2);
    EXPECT_NE(got.find("\"created\":true"), std::string::npos) << got;
    EXPECT_NE(got.find("{\"msg_id\":"), std::string::npos) << got;
    EXPECT_EQ(got.find("MailboxNotFound"), std::string::npos) << got;
  }
}

TEST_P(Mq9BridgeTest, AWrongOrMissingTokenIsRefusedBeforeAnythingIsRead) {
  Mq9BridgeOptions options;
  options.auth_token = "s3cret-token";
  options.connect_timeout = absl::Milliseconds(300);
  start(options);
  Client wrong(url(), "not-it");
  EXPECT_NE(wrong.status(), NATS_OK);
  Client none(url());
  EXPECT_NE(none.status(), NATS_OK);
  {
    Raw raw(bridge_->port());
    raw.send("PUB $mq9.AI.MAILBOX.CREATE 2\r\n{}\r\n");
    EXPECT_NE(raw.read_all().find("-ERR 'Authorization Violation'"), std::string::npos);
  }
  {
    Raw silent(bridge_->port());  // never sends CONNECT
    EXPECT_NE(silent.read_all().find("-ERR 'Authentication Timeout'"), std::string::npos);
  }
  Client right(url(), "s3cret-token");
  ASSERT_EQ(right.status(), NATS_OK);
  EXPECT_FALSE(right.create("{}").empty());
  EXPECT_TRUE(mailboxes_->list_public()->empty());
}

TEST_P(Mq9BridgeTest, R_FLOW_4_ConnectionsOverTheCapAreRefused) {
  Mq9BridgeOptions options;
  options.max_connections = 2;
  start(options);
  Client a(url()), b(url());
  ASSERT_EQ(a.status(), NATS_OK);
  ASSERT_EQ(b.status(), NATS_OK);
  Raw third(bridge_->port());
  EXPECT_NE(third.read_all().find("-ERR 'maximum connections exceeded'"), std::string::npos);
  EXPECT_EQ(bridge_->stats().refused, 1u);
}

TEST_P(Mq9BridgeTest, R_FLOW_4_ASubscriberThatDoesNotReadIsCutOffAloneAsASlowConsumer) {
  Mq9BridgeOptions options;
  options.max_pending_bytes = 256 << 10;
  start(options);
  Client c(url());
  const std::string id = c.create("{}");
  const std::string body(16 << 10, 'x');
  // More than a socket buffer and the bound together: the replay alone overflows it.
  for (int i = 0; i < 400; ++i) ASSERT_NE(c.post(id, "", body), 0u) << i;
  Raw reader(bridge_->port());
  reader.send("CONNECT {}\r\nSUB $mq9.AI.MAILBOX.MSG." + id + " 1\r\n");
  // It never reads: the bridge's write buffer passes the bound.
  // (A deadline, not a count of creates: under a sanitizer and a loaded machine the replay fills
  // the buffer more slowly than 500 creates take.)
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (bridge_->stats().slow_consumers == 0 && absl::Now() < give_up) {
    // An idempotent create: the loop may run many times without filling the store.
    EXPECT_FALSE(c.create(R"({"public":true,"name":"others"})").empty())
        << "others are served meanwhile";
  }
  EXPECT_EQ(bridge_->stats().slow_consumers, 1u);
  EXPECT_NE(c.post(id, "", "after"), 0u);
}

}  // namespace
}  // namespace postal::mail
