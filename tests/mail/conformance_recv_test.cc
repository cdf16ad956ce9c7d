// Conformance: addresses at the entry points, the two exclusive receiving paths, the verbs,
// status, and the lifecycle (M-ADDR-1…3, M-KIND-1, M-RECV-1…3, M-STAT-1…2).
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "mail_conformance.h"

namespace postal::mail::testing {
namespace {

TEST_P(MailConformance, M_ADDR_2_BadAddressRejectedAtEveryEntryPointNothingEnqueued) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  const std::string query = addr("inbox") + "?thread=1";
  const std::string fragment = addr("inbox") + "#top";
  Recorder r;
  for (const std::string& bad : {query, fragment}) {
    EXPECT_TRUE(IsInvalidMailboxAddress(office_->post(bad, Letter::text("x")).status()));
    EXPECT_TRUE(IsInvalidMailboxAddress(office_->subscribe(bad, r.handler()).status()));
    EXPECT_TRUE(IsInvalidMailboxAddress(office_->fetch(bad).status()));
    EXPECT_TRUE(IsInvalidMailboxAddress(office_->peek(bad).status()));
    EXPECT_TRUE(IsInvalidMailboxAddress(office_->status(bad).status()));
    EXPECT_TRUE(IsInvalidMailboxAddress(office_->recover(bad).status()));
  }
  absl::Status s = office_->post(query, Letter::text("x")).status();
  EXPECT_TRUE(absl::StartsWith(s.message(), "InvalidMailboxAddress:")) << s;
  EXPECT_NE(s.message().find("path"), absl::string_view::npos) << "says what to write: " << s;
  // Nothing was enqueued, not even under the address without its query.
  MailboxStatus st = status(addr("inbox"));
  EXPECT_EQ(st.exists, false);
  EXPECT_EQ(st.unread_count, 0u);
}

// post_async: every post completes exactly once with post's receipt, many may be in flight, and
// each is in the mailbox once it completed; a bad address completes at once with the same error
// post gives, having enqueued nothing (M-RECV-1, M-ADDR-2).
TEST_P(MailConformance, M_RECV_1_PostAsyncCompletesEachPostOnceAndEnqueuesIt) {
  open();
  constexpr int kPosts = 300;
  absl::Mutex mu;
  int completed = 0;
  std::set<std::string> ids;
  for (int i = 0; i < kPosts; ++i) {
    office_->post_async(addr("async"), Letter::text(absl::StrCat("m", i)),
                        [&](absl::StatusOr<PostReceipt> r) {
                          absl::MutexLock lock(&mu);
                          ++completed;
                          EXPECT_TRUE(r.ok()) << r.status();
                          if (r.ok()) {
                            EXPECT_EQ(r->address, addr("async"));
                            ids.insert(r->message_id);
                          }
                        });
  }
  {
    absl::MutexLock lock(&mu);
    auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return completed == kPosts; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(30)));
    EXPECT_EQ(ids.size(), size_t{kPosts});
  }
  EXPECT_EQ(status(addr("async")).unread_count, uint64_t{kPosts});
  absl::Status bad;
  office_->post_async(addr("async") + "?x=1", Letter::text("x"),
                      [&](absl::StatusOr<PostReceipt> r) { bad = r.status(); });
  EXPECT_TRUE(IsInvalidMailboxAddress(bad)) << bad;  // completed before post_async returned
  EXPECT_EQ(status(addr("async")).unread_count, uint64_t{kPosts});
}

TEST_P(MailConformance, M_ADDR_1_BothSpellingsReachTheSameMailbox) {
  open();
  std::string scheme = GetParam().scheme;
  std::string upper = absl::AsciiStrToUpper(sv(scheme));
  PostReceipt r = post_text(absl::StrCat(scheme, ":box@conformance.test/inbox"), "one");
  EXPECT_EQ(r.address, addr("inbox"));
  std::optional<Delivery> d = fetch(absl::StrCat(upper, "://box@CONFORMANCE.test/./x/../%69nbox"));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(text_of(d->letter()), "one");
  EXPECT_EQ(d->letter().to, addr("inbox"));
}

TEST_P(MailConformance, M_RECV_2_UnknownSchemeFailsSynchronously) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Recorder r;
  EXPECT_TRUE(IsUnknownScheme(office_->subscribe("nosuch:box@x.test/a", r.handler()).status()));
  EXPECT_TRUE(IsUnknownScheme(office_->post("nosuch:box@x.test/a", Letter::text("x")).status()));
}

TEST_P(MailConformance, M_KIND_1_PostWithoutSubscriberIsQueuedForFetch) {
  open();
  PostReceipt r = post_text(addr("inbox"), "hello");
  EXPECT_EQ(r.path, PostPath::kQueued);
  EXPECT_EQ(r.deliveries, 0u);
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);
  std::optional<Delivery> d = fetch(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(text_of(d->letter()), "hello");
  EXPECT_TRUE(d->settled());  // auto-ack
  EXPECT_FALSE(fetch(addr("inbox")).has_value());
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
}

TEST_P(MailConformance, M_KIND_1_PostWithSubscribersIsPushedToEveryOneAndNotQueued) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Recorder a, b;
  Subscription sa = subscribe(addr("inbox"), a);
  Subscription sb = subscribe(addr("inbox"), b);
  PostReceipt r = post_text(addr("inbox"), "hello");
  EXPECT_EQ(r.path, PostPath::kPushed);
  EXPECT_EQ(r.deliveries, 2u);
  ASSERT_TRUE(a.wait_for(1));
  ASSERT_TRUE(b.wait_for(1));
  idle();
  EXPECT_EQ(text_of(a.seen()[0]), "hello");
  EXPECT_EQ(text_of(b.seen()[0]), "hello");
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
  EXPECT_FALSE(fetch(addr("inbox")).has_value());
}

TEST_P(MailConformance, M_KIND_1_SubscriberAppearingAfterPostDoesNotGetTheQueuedMessage) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  post_text(addr("inbox"), "queued-before");
  Recorder r;
  Subscription sub = subscribe(addr("inbox"), r);
  post_text(addr("inbox"), "pushed-after");
  ASSERT_TRUE(r.wait_for(1));
  idle();
  ASSERT_EQ(r.count(), 1u);
  EXPECT_EQ(text_of(r.seen()[0]), "pushed-after");
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);
  std::optional<Delivery> d = fetch(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(text_of(d->letter()), "queued-before");
}

TEST_P(MailConformance, M_RECV_2_SubscribeReturnsOnceEstablished) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Recorder r;
  Subscription sub = subscribe(addr("inbox"), r);
  EXPECT_TRUE(sub.active());
  EXPECT_EQ(sub.address(), addr("inbox"));
  // Posted right after subscribe returns: pushed, never queued.
  EXPECT_EQ(post_text(addr("inbox"), "now").path, PostPath::kPushed);
  ASSERT_TRUE(r.wait_for(1));
}

TEST_P(MailConformance, M_RECV_2_DestroyingTheSubscriptionUnsubscribes) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Recorder r;
  { Subscription sub = subscribe(addr("inbox"), r); }
  EXPECT_EQ(post_text(addr("inbox"), "after").path, PostPath::kQueued);
  Subscription sub = subscribe(addr("inbox"), r);
  sub.unsubscribe();
  EXPECT_FALSE(sub.active());
  EXPECT_EQ(post_text(addr("inbox"), "after2").path, PostPath::kQueued);
  idle();
  EXPECT_EQ(r.count(), 0u);
  EXPECT_EQ(status(addr("inbox")).unread_count, 2u);
}

TEST_P(MailConformance, M_RECV_1_FetchIsFirstInFirstOut) {
  open();
  for (const char* t : {"a", "b", "c"}) post_text(addr("inbox"), t);
  for (const char* t : {"a", "b", "c"}) {
    std::optional<Delivery> d = fetch(addr("inbox"));
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(text_of(d->letter()), t);
  }
}

TEST_P(MailConformance, M_RECV_3_PeekChangesNothing) {
  open();
  if (!can(Capability::kPeek)) GTEST_SKIP() << "provider cannot peek";
  post_text(addr("inbox"), "first");
  post_text(addr("inbox"), "second");
  post_text(addr("inbox"), "third");
  std::optional<Delivery> held = fetch_manual(addr("inbox"));  // "first", in flight
  ASSERT_TRUE(held.has_value());
  clock_->advance(absl::Seconds(5));
  MailboxStatus before = status(addr("inbox"));

  absl::StatusOr<std::vector<Letter>> peeked = office_->peek(addr("inbox"), 10);
  ASSERT_TRUE(peeked.ok()) << peeked.status();
  ASSERT_EQ(peeked->size(), 2u);  // never lists what another consumer holds
  EXPECT_EQ(text_of((*peeked)[0]), "second");
  EXPECT_EQ(text_of((*peeked)[1]), "third");
  (*peeked)[0].headers.set_value("x-mutated", std::string("yes"));
  (*peeked)[0].id = "changed";

  MailboxStatus after = status(addr("inbox"));
  EXPECT_EQ(after.unread_count, before.unread_count);
  EXPECT_EQ(after.in_flight_count, before.in_flight_count);
  EXPECT_EQ(after.last_activity_time, before.last_activity_time);
  absl::StatusOr<std::vector<Letter>> again = office_->peek(addr("inbox"), 1);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_FALSE((*again)[0].headers.contains("x-mutated"));
  EXPECT_NE((*again)[0].id, "changed");
  EXPECT_TRUE(held->ack());
}

TEST_P(MailConformance, M_STAT_1_NeverSeenAddressIsUnknown) {
  open();
  MailboxStatus s = status(addr("never"));
  EXPECT_EQ(s.state, MailboxState::kUnknown);
  EXPECT_EQ(s.exists, false);
  EXPECT_EQ(s.unread_count, 0u);
  EXPECT_EQ(s.in_flight_count, 0u);
  EXPECT_FALSE(s.last_activity_time.has_value());
  EXPECT_NE(s.to_json().find("\"lastActivityTime\":null"), std::string::npos) << s.to_json();
}

TEST_P(MailConformance, M_STAT_1_CountsAndLastActivity) {
  open();
  post_text(addr("inbox"), "a");
  post_text(addr("inbox"), "b");
  clock_->advance(absl::Seconds(3));
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  ASSERT_TRUE(d.has_value());
  MailboxStatus s = status(addr("inbox"));
  EXPECT_EQ(s.state, MailboxState::kOnline);
  EXPECT_EQ(s.exists, true);
  EXPECT_EQ(s.unread_count, 1u);
  EXPECT_EQ(s.in_flight_count, 1u);
  ASSERT_TRUE(s.last_activity_time.has_value());
  EXPECT_EQ(s.last_activity_iso(), format_iso8601(clock_->now()));
  EXPECT_EQ(s.last_activity_iso(), "2023-11-14T22:13:23.000Z");
  EXPECT_TRUE(d->ack());
}

TEST_P(MailConformance, M_STAT_1_DrainedOrSubscribedOnlyAddressStaysOnline) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  post_text(addr("drained"), "a");
  ASSERT_TRUE(fetch(addr("drained")).has_value());
  MailboxStatus drained = status(addr("drained"));
  EXPECT_EQ(drained.state, MailboxState::kOnline);
  EXPECT_EQ(drained.exists, true);
  EXPECT_EQ(drained.unread_count, 0u);
  Recorder r;
  Subscription sub = subscribe(addr("listening"), r);
  MailboxStatus listening = status(addr("listening"));
  EXPECT_EQ(listening.state, MailboxState::kOnline);
  EXPECT_EQ(listening.exists, true);
}

TEST_P(MailConformance, M_STAT_2_SnapshotListsEveryMailboxSorted) {
  open();
  if (!can(Capability::kEnumerate)) GTEST_SKIP() << "provider cannot enumerate";
  post_text(addr("b"), "1");
  post_text(addr("a"), "2");
  post_text(addr("a"), "3");
  post_text(addr("c"), "4");
  std::optional<Delivery> d = fetch_manual(addr("c"));
  MailSnapshot snap = office_->status();
  EXPECT_EQ(snap.state, MailboxState::kOnline);
  ASSERT_EQ(snap.address_count, 3u);
  EXPECT_EQ(snap.addresses[0].address, addr("a"));
  EXPECT_EQ(snap.addresses[1].address, addr("b"));
  EXPECT_EQ(snap.addresses[2].address, addr("c"));
  EXPECT_EQ(snap.unread_count, 3u);
  EXPECT_EQ(snap.in_flight_count, 1u);
  EXPECT_TRUE(snap.unsupported_providers.empty());
}

TEST_P(MailConformance, Lifecycle_StopKeepsTheBacklogAndPurgeDropsIt) {
  open();
  post_text(addr("inbox"), "kept");
  office_->stop();
  EXPECT_EQ(status(addr("inbox")).state, MailboxState::kOffline);
  EXPECT_EQ(office_->post(addr("inbox"), Letter::text("x")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(office_->start().ok());
  EXPECT_EQ(status(addr("inbox")).unread_count, 1u);
  office_->stop(StopOptions{.purge = true});
  ASSERT_TRUE(office_->start().ok());
  EXPECT_EQ(status(addr("inbox")).unread_count, 0u);
}

TEST_P(MailConformance, Lifecycle_StopTearsDownEverySubscription) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  Recorder r;
  Subscription sub = subscribe(addr("inbox"), r);
  office_->stop();
  EXPECT_FALSE(sub.active());
  EXPECT_EQ(status(addr("inbox")).extension_int(ext("subscriberCount")).value_or(0), 0);
  ASSERT_TRUE(office_->start().ok());
  EXPECT_EQ(post_text(addr("inbox"), "after restart").path, PostPath::kQueued);
  idle();
  EXPECT_EQ(r.count(), 0u);
}

TEST_P(MailConformance, Lifecycle_ClearDropsMessagesNeverSubscriptions) {
  open();
  if (!can(Capability::kSubscribe)) GTEST_SKIP() << "provider has no push subscriptions";
  if (!can(Capability::kClear)) GTEST_SKIP() << "provider cannot clear";
  post_text(addr("inbox"), "queued");
  post_text(addr("inbox"), "leased");
  std::optional<Delivery> d = fetch_manual(addr("inbox"));
  Recorder r;
  Subscription sub = subscribe(addr("inbox"), r);
  absl::StatusOr<uint64_t> cleared = office_->clear();
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(*cleared, 2u);
  MailboxStatus s = status(addr("inbox"));
  EXPECT_EQ(s.unread_count, 0u);
  EXPECT_EQ(s.in_flight_count, 0u);
  EXPECT_FALSE(d->ack());  // its copy is gone: nothing to settle
  EXPECT_EQ(post_text(addr("inbox"), "still subscribed").path, PostPath::kPushed);
  ASSERT_TRUE(r.wait_for(1));
}

}  // namespace
}  // namespace postal::mail::testing
