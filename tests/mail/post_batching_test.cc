// The `post` provider's batches, across two in-process procs: posts travel to the host in batches
// (MailPost) and keep their order; pushes travel to a subscriber in batches (MailPush) under a
// window of two unsettled batches, and come back settled in batches (MailSettled). What a
// stranger can send in their place — a malformed batch, a settlement for deliveries it was never
// sent — is refused or ignored and changes nothing.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "postal/actors/actor_handle.h"
#include "postal/actors/context.h"
#include "gtest/gtest.h"
#include "mail_conformance.h"
#include "post_rig.h"
#include "postal/mail/post_messages.h"
#include "postal/mail/post_office.h"

namespace postal::mail::testing {
namespace {

constexpr std::string_view kInbox = "post:orders@shop.test/inbox";

struct Started {
  std::shared_ptr<Rig> rig;
  PostOffice office;
};

std::unique_ptr<Started> start(MemOptions options = {}) {
  auto s = std::make_unique<Started>();
  s->rig = make_rig(std::move(options));
  if (!s->rig) return nullptr;
  absl::StatusOr<std::unique_ptr<PostProvider>> p = provider_on(s->rig);
  if (!p.ok() || !s->office.register_provider(*std::move(p)).ok() || !s->office.start().ok()) {
    return nullptr;
  }
  return s;
}

absl::StatusOr<MailReply> ask_host(const Rig& rig, MailPost batch) {
  return actors::ActorRef<MailboxHost>(rig.host).request(*rig.client, std::move(batch), kWait);
}

WireLetter text_letter(std::string_view text) { return *WireLetter::of(Letter::text(text)); }

// Pushes beyond two unsettled batches wait, and go out together, as one batch, when a
// settlement comes back; a settlement naming deliveries the host never sent changes nothing.
TEST(PostBatching, PushesPastTwoUnsettledBatchesWaitAndThenTravelAsOne) {
  std::unique_ptr<Started> s = start();
  ASSERT_NE(s, nullptr);
  // The subscriber speaks the wire protocol itself, so the test sees every batch.
  auto [port, receiver] = runtime::open_port<MailPush>(*s->rig->client);
  absl::StatusOr<MailReply> sub = actors::ActorRef<MailboxHost>(s->rig->host)
                                      .request(*s->rig->client,
                                               MailSubscribe{std::string(kInbox), "raw",
                                                             port.bind(), {}},
                                               kWait);
  ASSERT_TRUE(sub.ok() && sub->status.code == 0) << sub.status();
  for (int i = 0; i < 10; ++i) {
    // Sync posts: each is answered after its push was sent or queued for the next batch.
    ASSERT_EQ(s->office.post(kInbox, Letter::text(absl::StrCat("m", i)))->path, PostPath::kPushed);
  }
  absl::StatusOr<MailPush> first = receiver.recv(kWait);
  absl::StatusOr<MailPush> second = receiver.recv(kWait);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_EQ(first->letters.size(), 1u);  // at low load a push goes at once, alone
  ASSERT_EQ(second->letters.size(), 1u);
  EXPECT_EQ(first->letters[0].to_letter().body.text(), "m0");
  EXPECT_EQ(second->letters[0].to_letter().body.text(), "m1");
  auto pending = [&] {
    return s->office.status(kInbox)->extension_int("post.pendingDeliveryCount").value_or(-1);
  };
  EXPECT_EQ(pending(), 10);

  // A stranger who learnt the settlement port: unknown ids, and lengths that do not match.
  first->settle_to.send(*s->rig->client,
                        MailSettled{{first->delivery_ids[0] + 1000, second->delivery_ids[0]}, {}});
  first->settle_to.send(*s->rig->client,
                        MailSettled{{first->delivery_ids[0] + 1000}, {WireStatus::of({})}});
  // The real settlement of the first batch opens the window: the eight waiting go out as one.
  first->settle_to.send(*s->rig->client,
                        MailSettled{{first->delivery_ids[0]}, {WireStatus::of(absl::OkStatus())}});
  absl::StatusOr<MailPush> third = receiver.recv(kWait);
  ASSERT_TRUE(third.ok()) << third.status();
  ASSERT_EQ(third->letters.size(), 8u);
  ASSERT_EQ(third->delivery_ids.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(third->letters[i].to_letter().body.text(), absl::StrCat("m", i + 2));
  }
  EXPECT_EQ(pending(), 9);  // the stranger settled nothing

  // One settlement for the second and third batches together: handled, and one discarded.
  MailSettled rest{{second->delivery_ids[0]}, {WireStatus::of(absl::OkStatus())}};
  for (uint64_t id : third->delivery_ids) {
    rest.delivery_ids.push_back(id);
    rest.results.push_back(WireStatus::of(id == third->delivery_ids[0]
                                              ? absl::InvalidArgumentError("poison")
                                              : absl::OkStatus()));
  }
  second->settle_to.send(*s->rig->client, std::move(rest));
  ASSERT_TRUE(s->office.wait_idle(kWait).ok());
  MailboxStatus st = *s->office.status(kInbox);
  EXPECT_EQ(pending(), 0);
  EXPECT_EQ(st.unread_count, 0u);
  EXPECT_EQ(st.extension_int("post.settledCount").value_or(-1), 9);
  EXPECT_EQ(st.extension_int("post.droppedCount").value_or(-1), 1);
}

// Posts keep their order across batches, sync and async alike, and each gets its own receipt.
TEST(PostBatching, AsyncAndSyncPostsKeepTheirOrderAcrossBatches) {
  std::unique_ptr<Started> s = start();
  ASSERT_NE(s, nullptr);
  constexpr int kPosts = 3000;  // several batches: at most 1,024 letters each
  absl::Mutex mu;
  int answered = 0;
  std::vector<std::string> send_ids(kPosts);
  for (int i = 0; i < kPosts; ++i) {
    s->office.post_async(kInbox, Letter::text(absl::StrCat(i)),
                         [&, i](absl::StatusOr<PostReceipt> r) {
                           absl::MutexLock lock(&mu);
                           if (r.ok()) send_ids[i] = r->send_id;
                           ++answered;
                         });
  }
  ASSERT_TRUE(s->office.post(kInbox, Letter::text("last")).ok());  // after every async one
  {
    absl::MutexLock lock(&mu);
    auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return answered == kPosts; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all), kWait));
  }
  std::vector<std::string> seen;
  while (seen.size() < kPosts + 1u) {
    absl::StatusOr<std::vector<Delivery>> batch =
        s->office.fetch_batch(kInbox, {.max_messages = kMaxFetchBatch});
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_FALSE(batch->empty());
    for (Delivery& d : *batch) {
      if (seen.size() < kPosts) {
        EXPECT_EQ(d.letter().headers.get(kSendId).value_or(""), send_ids[seen.size()]);
      }
      seen.push_back(d.letter().body.text().value_or(""));
    }
  }
  for (int i = 0; i < kPosts; ++i) ASSERT_EQ(seen[i], absl::StrCat(i)) << "at " << i;
  EXPECT_EQ(seen.back(), "last");
}

// A batch the host cannot read is refused whole; a bad letter in a good batch is refused alone.
TEST(PostBatching, TheHostRefusesAMalformedBatchAndABadLetterAlone) {
  std::unique_ptr<Started> s = start();
  ASSERT_NE(s, nullptr);
  const std::string inbox = "mem://orders@shop.test/inbox";

  MailPost uneven{{inbox, inbox}, {text_letter("a")}, {}};
  absl::StatusOr<MailReply> r = ask_host(*s->rig, std::move(uneven));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status.code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(r->status.message.find("one address each"), std::string::npos) << r->status.message;

  MailPost huge;
  for (size_t i = 0; i <= kMaxPostBatch; ++i) {
    huge.addresses.push_back(inbox);
    huge.letters.push_back(text_letter("x"));
  }
  r = ask_host(*s->rig, std::move(huge));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status.code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(s->office.status(kInbox)->exists.value_or(true));  // nothing was queued

  MailPost mixed{{inbox, "not an address", inbox},
                 {text_letter("first"), text_letter("lost"), text_letter("third")},
                 {}};
  r = ask_host(*s->rig, std::move(mixed));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status.code, 0) << r->status.message;
  ASSERT_EQ(r->receipts.size(), 3u);
  EXPECT_EQ(r->receipts[0].status.code, 0);
  EXPECT_TRUE(IsInvalidMailboxAddress(r->receipts[1].status.to_status()));
  EXPECT_EQ(r->receipts[2].status.code, 0);
  absl::StatusOr<std::vector<Delivery>> queued = s->office.fetch_batch(kInbox, {.max_messages = 8});
  ASSERT_TRUE(queued.ok());
  ASSERT_EQ(queued->size(), 2u);
  EXPECT_EQ((*queued)[0].letter().body.text(), "first");
  EXPECT_EQ((*queued)[1].letter().body.text(), "third");
}


// What HeldBatches received, shared with the test.
class Held {
 public:
  void add(MailPost m) {
    absl::MutexLock lock(&mu_);
    batches_.push_back(std::move(m));
  }
  // True once `n` batches arrived (false after kWait).
  bool wait_for(size_t n) {
    absl::MutexLock lock(&mu_);
    auto arrived = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return batches_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&arrived), kWait);
  }
  std::vector<size_t> sizes() {
    absl::MutexLock lock(&mu_);
    std::vector<size_t> out;
    for (const MailPost& b : batches_) out.push_back(b.letters.size());
    return out;
  }
  // Accepts every letter of batch `i`.
  void answer(runtime::SendContext& from, size_t i) {
    absl::MutexLock lock(&mu_);
    MailReply r;
    for (const std::string& address : batches_[i].addresses) {
      r.receipts.push_back(WirePostReceipt::of(
          PostReceipt{.address = address, .message_id = "", .send_id = "", .deliveries = 0}));
    }
    batches_[i].reply_to.send(from, std::move(r));
  }

 private:
  absl::Mutex mu_;
  std::vector<MailPost> batches_ ABSL_GUARDED_BY(mu_);
};

// Speaks the host's side of the post protocol itself and answers no batch until the test does,
// so the test sees every batch the provider sends and decides when each is answered.
class HeldBatches final : public actors::Actor, public actors::Handles<MailHello, MailPost> {
 public:
  explicit HeldBatches(std::shared_ptr<Held> held) : held_(std::move(held)) {}
  absl::Status handle(actors::Context& cx, MailHello m) override {
    m.reply_to.send(cx, MailReply{});
    return absl::OkStatus();
  }
  absl::Status handle(actors::Context&, MailPost m) override {
    held_->add(std::move(m));
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<Held> held_;
};

// A post goes at once when nothing is unanswered; while answers are coming, posts gather and go
// in full batches of PostBatcher::kFillLetters, and a batch that is not full waits until every
// answer is back — an answer while others are still coming sends nothing.
TEST(PostBatching, WhileAnswersAreComingOnlyFullBatchesGoAndTheRestWaitsForTheLastAnswer) {
  std::shared_ptr<Rig> rig = make_rig({});
  ASSERT_NE(rig, nullptr);
  auto held = std::make_shared<Held>();
  absl::StatusOr<actors::ActorHandle<HeldBatches>> host =
      actors::spawn<HeldBatches>(rig->host_node->proc(), "held-batches", held);
  ASSERT_TRUE(host.ok()) << host.status();
  absl::StatusOr<std::unique_ptr<PostProvider>> provider =
      provider_on(rig, absl::Seconds(10), host->addr());
  ASSERT_TRUE(provider.ok()) << provider.status();
  ASSERT_TRUE((*provider)->start().ok());
  const MailAddress to = *MailAddress::parse(kInbox);
  absl::Mutex mu;
  int answered = 0;
  auto post = [&](int n) {
    for (int i = 0; i < n; ++i) {
      (*provider)->post_async(to, Letter::text("x"), [&](absl::StatusOr<PostReceipt> r) {
        EXPECT_TRUE(r.ok()) << r.status();
        absl::MutexLock lock(&mu);
        ++answered;
      });
    }
  };
  auto wait_answered = [&](int n) {
    absl::MutexLock lock(&mu);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return answered >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&done), kWait);
  };

  post(1 + 3 * 64 + 9);
  ASSERT_TRUE(held->wait_for(4));
  EXPECT_EQ(held->sizes(), (std::vector<size_t>{1, 64, 64, 64}));  // nine wait
  // Three answers back, one still coming: the nine still wait (the old rule sent them at once,
  // before the answers' continuations ran).
  for (size_t i = 0; i < 3; ++i) held->answer(*rig->client, i);
  ASSERT_TRUE(wait_answered(1 + 2 * 64));
  post(1);  // now ten wait
  held->answer(*rig->client, 3);
  ASSERT_TRUE(held->wait_for(5));
  EXPECT_EQ(held->sizes(), (std::vector<size_t>{1, 64, 64, 64, 10}));
  held->answer(*rig->client, 4);
  EXPECT_TRUE(wait_answered(1 + 3 * 64 + 10));
  (*provider)->stop({});
}

}  // namespace
}  // namespace postal::mail::testing
