// Credit between procs (R-FLOW-2, docs/wire.md §10.1): when the receiving proc refuses an
// envelope because the destination actor's mailbox is full, the server answers CREDIT `paused`
// and the sending channel client holds that actor's further envelopes — in order, within its
// per-destination bound — instead of writing them; CREDIT `open` (the mailbox drained to half
// its bound) sends them. Other actors behind the same connection flow meanwhile; held envelopes
// that wait past delivery_timeout return Overloaded; a reconnect keeps every envelope accounted.
// Real ipc sockets, two procs in the test process (channel_fixture.h).
#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "boost/fiber/operations.hpp"
#include "channel_fixture.h"
#include "credit_frame.h"
#include "postal/postal.h"

namespace {

struct CreditItem {
  int64_t n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};

}  // namespace

POSTAL_MESSAGE(CreditItem, "test.routing.credit.Item");

namespace postal::routing::channel_test {
namespace {

using runtime::OverloadBound;

// Records the items it handles, in order; while `gate` is closed its handler waits (its fiber
// sleeps inside a BlockingScope, so the worker runs other actors meanwhile).
struct Recorder : actors::Actor, actors::Handles<CreditItem> {
  std::atomic<bool>* gate;
  absl::Mutex* mu;
  std::vector<int64_t>* seen;
  Recorder(std::atomic<bool>* g, absl::Mutex* m, std::vector<int64_t>* s)
      : gate(g), mu(m), seen(s) {}
  absl::Status handle(actors::Context& cx, CreditItem item) override {
    runtime::Scheduler::BlockingScope blocking(cx.proc().scheduler());
    while (!gate->load()) boost::this_fiber::sleep_for(std::chrono::milliseconds(1));
    absl::MutexLock lock(mu);
    seen->push_back(item.n);
    return absl::OkStatus();
  }
};

class CreditTest : public ChannelTest {
 protected:
  // The receiving proc's way back: what it refuses reaches alice through a channel of its own
  // into the sending proc.
  CreditTest()
      : back_server_(must(ChannelServer::serve(io_, ipc_path(), sending_, sending_))),
        back_(must(ChannelClient::dial(io_, back_server_->local_addr(), receiving_))) {
    receiving_.set_forwarder(back_.get());
  }
  ~CreditTest() override { receiving_.set_forwarder(nullptr); }

  // An actor of the receiving proc whose mailbox holds at most `bound` messages (0: unbounded).
  actors::ActorHandle<Recorder> spawn(const char* name, std::atomic<bool>* gate,
                                   std::vector<int64_t>* seen, uint64_t bound = 0) {
    actors::SpawnOptions options;
    if (bound != 0) options = actors::SpawnOptions::bounded(runtime::MailboxBound::of(bound));
    return must(actors::spawn<Recorder>(receiving_, options, name, gate, &mu_, seen));
  }
  void send(ChannelClient& client, const actors::ActorHandle<Recorder>& to, int64_t n) {
    client.post(runtime::MessageEnvelope::make(
                    alice_->self_addr(),
                    to.addr().port(runtime::Port::handler(wire::type_hash<CreditItem>())),
                    wire::Any::make(CreditItem{n})),
                sending_);
  }
  size_t seen_count(const std::vector<int64_t>& seen) {
    absl::MutexLock lock(&mu_);
    return seen.size();
  }
  std::vector<int64_t> copy(const std::vector<int64_t>& seen) {
    absl::MutexLock lock(&mu_);
    return seen;
  }
  // The next envelope that came back: its item's n and its root failure.
  std::pair<int64_t, runtime::DeliveryFailure> next_back(absl::Duration wait = kDeadline) {
    absl::StatusOr<EnvelopePtr> env = alice_->next_undeliverable(wait);
    EXPECT_TRUE(env.ok()) << env.status();
    if (!env.ok() || (*env)->root_failure() == nullptr) return {-1, {}};
    absl::StatusOr<CreditItem> item = (*env)->data().take<CreditItem>();
    EXPECT_TRUE(item.ok()) << item.status();
    return {item.ok() ? item->n : -1, *(*env)->root_failure()};
  }

  std::unique_ptr<ChannelServer> back_server_;
  std::unique_ptr<ChannelClient> back_;
  absl::Mutex mu_;
  std::atomic<bool> closed_gate_{false};
  std::atomic<bool> open_gate_{true};
};

TEST_F(CreditTest, R_FLOW_2_AFullActorIsPausedAtTheSenderAndItsHeldEnvelopesFollowInOrder) {
  const ChannelAddr addr = ipc_path();
  auto server = serve(addr);
  std::vector<int64_t> slow_seen, fast_seen;
  auto slow = spawn("slow", &closed_gate_, &slow_seen, 16);
  auto fast = spawn("fast", &open_gate_, &fast_seen);
  auto client = dial(addr);

  // 0…15 fill the mailbox (the first is being handled, held by its gate); 16 is refused by the
  // receiving proc and comes back over the wire, and the server pauses the actor.
  for (int64_t n = 0; n <= 16; ++n) send(*client, slow, n);
  auto [first, why] = next_back();
  EXPECT_EQ(first, 16);
  EXPECT_EQ(why.transport, TransportReason::kOverloaded) << why.to_string();
  EXPECT_EQ(why.bound, OverloadBound::kMailboxMessages);
  ASSERT_TRUE(test_support::wait_for([&] { return client->credit().paused == 1; }, kDeadline));
  EXPECT_EQ(server->stats().credit_pauses, 1u);

  // Paused: 17…24 stay in the sender (nothing crosses the wire to be refused), while another
  // actor behind the same connection is served at once.
  for (int64_t n = 17; n <= 24; ++n) send(*client, slow, n);
  send(*client, fast, 100);
  ASSERT_TRUE(test_support::wait_for([&] { return seen_count(fast_seen) == 1; }, kDeadline));
  EXPECT_TRUE(test_support::wait_for([&] { return client->credit().held == 8; }, kDeadline));
  EXPECT_EQ(alice_->next_undeliverable(absl::Milliseconds(200)).status().code(),
            absl::StatusCode::kDeadlineExceeded);

  // The actor drains to half its bound: the server opens it and the held envelopes follow, all
  // of them fitting, in the order they were posted.
  closed_gate_.store(true);
  ASSERT_TRUE(test_support::wait_for([&] { return seen_count(slow_seen) == 24; }, kDeadline));
  std::vector<int64_t> expected;
  for (int64_t n = 0; n <= 24; ++n) {
    if (n != 16) expected.push_back(n);
  }
  EXPECT_EQ(copy(slow_seen), expected);
  EXPECT_EQ(client->credit().paused, 0u);
  EXPECT_EQ(client->credit().held, 0u);
  EXPECT_EQ(server->stats().credit_opens, 1u);
  EXPECT_EQ(alice_->next_undeliverable(absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(CreditTest, R_FLOW_2_WithoutTheFeatureTheSameFloodIsRefusedAcrossTheWire) {
  // The contrast: a client that does not offer `credit` writes everything; the receiving proc
  // refuses the overflow one by one (what stays the fallback through gateways).
  const ChannelAddr addr = ipc_path();
  auto server = serve(addr);
  std::vector<int64_t> slow_seen;
  auto slow = spawn("slow", &closed_gate_, &slow_seen, 16);
  ChannelOptions no_credit;
  no_credit.credit = false;
  auto client = dial(addr, no_credit);
  for (int64_t n = 0; n <= 24; ++n) send(*client, slow, n);
  for (int64_t n = 16; n <= 24; ++n) {
    auto [back, why] = next_back();
    EXPECT_EQ(back, n);
    EXPECT_EQ(why.bound, OverloadBound::kMailboxMessages) << why.to_string();
  }
  EXPECT_EQ(client->credit().paused, 0u);
  EXPECT_EQ(server->stats().credit_pauses, 0u);
  closed_gate_.store(true);
  EXPECT_TRUE(test_support::wait_for([&] { return seen_count(slow_seen) == 16; }, kDeadline));
}

TEST_F(CreditTest, R_FLOW_2_HeldEnvelopesReturnOverloadedAfterTheDeliveryTimeout) {
  const ChannelAddr addr = ipc_path();
  auto server = serve(addr);
  std::vector<int64_t> slow_seen, fast_seen;
  auto slow = spawn("slow", &closed_gate_, &slow_seen, 1);
  auto fast = spawn("fast", &open_gate_, &fast_seen);
  ChannelOptions options;
  options.delivery_timeout = absl::Milliseconds(400);
  auto client = dial(addr, options);
  send(*client, slow, 0);
  send(*client, slow, 1);  // refused: the pause
  EXPECT_EQ(next_back().first, 1);
  ASSERT_TRUE(test_support::wait_for([&] { return client->credit().paused == 1; }, kDeadline));
  for (int64_t n = 2; n <= 4; ++n) send(*client, slow, n);
  // The actor stays full: the held envelopes come back from the sender itself, naming why.
  for (int64_t n = 2; n <= 4; ++n) {
    auto [back, why] = next_back();
    EXPECT_EQ(back, n);
    EXPECT_EQ(why.transport, TransportReason::kOverloaded);
    EXPECT_EQ(why.bound, OverloadBound::kDestinationMessages) << why.to_string();
    EXPECT_NE(why.detail.find("CREDIT paused"), std::string::npos) << why.detail;
  }
  // The channel did not time out: nothing it wrote was unacked, and it still delivers.
  EXPECT_FALSE(client->closed()) << client->status();
  send(*client, fast, 7);
  EXPECT_TRUE(test_support::wait_for([&] { return seen_count(fast_seen) == 1; }, kDeadline));
  closed_gate_.store(true);
  EXPECT_TRUE(test_support::wait_for([&] { return seen_count(slow_seen) == 1; }, kDeadline));
}

TEST_F(CreditTest, R_FLOW_2_APauseOutlivesAReconnectAndEveryEnvelopeIsAccountedOnce) {
  const ChannelAddr addr = ipc_path();
  auto server = serve(addr);
  std::vector<int64_t> slow_seen;
  auto slow = spawn("slow", &closed_gate_, &slow_seen, 8);
  auto client = dial(addr);
  for (int64_t n = 0; n <= 8; ++n) send(*client, slow, n);
  EXPECT_EQ(next_back().first, 8);
  ASSERT_TRUE(test_support::wait_for([&] { return client->credit().paused == 1; }, kDeadline));
  for (int64_t n = 9; n <= 12; ++n) send(*client, slow, n);
  ASSERT_TRUE(test_support::wait_for([&] { return client->credit().held == 4; }, kDeadline));

  // The connection drops and the session resumes: the client keeps its pause (the server repeats
  // it right after WELCOME, in case it was lost), so the held envelopes stay held.
  const uint64_t accepted = server->stats().connections_accepted;
  server->drop_connections();
  ASSERT_TRUE(test_support::wait_for(
      [&] { return server->stats().connections_accepted > accepted; }, kDeadline));
  // Past the new WELCOME and the repeated pause (one read batch on the client), nothing held was
  // written: a write would have come back refused.
  EXPECT_EQ(alice_->next_undeliverable(absl::Milliseconds(300)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(client->credit().paused, 1u);
  EXPECT_EQ(client->credit().held, 4u);

  closed_gate_.store(true);
  ASSERT_TRUE(test_support::wait_for([&] { return seen_count(slow_seen) == 12; }, kDeadline));
  std::vector<int64_t> expected = {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12};
  EXPECT_EQ(copy(slow_seen), expected);
  EXPECT_EQ(alice_->next_undeliverable(absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(CreditFrame, R_FLOW_2_CreditRoundTripsAndMalformedBodiesAreStreamErrors) {
  const runtime::ActorId a = must(runtime::ActorId::parse("worker.shop"));
  const runtime::ActorId b = must(runtime::ActorId::parse("other.shop"));
  const v2::Credit credit{{{v2::CreditState::kPaused, a}, {v2::CreditState::kOpen, b}}};
  std::string frame;
  v2::append(frame, credit);
  v2::FrameSplitter splitter(1 << 20);
  splitter.feed(frame);
  absl::StatusOr<std::optional<v2::RawFrame>> raw = splitter.next();
  ASSERT_TRUE(raw.ok() && raw->has_value());
  EXPECT_EQ((*raw)->kind, v2::Kind::kCredit);
  const std::string body((*raw)->body);
  absl::StatusOr<v2::Credit> back = v2::decode_credit(body);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, credit);

  auto refused = [](std::string b) { return !v2::decode_credit(b).ok(); };
  EXPECT_TRUE(refused(body.substr(0, body.size() - 1)));  // truncated
  std::string reserved = body;
  reserved[2] = 1;
  EXPECT_TRUE(refused(reserved));
  std::string state = body;
  state[4] = 7;  // the first entry's state
  EXPECT_TRUE(refused(state));
  std::string count = body;
  count[0] = static_cast<char>(0xff);  // more entries than the body holds
  EXPECT_TRUE(refused(count));
  EXPECT_TRUE(refused(body + "x"));  // trailing bytes
  std::string bad_actor = body;
  bad_actor[8] = '@';  // "@orker.shop" does not parse
  EXPECT_TRUE(refused(bad_actor));
}

}  // namespace
}  // namespace postal::routing::channel_test
