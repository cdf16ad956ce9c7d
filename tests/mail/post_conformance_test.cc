// The conformance suite (mail_conformance.h), instantiated for the `post` provider: a MailboxHost
// on one in-process Node, the PostProvider's Client on a second Node, the two talking over ipc
// abstract sockets (real channels, serialized envelopes). Plus what only `post` promises: a lost
// host fails verbs with Unavailable naming it; a subscriber's dead proc gives its push back.
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "mail_conformance.h"
#include "postal/actors/actor_handle.h"
#include "postal/mail/mailbox_host.h"
#include "postal/mail/post_provider.h"
#include "postal/mail/sqlite_mail_store.h"
#include "postal/mail/system_headers.h"
#include "postal/routing/node.h"
#include "postal/runtime/client.h"
#include "postal/wire/codec.h"
#include "post_rig.h"
#include "support/scratch_dir.h"

namespace postal::mail::testing {
namespace {

ProviderFactory PostFactory() {
  return ProviderFactory{
      "post", "post",
      [](const ConformanceConfig& config,
         std::shared_ptr<ManualClock> clock) -> absl::StatusOr<std::unique_ptr<MailProvider>> {
        std::shared_ptr<Rig> rig = make_rig(MemOptions{
            .bus = MemBus::isolated(std::move(clock)),
            .retry = config.retry,
            .dead_letter = config.dead_letter,
            .delivery_settle_timeout = config.settle_timeout,
        });
        if (!rig) return absl::InternalError("could not start the two procs");
        absl::StatusOr<std::unique_ptr<PostProvider>> p = provider_on(rig);
        if (!p.ok()) return p.status();
        return std::unique_ptr<MailProvider>(*std::move(p));
      }};
}

INSTANTIATE_TEST_SUITE_P(Post, MailConformance, ::testing::Values(PostFactory()), ConformanceName);

constexpr std::string_view kInbox = "post:orders@shop.test/inbox";

// The server spin (decisions.md, "Server spin"): a host spawned by type asks its proc for 250 µs;
// one constructed directly asks for none; a bad `server_spin_us` refuses the spawn before the
// store is opened, so no file is made.
TEST(PostProvider, AHostSpawnedByTypeAsksItsProcForTheServerSpin) {
  register_mail_actors();
  std::unique_ptr<routing::Node> node = start_node("spinhost");
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(actors::spawn_by_type(node->proc(), kMailboxHostType, "mailbox-host", {}).ok());
  const absl::Time deadline = absl::Now() + kWait;  // init runs on the proc's worker
  while (node->proc().scheduler().server_spin() != absl::Microseconds(250) &&
         absl::Now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(node->proc().scheduler().server_spin(), absl::Microseconds(250));

  std::shared_ptr<Rig> rig = make_rig({});  // constructed directly
  ASSERT_NE(rig, nullptr);
  PostOffice office;
  ASSERT_TRUE(office.register_provider(*provider_on(rig)).ok());
  ASSERT_TRUE(office.start().ok());
  ASSERT_TRUE(office.post(kInbox, Letter::text("x")).ok());  // the host's init has run
  EXPECT_EQ(rig->host_node->proc().scheduler().server_spin(), absl::ZeroDuration());
}

TEST(PostProvider, ABadServerSpinRefusesTheHostAndOpensNoStore) {
  test_support::ScratchDir dir;
  const std::string store = (dir.path() / "mail.db").string();
  for (wire::HeaderValue bad : {wire::HeaderValue{int64_t{-1}}, wire::HeaderValue{int64_t{10001}},
                                wire::HeaderValue{std::string("250us")}}) {
    actors::SpawnParams params;
    params.set_value("store", std::string(store));
    params.set_value("server_spin_us", bad);
    absl::StatusOr<std::unique_ptr<MailboxHost>> host = MailboxHost::create(params);
    EXPECT_EQ(host.status().code(), absl::StatusCode::kInvalidArgument) << host.status();
    EXPECT_NE(host.status().message().find("server_spin_us"), absl::string_view::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(store));
}

TEST(PostProvider, LostHostFailsVerbsWithUnavailableNamingTheHost) {
  std::shared_ptr<Rig> rig = make_rig({});
  ASSERT_NE(rig, nullptr);
  PostOffice office;
  ASSERT_TRUE(office.register_provider(*provider_on(rig, absl::Seconds(3))).ok());
  ASSERT_TRUE(office.start().ok());
  ASSERT_TRUE(office.post(kInbox, Letter::text("before")).ok());
  const std::string host = rig->host.to_string();
  rig->host_node.reset();  // the host's proc is gone
  absl::Status s = office.post(kInbox, Letter::text("after")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find(host), absl::string_view::npos) << s;
  EXPECT_EQ(office.fetch(kInbox).status().code(), absl::StatusCode::kUnavailable);
}

// Waits for one post_async's answer.
class OneAnswer {
 public:
  MailProvider::PostDone done() {
    return [this](absl::StatusOr<PostReceipt> r) {
      absl::MutexLock lock(&mu_);
      answer_ = r.status();
      ++count_;
    };
  }
  std::optional<absl::Status> wait(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto answered = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return count_ > 0; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&answered), timeout)) return std::nullopt;
    return answer_;
  }
  int count() {
    absl::MutexLock lock(&mu_);
    return count_;
  }

 private:
  absl::Mutex mu_;
  absl::Status answer_ ABSL_GUARDED_BY(mu_);
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

// A post_async whose request comes back undeliverable (the host's proc is gone) completes with
// Unavailable naming the host, through the reply port's failure (R-FAIL-3), not the timeout.
TEST(PostProvider, PostAsyncToALostHostCompletesUnavailableBeforeTheTimeout) {
  std::shared_ptr<Rig> rig = make_rig({});
  ASSERT_NE(rig, nullptr);
  PostOffice office;
  ASSERT_TRUE(office.register_provider(*provider_on(rig, absl::Seconds(60))).ok());
  ASSERT_TRUE(office.start().ok());
  const std::string host = rig->host.to_string();
  rig->host_node.reset();
  OneAnswer a;
  office.post_async(kInbox, Letter::text("after"), a.done());
  std::optional<absl::Status> s = a.wait(absl::Seconds(30));
  ASSERT_TRUE(s.has_value()) << "no answer: the bounce did not complete the post";
  EXPECT_EQ(s->code(), absl::StatusCode::kUnavailable) << *s;
  EXPECT_NE(s->message().find(host), absl::string_view::npos) << *s;
  EXPECT_EQ(a.count(), 1);
}

// An actor that takes MailPosts and never answers them.
class SilentHost final : public actors::Actor, public actors::Handles<MailPost> {
 public:
  absl::Status handle(actors::Context&, MailPost m) override {
    held_.push_back(std::move(m));
    return absl::OkStatus();
  }

 private:
  std::vector<MailPost> held_;
};

// A host that never answers: the post completes once, with Unavailable, after the timeout.
TEST(PostProvider, PostAsyncToAHostThatNeverAnswersCompletesAfterTheTimeout) {
  std::shared_ptr<Rig> rig = make_rig({});
  ASSERT_NE(rig, nullptr);
  absl::StatusOr<actors::ActorHandle<SilentHost>> silent =
      actors::spawn<SilentHost>(rig->host_node->proc(), "silent");
  ASSERT_TRUE(silent.ok()) << silent.status();
  auto provider = provider_on(rig, absl::Milliseconds(300), silent->addr());
  ASSERT_TRUE(provider.ok());
  MailProvider& p = **provider;
  OneAnswer a;
  p.post_async(*MailAddress::parse(kInbox), Letter::text("x"), a.done());
  std::optional<absl::Status> s = a.wait(absl::Seconds(30));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->code(), absl::StatusCode::kUnavailable) << *s;
  EXPECT_NE(s->message().find("no answer within"), absl::string_view::npos) << *s;
  EXPECT_EQ(a.count(), 1);
}

// The post provider shows its host's dead-letter topic in the post scheme, and nothing else: a
// user header that starts with "mem://" arrives as it was sent, on fetch and on push.
TEST(PostProvider, UserHeadersThatLookLikeMemAddressesArriveUnchanged) {
  std::shared_ptr<Rig> rig = make_rig({});
  ASSERT_NE(rig, nullptr);
  PostOffice office;
  ASSERT_TRUE(office.register_provider(*provider_on(rig)).ok());
  ASSERT_TRUE(office.start().ok());
  constexpr wire::HeaderKey<std::string> kLink{"link"};
  constexpr wire::HeaderKey<std::string> kBogus{"bogus"};
  auto letter = [&] {
    Letter l = Letter::text("x");
    l.headers.set(kLink, std::string("mem://orders@shop.test/inbox"));
    l.headers.set(kBogus, std::string("mem://not-an-address"));
    return l;
  };
  ASSERT_TRUE(office.post(kInbox, letter()).ok());
  absl::StatusOr<std::optional<Delivery>> d = office.fetch(kInbox);
  ASSERT_TRUE(d.ok() && d->has_value()) << d.status();
  EXPECT_EQ((*d)->letter().headers.get(kLink), "mem://orders@shop.test/inbox");
  EXPECT_EQ((*d)->letter().headers.get(kBogus), "mem://not-an-address");
  absl::Mutex mu;
  std::optional<std::string> link;
  absl::StatusOr<Subscription> sub = office.subscribe(kInbox, [&](const Letter& l) {
    absl::MutexLock lock(&mu);
    link = l.headers.get(kLink);
    return absl::OkStatus();
  });
  ASSERT_TRUE(sub.ok()) << sub.status();
  ASSERT_TRUE(office.post(kInbox, letter()).ok());
  absl::MutexLock lock(&mu);
  auto got = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return link.has_value(); };
  ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&got), absl::Seconds(30)));
  EXPECT_EQ(*link, "mem://orders@shop.test/inbox");
}

TEST(PostProvider, M_ADDR_2_BadAddressNeverReachesTheHost) {
  std::shared_ptr<Rig> rig = make_rig({});
  ASSERT_NE(rig, nullptr);
  PostOffice office;
  ASSERT_TRUE(office.register_provider(*provider_on(rig)).ok());
  ASSERT_TRUE(office.start().ok());
  absl::Status s = office.post("post:orders@shop.test/inbox?x=1", Letter::text("x")).status();
  EXPECT_TRUE(IsInvalidMailboxAddress(s)) << s;
  EXPECT_EQ(office.status(kInbox)->exists, false);
}

// Admin verbs cross as one MailAdminCall (admin_wire.h): what a peer sends that does not decode
// to a verb with a valid target is refused with a clear status, and nothing runs.
TEST(PostProvider, M_ADDR_2_AMalformedAdminCallFromAPeerIsRefusedAndChangesNothing) {
  std::shared_ptr<Rig> rig = make_rig({});
  ASSERT_NE(rig, nullptr);
  PostOffice office;
  ASSERT_TRUE(office.register_provider(*provider_on(rig)).ok());
  ASSERT_TRUE(office.start().ok());
  ASSERT_TRUE(office.post(kInbox, Letter::text("kept")).ok());
  auto call = [&](std::string verb, std::string bytes) {
    absl::StatusOr<MailAdminReply> r = actors::ActorRef<MailboxHost>(rig->host).request(
        *rig->client, MailAdminCall{std::move(verb), std::move(bytes), {}}, kWait);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->status.to_status() : r.status();
  };
  absl::Status unknown = call("drop_everything", "");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument) << unknown;
  EXPECT_NE(unknown.message().find("drop_everything"), std::string::npos) << unknown;
  absl::Status garbage = call("purge_parked", std::string("\xff\xff\xff\xff\x01", 5));
  EXPECT_EQ(garbage.code(), absl::StatusCode::kInvalidArgument) << garbage;
  EXPECT_NE(garbage.message().find("malformed"), std::string::npos) << garbage;
  absl::Status trailing = call("clear", "x");  // clear has no fields: the byte is not its
  EXPECT_EQ(trailing.code(), absl::StatusCode::kInvalidArgument) << trailing;
  absl::StatusOr<std::string> bad_target = wire::encode(admin::PurgeParked{"no address"});
  ASSERT_TRUE(bad_target.ok());
  absl::Status target = call("purge_parked", *bad_target);
  EXPECT_TRUE(IsInvalidMailboxAddress(target)) << target;
  EXPECT_EQ(office.status(kInbox)->unread_count, 1u) << "nothing ran";
}

TEST(PostProvider, SubscriberProcDeathRequeuesItsInFlightPushAndDropsTheSubscription) {
  std::shared_ptr<Rig> rig = make_rig({});
  ASSERT_NE(rig, nullptr);
  PostOffice poster;
  ASSERT_TRUE(poster.register_provider(*provider_on(rig)).ok());
  ASSERT_TRUE(poster.start().ok());
  // A third proc subscribes by speaking the wire protocol itself, then dies with its port.
  std::unique_ptr<routing::Node> doomed = start_node("mailsub");
  ASSERT_NE(doomed, nullptr);
  {
    auto client = *runtime::Client::attach(doomed->proc(), "mail-sub");
    auto [port, receiver] = runtime::open_port<MailPush>(*client);
    absl::StatusOr<MailReply> r = actors::ActorRef<MailboxHost>(rig->host).request(
        *client, MailSubscribe{std::string(kInbox), "doomed", port.bind(), {}}, kWait);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status.code, 0) << r->status.message;
  }
  doomed.reset();  // the subscriber's proc is gone, its subscription still registered
  EXPECT_EQ(poster.status(kInbox)->extension_int("post.subscriberCount").value_or(-1), 1);

  absl::StatusOr<PostReceipt> r = poster.post(kInbox, Letter::text("orphan"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, PostPath::kPushed);
  // The push comes back undeliverable: unhandled, back to the queue; the subscription is dropped.
  ASSERT_TRUE(poster.wait_idle(kWait).ok());
  MailboxStatus st = *poster.status(kInbox);
  EXPECT_EQ(st.unread_count, 1u);
  EXPECT_EQ(st.extension_int("post.subscriberCount").value_or(-1), 0);
  std::optional<Delivery> d = *poster.fetch(kInbox);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->letter().body.text(), "orphan");
  EXPECT_EQ(poster.post(kInbox, Letter::text("next"))->path, PostPath::kQueued);
}

TEST(PostProvider, PushAcrossProcsRunsTheCallbackAndItsStatusSettles) {
  std::shared_ptr<Rig> rig = make_rig({});
  ASSERT_NE(rig, nullptr);
  PostOffice office;
  ASSERT_TRUE(office.register_provider(*provider_on(rig)).ok());
  ASSERT_TRUE(office.start().ok());
  Recorder ok;
  Recorder failing([](const Letter&, size_t) { return RetriableError("later"); });
  {
    absl::StatusOr<Subscription> sub = office.subscribe(kInbox, ok.handler());
    ASSERT_TRUE(sub.ok()) << sub.status();
    ASSERT_EQ(office.post(kInbox, Letter::text("a"))->path, PostPath::kPushed);
    ASSERT_TRUE(ok.wait_for(1));
    EXPECT_EQ(ok.seen()[0].to, "post://orders@shop.test/inbox");
    ASSERT_TRUE(office.wait_idle(kWait).ok());
    EXPECT_EQ(office.status(kInbox)->unread_count, 0u);  // handled
  }
  absl::StatusOr<Subscription> sub = office.subscribe(kInbox, failing.handler());
  ASSERT_TRUE(sub.ok());
  ASSERT_EQ(office.post(kInbox, Letter::text("b"))->path, PostPath::kPushed);
  ASSERT_TRUE(failing.wait_for(1));
  ASSERT_TRUE(office.wait_idle(kWait).ok());
  EXPECT_EQ(office.status(kInbox)->unread_count, 1u);  // M-ACK-4: retriable → back in the queue
}

// A host serving a SQLite store: retained mailboxes created, posted, replayed, listed and erased
// across two procs through the post provider (M-KIND-2, M-BOX-4, M-RECV-5).
TEST(PostProvider, M_KIND_2_RetainedMailboxesAcrossProcsThroughTheHost) {
  test_support::ScratchDir dir;
  {
    absl::StatusOr<std::unique_ptr<MailStore>> store =
        SqliteMailStore::open(dir.path() / "mail.db");
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<std::unique_ptr<RetainedMailboxes>> retained =
        RetainedMailboxes::create({.store = *std::move(store)});
    ASSERT_TRUE(retained.ok());
    std::shared_ptr<Rig> rig =
        make_rig(MemOptions{.bus = MemBus::isolated(), .retained = *std::move(retained)});
    ASSERT_NE(rig, nullptr);
    PostOffice office;
    ASSERT_TRUE(office.register_provider(*provider_on(rig)).ok());
    ASSERT_TRUE(office.start().ok());
    constexpr std::string_view kTasks = "post:tasks@agents.test/queue";
    absl::StatusOr<CreateResult> created = office.create_mailbox(kTasks, {.ttl = absl::Hours(1)});
    ASSERT_TRUE(created.ok()) << created.status();
    EXPECT_TRUE(created->created);
    EXPECT_FALSE(office.create_mailbox(kTasks, {.ttl = absl::Hours(9)})->created);
    for (const auto& [priority, text] : {std::pair{"normal", "n"}, std::pair{"critical", "c"}}) {
      Letter l = Letter::text(text);
      l.headers.set(kPriority, std::string(priority));
      ASSERT_TRUE(office.post(kTasks, std::move(l)).ok());
    }
    absl::Mutex mu;
    std::vector<std::pair<std::string, uint64_t>> got;
    absl::StatusOr<Subscription> sub = office.subscribe(kTasks, [&](const Letter& l) {
      absl::MutexLock lock(&mu);
      got.emplace_back(l.body.text().value_or("?"), l.headers.get(kRetainedSeq).value_or(0));
      return absl::OkStatus();
    });
    ASSERT_TRUE(sub.ok()) << sub.status();
    {
      absl::MutexLock lock(&mu);
      auto two = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return got.size() >= 2; };
      ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&two), absl::Seconds(30)));
      EXPECT_EQ(got[0].first, "c");
      EXPECT_EQ(got[1].first, "n");
    }
    EXPECT_EQ(*office.list_public("post"),
              std::vector<std::string>{"post://tasks@agents.test/queue"});
    // M-KIND-3 across procs: the deliver policy crosses to the host; kLast replays only "c",
    // the one stored last.
    {
      absl::Mutex last_mu;
      std::vector<std::string> last_got;
      absl::StatusOr<Subscription> last = office.subscribe(
          kTasks,
          [&](const Letter& l) {
            absl::MutexLock lock(&last_mu);
            last_got.push_back(l.body.text().value_or("?"));
            return absl::OkStatus();
          },
          {.deliver = DeliverPolicy::kLast});
      ASSERT_TRUE(last.ok()) << last.status();
      Letter live = Letter::text("live");
      live.headers.set(kPriority, std::string("urgent"));
      ASSERT_TRUE(office.post(kTasks, std::move(live)).ok());
      absl::MutexLock lock(&last_mu);
      auto two = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(last_mu) { return last_got.size() >= 2; };
      ASSERT_TRUE(last_mu.AwaitWithTimeout(absl::Condition(&two), absl::Seconds(30)));
      EXPECT_EQ(last_got, (std::vector<std::string>{"c", "live"}));
    }
    uint64_t seq = 0;
    {
      absl::MutexLock lock(&mu);
      seq = got[0].second;
    }
    EXPECT_TRUE(*office.erase(kTasks, seq));
    EXPECT_FALSE(*office.erase(kTasks, seq));
    ASSERT_TRUE(office.delete_mailbox(kTasks).ok());
    EXPECT_TRUE(office.list_public("post")->empty());

    // M-BOX-4 across procs: the host's store draws a private mailbox's id; its post: address
    // reaches it, and it is never listed.
    absl::StatusOr<CreateResult> secret =
        office.create_private_mailbox("post", {.ttl = absl::Hours(1), .max_messages = 5});
    ASSERT_TRUE(secret.ok()) << secret.status();
    EXPECT_TRUE(secret->created);
    EXPECT_FALSE(secret->mailbox.is_public);
    EXPECT_EQ(secret->mailbox.id.size(), 32u) << secret->mailbox.id;
    EXPECT_EQ(secret->address, "post://" + secret->mailbox.id + "@private");
    Letter l = Letter::text("for your eyes");
    l.headers.set(kPriority, std::string("urgent"));
    ASSERT_TRUE(office.post(secret->address, std::move(l)).ok());
    std::vector<std::string> texts;
    absl::StatusOr<Subscription> replay =
        office.subscribe(secret->address, [&](const Letter& letter) {
          absl::MutexLock lock(&mu);
          texts.push_back(letter.body.text().value_or("?"));
          return absl::OkStatus();
        });
    ASSERT_TRUE(replay.ok()) << replay.status();
    {
      absl::MutexLock lock(&mu);
      auto one = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return !texts.empty(); };
      ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&one), absl::Seconds(30)));
      EXPECT_EQ(texts, std::vector<std::string>{"for your eyes"});
    }
    EXPECT_TRUE(office.list_public("post")->empty()) << "a private mailbox is never listed";
    EXPECT_NE(office.create_private_mailbox("post")->mailbox.id, secret->mailbox.id);
  }
}

// M-RECV-4 across procs: the queue group crosses to the host with the subscription; what the
// remote callback returns settles each letter for the group in the host's SQLite store, so a
// group formed anew — also after the host's store was closed and opened again — gets only the
// letters it never settled.
TEST(PostProvider, M_RECV_4_AQueueGroupAcrossProcsSettlesPerRecordAlsoAfterTheStoreReopens) {
  test_support::ScratchDir dir;
  constexpr std::string_view kJobs = "post:jobs@agents.test/queue";
  // One host on the store file with a PostOffice talking to it from another proc.
  auto serve = [&](auto&& body) {
    absl::StatusOr<std::unique_ptr<MailStore>> store = SqliteMailStore::open(dir.path() / "m.db");
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<std::unique_ptr<RetainedMailboxes>> retained =
        RetainedMailboxes::create({.store = *std::move(store)});
    ASSERT_TRUE(retained.ok());
    std::shared_ptr<Rig> rig =
        make_rig(MemOptions{.bus = MemBus::isolated(), .retained = *std::move(retained)});
    ASSERT_NE(rig, nullptr);
    PostOffice office;
    ASSERT_TRUE(office.register_provider(*provider_on(rig)).ok());
    ASSERT_TRUE(office.start().ok());
    body(office);
  };
  struct Got {
    absl::Mutex mu;
    std::vector<std::string> texts ABSL_GUARDED_BY(mu);
    bool wait_for(size_t n) {
      absl::MutexLock lock(&mu);
      auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return texts.size() >= n; };
      return mu.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30));
    }
  };
  serve([&](PostOffice& office) {
    ASSERT_TRUE(office.create_mailbox(kJobs).ok());
    for (std::string_view text : {"a", "b", "c"}) {
      Letter l = Letter::text(text);
      l.headers.set(kPriority, std::string("critical"));
      ASSERT_TRUE(office.post(kJobs, std::move(l)).ok());
    }
    Got got;
    absl::StatusOr<Subscription> sub = office.subscribe(
        kJobs,
        [&](const Letter& l) -> absl::Status {
          const std::string text = l.body.text().value_or("?");
          {
            absl::MutexLock lock(&got.mu);
            got.texts.push_back(text);
          }
          return text == "b" ? RetriableError("not now") : absl::OkStatus();
        },
        {.queue_group = "workers"});
    ASSERT_TRUE(sub.ok()) << sub.status();
    ASSERT_TRUE(got.wait_for(3));
    ASSERT_TRUE(office.wait_idle(absl::Seconds(30)).ok());
    sub->unsubscribe();  // the group's last member leaves
    Got again;
    absl::StatusOr<Subscription> member = office.subscribe(
        kJobs,
        [&](const Letter& l) {
          absl::MutexLock lock(&again.mu);
          again.texts.push_back(l.body.text().value_or("?"));
          return absl::OkStatus();
        },
        {.queue_group = "workers"});
    ASSERT_TRUE(member.ok()) << member.status();
    ASSERT_TRUE(again.wait_for(1));
    ASSERT_TRUE(office.wait_idle(absl::Seconds(30)).ok());
    absl::MutexLock lock(&again.mu);
    EXPECT_EQ(again.texts, std::vector<std::string>{"b"});
  });
  serve([&](PostOffice& office) {  // the host's store reopened: "b" is settled now too
    Got plain;
    absl::StatusOr<Subscription> all = office.subscribe(kJobs, [&](const Letter& l) {
      absl::MutexLock lock(&plain.mu);
      plain.texts.push_back(l.body.text().value_or("?"));
      return absl::OkStatus();
    });
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_TRUE(plain.wait_for(3)) << "a plain subscription replays every stored letter";
    Got group;
    absl::StatusOr<Subscription> member = office.subscribe(
        kJobs,
        [&](const Letter& l) {
          absl::MutexLock lock(&group.mu);
          group.texts.push_back(l.body.text().value_or("?"));
          return absl::OkStatus();
        },
        {.queue_group = "workers"});
    ASSERT_TRUE(member.ok()) << member.status();
    Letter l = Letter::text("d");
    l.headers.set(kPriority, std::string("urgent"));
    ASSERT_TRUE(office.post(kJobs, std::move(l)).ok());
    ASSERT_TRUE(group.wait_for(1));
    ASSERT_TRUE(office.wait_idle(absl::Seconds(30)).ok());
    absl::MutexLock lock(&group.mu);
    EXPECT_EQ(group.texts, std::vector<std::string>{"d"}) << "only the record it never settled";
  });
}

}  // namespace
}  // namespace postal::mail::testing
