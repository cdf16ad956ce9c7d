// The `post` provider's batches, across two in-process procs: posts travel to the host in batches
// (MailPost) and keep their order; pushes travel to a subscriber in batches (MailPush) under a
// window of two unsettled batches, and come back settled in batches (MailSettled). What a
// stranger can send in their place — a malformed batch, a settlement for deliveries it was never
// sent — is refused or ignored and changes nothing.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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

}  // namespace
}  // namespace postal::mail::testing
