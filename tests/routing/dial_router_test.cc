// DialRouter over real sockets (dial_router.h): R-FLOW-3, a dial never blocks the posting
// thread, and a dead or unreachable peer never delays traffic to another.
//
// One test process, two procs: alice posts through a DialRouter on the sending proc; a
// ChannelServer delivers into bob's port on the receiving proc. The black hole is a loopback
// TCP listener whose accept queue is full, so the kernel drops further SYNs and a connect to it
// neither succeeds nor fails until the dialer gives up.
#include "postal/routing/dial_router.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <cerrno>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "postal/routing/channel_server.h"
#include "postal/runtime/client.h"
#include "postal/runtime/port.h"
#include "support/count_msg.h"
#include "support/must.h"
#include "support/wait_for.h"

namespace postal::routing {
namespace {

using runtime::ChannelAddr;
using runtime::EnvelopePtr;
using runtime::TransportReason;
using test_support::must;

constexpr absl::Duration kDeadline = absl::Seconds(20);

// A loopback TCP port that accepts no connection: listen(backlog 0), never accept, and fill the
// accept queue until a connect stays pending. Closes everything on destruction.
class BlackHole {
 public:
  BlackHole() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::listen(listener_, 0) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    for (int i = 0; i < 16 && !full_; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      fillers_.push_back(fd);
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      pollfd p{fd, POLLOUT, 0};
      full_ = ::poll(&p, 1, 200) == 0;  // still connecting: SYNs are dropped now
    }
  }
  ~BlackHole() {
    for (int fd : fillers_) ::close(fd);
    if (listener_ >= 0) ::close(listener_);
  }
  // Whether the kernel now drops SYNs to it (false: the test cannot build a black hole here).
  bool ready() const { return full_; }
  ChannelAddr addr() const { return must(ChannelAddr::tcp("127.0.0.1", port_)); }

 private:
  int listener_ = -1;
  uint16_t port_ = 0;
  bool full_ = false;
  std::vector<int> fillers_;
};

class DialRouterTest : public testing::Test {
 protected:
  DialRouterTest()
      : sending_(runtime::ProcOptions::threads(1)),
        receiving_(runtime::ProcOptions::threads(1)),
        alice_(must(runtime::Client::attach(sending_, "alice"))),
        bob_(must(runtime::Client::attach(receiving_, "bob"))),
        port_(runtime::open_port<test_support::CountMsg>(*bob_)),
        server_(must(ChannelServer::serve(io_,
                                          must(ChannelAddr::ipc_abstract(absl::StrCat(
                                              "postal-dial-", ::getpid(), "-", ++count_))),
                                          receiving_, receiving_))) {}

  static ChannelOptions quick_dials(size_t max_queue = 65536) {
    ChannelOptions o;
    o.dial_timeout = absl::Milliseconds(500);
    o.max_dial_queue = max_queue;
    return o;
  }
  // An envelope from alice to bob's port, routed to `where` by its location.
  EnvelopePtr to(const ChannelAddr& where, int64_t n) {
    runtime::PortAddr dest = port_.handle.bind().addr();
    dest.location = runtime::Location::addr(where);
    return runtime::MessageEnvelope::make(alice_->self_addr(), std::move(dest),
                                          wire::Any::make(test_support::CountMsg{n}));
  }
  // The next envelope of alice's that came back: its n and its root failure.
  std::pair<int64_t, runtime::DeliveryFailure> next_returned(absl::Duration wait = kDeadline) {
    absl::StatusOr<EnvelopePtr> env = alice_->next_undeliverable(wait);
    if (!env.ok() || (*env)->root_failure() == nullptr) return {-1, {}};
    absl::StatusOr<test_support::CountMsg> msg = (*env)->data().take<test_support::CountMsg>();
    return {msg.ok() ? msg->n : -1, *(*env)->root_failure()};
  }

  static inline int count_ = 0;
  IoThread io_;
  runtime::Proc sending_;
  runtime::Proc receiving_;
  std::unique_ptr<runtime::Client> alice_;
  std::unique_ptr<runtime::Client> bob_;
  runtime::OpenPort<test_support::CountMsg> port_;
  std::unique_ptr<ChannelServer> server_;
};

TEST_F(DialRouterTest, R_FLOW_3_ABlackHolePeerDelaysNoTrafficToAnother) {
  BlackHole hole;
  if (!hole.ready()) GTEST_SKIP() << "this kernel accepted every connect; no black hole to dial";
  DialRouter router(io_, sending_, quick_dials());

  // The post to the black hole returns at once: no connect on the posting thread.
  const absl::Time before = absl::Now();
  router.post(to(hole.addr(), -1), sending_);
  EXPECT_LT(absl::Now() - before, absl::Milliseconds(250)) << "the post waited for the dial";

  // Meanwhile the other peer gets everything, in order, while the hole is still being dialed.
  constexpr int kMessages = 500;
  for (int n = 0; n < kMessages; ++n) {
    router.post(to(server_->local_addr(), n), sending_);
    if (n % 100 == 0) router.post(to(hole.addr(), -1), sending_);
  }
  for (int n = 0; n < kMessages; ++n) {
    absl::StatusOr<test_support::CountMsg> got = port_.receiver.recv(kDeadline);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->n, n);
  }
  // R-FLOW-3: the hole's envelopes come back DialFailed once the dial gives up, none earlier
  // than that and none lost.
  for (int i = 0; i < 1 + kMessages / 100; ++i) {
    auto [n, failure] = next_returned();
    EXPECT_EQ(n, -1);
    EXPECT_EQ(failure.transport, TransportReason::kDialFailed) << failure.to_string();
    EXPECT_NE(failure.detail.find(hole.addr().to_string()), std::string::npos) << failure.detail;
    EXPECT_NE(failure.detail.find("dial_timeout"), std::string::npos) << failure.detail;
  }
  EXPECT_EQ(next_returned(absl::Milliseconds(100)).first, -1) << "nothing else comes back";
  EXPECT_EQ(sending_.stats().dropped, 0u);
}

TEST_F(DialRouterTest, R_FAIL_1_ARefusedDialsFailureCarriesTheOsError) {
  const ChannelAddr nobody =
      must(ChannelAddr::ipc_abstract(absl::StrCat("postal-dial-errno-", ::getpid())));
  DialRouter router(io_, sending_, quick_dials());
  router.post(to(nobody, 0), sending_);
  auto [n, failure] = next_returned();
  EXPECT_EQ(n, 0);
  EXPECT_EQ(failure.transport, TransportReason::kDialFailed) << failure.to_string();
  EXPECT_EQ(failure.os_errno, ECONNREFUSED) << "the OS error is a field, not only text";
}

TEST_F(DialRouterTest, R_FLOW_3_ARefusedDialReturnsEveryQueuedEnvelopeAndTheNextPostRedials) {
  const ChannelAddr nobody =
      must(ChannelAddr::ipc_abstract(absl::StrCat("postal-dial-nobody-", ::getpid())));
  DialRouter router(io_, sending_, quick_dials());
  for (int n = 0; n < 3; ++n) router.post(to(nobody, n), sending_);
  std::set<int64_t> back;  // a post racing the close may fail on another client: any order
  for (int n = 0; n < 3; ++n) {
    auto [got, failure] = next_returned();
    back.insert(got);
    EXPECT_EQ(failure.transport, TransportReason::kDialFailed) << failure.to_string();
    EXPECT_NE(failure.detail.find("ECONNREFUSED"), std::string::npos) << failure.detail;
    EXPECT_EQ(failure.os_errno, ECONNREFUSED) << "R-FAIL-1: the OS error is a field too";
  }
  EXPECT_EQ(back, (std::set<int64_t>{0, 1, 2}));
  const size_t dials = router.dials();  // 1–3: a refused dial may close before the next post
  router.post(to(nobody, 3), sending_);
  EXPECT_EQ(next_returned().first, 3);
  EXPECT_EQ(router.dials(), dials + 1) << "the closed client was evicted and the address redialed";
}

TEST_F(DialRouterTest, R_FLOW_3_WhatWaitsForADialIsBounded) {
  BlackHole hole;
  if (!hole.ready()) GTEST_SKIP() << "this kernel accepted every connect; no black hole to dial";
  DialRouter router(io_, sending_, quick_dials(/*max_queue=*/4));
  for (int n = 0; n < 7; ++n) router.post(to(hole.addr(), n), sending_);
  // Past the bound, posts fail at once, before the dial gives up on the four queued ones.
  for (int n = 4; n < 7; ++n) {
    auto [got, failure] = next_returned(absl::Milliseconds(400));
    EXPECT_EQ(got, n);
    EXPECT_NE(failure.detail.find("queue is full"), std::string::npos) << failure.detail;
  }
  for (int n = 0; n < 4; ++n) {
    auto [got, failure] = next_returned();
    EXPECT_EQ(got, n);
    EXPECT_NE(failure.detail.find("dial_timeout"), std::string::npos) << failure.detail;
  }
}

using test_support::wait_for;

// Issue 10 finding 7: every throwaway peer (a `postal status` call) left a cached client behind
// for good. Idle clients are evicted and freed: their connections close, and a later post to the
// address dials again.
TEST_F(DialRouterTest, R_ROUTE_3_IdleClientsAreEvictedAndFreedAndTheAddressIsRedialed) {
  constexpr int kPeers = 8;
  std::vector<std::unique_ptr<ChannelServer>> peers;
  for (int i = 0; i < kPeers; ++i) {
    peers.push_back(must(ChannelServer::serve(
        io_, must(ChannelAddr::ipc_abstract(absl::StrCat("postal-dial-idle-", ::getpid(), "-", i))),
        receiving_, receiving_)));
  }
  ChannelOptions options = quick_dials();
  options.idle_client_timeout = absl::Milliseconds(200);
  DialRouter router(io_, sending_, options);
  for (int i = 0; i < kPeers; ++i) router.post(to(peers[i]->local_addr(), i), sending_);
  for (int i = 0; i < kPeers; ++i) ASSERT_TRUE(port_.receiver.recv(kDeadline).ok());
  EXPECT_EQ(router.live_clients(), static_cast<size_t>(kPeers));

  ASSERT_TRUE(wait_for([&] { return router.live_clients() == 0; }))
      << router.live_clients() << " clients still cached";
  // Freed, not parked: each peer sees its connection close.
  for (const auto& peer : peers) {
    ASSERT_TRUE(wait_for([&] { return peer->stats().connections == 0; }))
        << peer->local_addr().to_string() << " still has a connection";
  }
  const size_t dials = router.dials();
  router.post(to(peers[0]->local_addr(), 100), sending_);
  absl::StatusOr<test_support::CountMsg> again = port_.receiver.recv(kDeadline);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->n, 100);
  EXPECT_EQ(router.dials(), dials + 1);
  EXPECT_EQ(next_returned(absl::Milliseconds(100)).first, -1) << "nothing came back";
}

// A route the book gains after posts took another one applies to the next post: the router's
// reuse of the last route (a burst to one destination) must not outlive a change of the book.
TEST_F(DialRouterTest, R_ROUTE_3_ABookEntryAddedBetweenPostsTakesTheNextOne) {
  std::unique_ptr<ChannelServer> booked = must(ChannelServer::serve(
      io_, must(ChannelAddr::ipc_abstract(absl::StrCat("postal-dial-booked-", ::getpid()))),
      receiving_, receiving_));
  DialRouter router(io_, sending_, quick_dials());
  router.post(to(server_->local_addr(), 1), sending_);  // by its location
  ASSERT_TRUE(port_.receiver.recv(kDeadline).ok());
  router.post(to(server_->local_addr(), 2), sending_);  // the same route again
  ASSERT_TRUE(port_.receiver.recv(kDeadline).ok());
  EXPECT_EQ(router.dials(), 1u);

  router.add(port_.handle.bind().addr().id.actor, booked->local_addr());
  router.post(to(server_->local_addr(), 3), sending_);
  absl::StatusOr<test_support::CountMsg> got = port_.receiver.recv(kDeadline);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->n, 3);
  EXPECT_EQ(router.dials(), 2u) << "the post after the book changed reused the old route";
  EXPECT_EQ(booked->stats().connections_accepted, 1u);
}

// A client in use is not idle: posts keep it, however short the timeout's sweep period.
TEST_F(DialRouterTest, R_ROUTE_3_AClientInUseIsNotEvicted) {
  ChannelOptions options = quick_dials();
  options.idle_client_timeout = absl::Milliseconds(300);
  DialRouter router(io_, sending_, options);
  const absl::Time until = absl::Now() + absl::Milliseconds(900);
  int n = 0;
  for (; absl::Now() < until; ++n) {
    router.post(to(server_->local_addr(), n), sending_);
    absl::StatusOr<test_support::CountMsg> got = port_.receiver.recv(kDeadline);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->n, n);
    absl::SleepFor(absl::Milliseconds(20));  // pacing, well under the idle timeout
  }
  EXPECT_EQ(router.dials(), 1u) << "a client in use was evicted and redialed";
}

}  // namespace
}  // namespace postal::routing
