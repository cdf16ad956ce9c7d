// Remote watches (R-SUP-4, actors/include/postal/actors/remote_watch.h) over real channels: two
// Nodes in this process on ipc sockets, and a real `postal proc` child killed -9. Exactly one
// Down when the remote actor stops, at once when it does not exist, none after an unwatch, and
// one with `unreachable` when its proc vanishes, restarts or is killed.
#include "postal/actors/remote_watch.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "postal/actors/actor_handle.h"
#include "postal/actors/context.h"
#include "postal/actors/system_actors.h"
#include "postal/routing/host.h"
#include "postal/routing/node.h"
#include "postal/routing/workload.h"
#include "postal/runtime/client.h"
#include "support/free_port.h"
#include "support/must.h"
#include "support/nats_server.h"

namespace {

struct WatchIt {
  postal::runtime::ActorAddr who;
  bool unwatch = false;
  template <class A>
  void serialize(A& a) {
    a(who, unwatch);
  }
};
struct Idle {
  template <class A>
  void serialize(A&) {}
};

}  // namespace

POSTAL_MESSAGE(WatchIt, "test.remote_watch.WatchIt");
POSTAL_MESSAGE(Idle, "test.remote_watch.Idle");

namespace postal::routing {
namespace {

using actors::Context;
using actors::Down;
using runtime::ActorAddr;
using test_support::must;

constexpr absl::Duration kDeadline = absl::Seconds(20);
// The keepers' pace (the channels' heartbeats): short, so a vanished proc is noticed quickly, and
// a timeout long enough that a sanitizer or a loaded machine does not fake a death.
constexpr absl::Duration kInterval = absl::Milliseconds(200);
constexpr absl::Duration kTimeout = absl::Seconds(2);

// Watches what it is told to, and forwards every Down it accepts to a client's port.
struct Watcher : actors::Actor, actors::Handles<WatchIt> {
  runtime::PortRef<Down> out;
  explicit Watcher(runtime::PortRef<Down> o) : out(std::move(o)) {}
  absl::Status handle(Context& cx, WatchIt w) override {
    if (w.unwatch) {
      cx.unwatch(w.who);
      return absl::OkStatus();
    }
    return cx.watch(w.who);
  }
  absl::Status on_down(Context& cx, const Down& d) override {
    out.send(cx, d);
    return absl::OkStatus();
  }
};

// A member of the topology that tries to cancel someone else's watch: it sends the target's
// keeper an unwatch naming another proc's watcher, then a watch of its own (whose WatchAck,
// forwarded to `acks`, says the keeper served both).
struct Meddler : actors::Actor, actors::Handles<WatchIt, actors::WatchAck> {
  ActorAddr victim;
  runtime::PortRef<actors::WatchAck> acks;
  Meddler(ActorAddr v, runtime::PortRef<actors::WatchAck> a)
      : victim(std::move(v)), acks(std::move(a)) {}
  absl::Status handle(Context& cx, WatchIt w) override {
    const ActorAddr keeper{
        runtime::ActorId{w.who.id.proc,
                         runtime::Uid::singleton(*runtime::Label::parse(actors::kWatchName))},
        w.who.location};
    runtime::PortRef<actors::WatchRequest> to(
        keeper.port(runtime::Port::handler(wire::type_hash<actors::WatchRequest>())));
    to.send(cx, actors::WatchRequest{w.who, victim, false});
    to.send(cx, actors::WatchRequest{w.who, cx.self_addr(), true});
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, actors::WatchAck a) override {
    acks.send(cx, a);
    return absl::OkStatus();
  }
};

struct Target : actors::Actor, actors::Handles<Idle> {
  absl::Status handle(Context&, Idle) override { return absl::OkStatus(); }
};

class RemoteWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("remote_watch_", ::getpid());
    std::filesystem::create_directories(dir_);
    a_ = start("alpha");
    b_ = start("beta");
    client_ = must(runtime::Client::attach(a_->proc(), "test"));
    downs_ = std::make_unique<runtime::OpenPort<Down>>(runtime::open_port<Down>(*client_));
    watcher_ = must(actors::spawn<Watcher>(a_->proc(), "watcher", downs_->handle.bind()));
  }
  void TearDown() override {
    downs_.reset();
    client_.reset();
    a_.reset();
    b_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<Node> start(const std::string& name) {
    NodeOptions o;
    o.id = runtime::ProcId{runtime::Uid::singleton(must(runtime::Label::parse(name)))};
    o.listen = must(
        runtime::ChannelAddr::parse(absl::StrCat("ipc://", dir_.string(), "/", name, ".sock")));
    o.scheduler.workers = 1;
    o.channel.heartbeat_interval = kInterval;
    o.channel.heartbeat_timeout = kTimeout;
    return must(Node::start(std::move(o)));
  }
  // An actor's address as another proc reaches it.
  static ActorAddr remote(const Node& node, const ActorAddr& local) {
    return ActorAddr{local.id, runtime::Location::addr(node.listen_addr())};
  }
  // Once this returns, every watch request sent before it was served on b: a watch of a missing
  // actor there came back (the requests travel in order on one channel and are served in order).
  void sync_with_b() {
    watch(remote(*b_, b_->proc().addr().actor(
                          runtime::Uid::singleton(must(runtime::Label::parse("ghost"))))));
    absl::StatusOr<Down> ghost = next_down();
    ASSERT_TRUE(ghost.ok()) << ghost.status();
    EXPECT_EQ(ghost->reason, "no such actor");
  }
  void watch(const ActorAddr& who, bool unwatch = false) {
    watcher_.ref().send(*client_, WatchIt{who, unwatch});
  }
  absl::StatusOr<Down> next_down(absl::Duration timeout = kDeadline) {
    return downs_->receiver.recv(timeout);
  }
  void expect_no_more_downs() {
    // Long enough for several ping rounds and a timeout to have passed.
    absl::StatusOr<Down> extra = next_down(kTimeout + 2 * kInterval);
    EXPECT_FALSE(extra.ok()) << "a second Down: " << extra->reason;
  }

  std::filesystem::path dir_;
  std::unique_ptr<Node> a_, b_;
  std::unique_ptr<runtime::Client> client_;
  std::unique_ptr<runtime::OpenPort<Down>> downs_;
  actors::ActorHandle<Watcher> watcher_;
};

TEST_F(RemoteWatchTest, R_SUP_4_ARemoteActorThatStopsGivesItsWatcherExactlyOneDown) {
  actors::ActorHandle<Target> target = must(actors::spawn<Target>(b_->proc(), "target"));
  const ActorAddr there = remote(*b_, target.addr());
  watch(there);
  sync_with_b();  // the watch is in place
  target.stop("done for today");
  absl::StatusOr<Down> d = next_down();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->who.id, there.id);
  EXPECT_EQ(d->reason, "done for today");
  EXPECT_FALSE(d->failed);
  EXPECT_FALSE(d->unreachable);
  expect_no_more_downs();
}

TEST_F(RemoteWatchTest, R_SUP_4_WatchingARemoteActorThatDoesNotExistGivesDownAtOnce) {
  const ActorAddr nobody = remote(
      *b_, b_->proc().addr().actor(runtime::Uid::singleton(must(runtime::Label::parse("nobody")))));
  watch(nobody);
  absl::StatusOr<Down> d = next_down();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->who.id, nobody.id);
  EXPECT_EQ(d->reason, "no such actor");
  EXPECT_FALSE(d->unreachable);
  expect_no_more_downs();
}

TEST_F(RemoteWatchTest, R_SUP_4_AfterAnUnwatchNoDownArrivesNeitherFromTheTargetNorFromItsProc) {
  actors::ActorHandle<Target> target = must(actors::spawn<Target>(b_->proc(), "target"));
  const ActorAddr there = remote(*b_, target.addr());
  watch(there);
  watch(there, /*unwatch=*/true);
  sync_with_b();  // both were served
  target.stop();
  ASSERT_TRUE(target.wait(kDeadline).ok());
  b_.reset();  // and its proc goes away: still nothing
  expect_no_more_downs();
}

TEST_F(RemoteWatchTest, R_SUP_4_AProcThatVanishesEndsTheWatchUnreachableWithinItsTimeout) {
  actors::ActorHandle<Target> target = must(actors::spawn<Target>(b_->proc(), "target"));
  const ActorAddr there = remote(*b_, target.addr());
  watch(there);
  sync_with_b();
  const absl::Time gone = absl::Now();
  b_->server().vanish();  // as if killed: no GOODBYE, nothing answers any more
  absl::StatusOr<Down> d = next_down();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->who.id, there.id);
  EXPECT_TRUE(d->unreachable) << d->reason;
  // Within the keepers' timeout (plus scheduling), well before a delivery timeout (30 s).
  EXPECT_LT(absl::Now() - gone, kTimeout + absl::Seconds(8)) << d->reason;
  expect_no_more_downs();
}

// The target's proc comes back (same id, same address, a fresh incarnation that knows no
// watchers): the watch ends once, unreachable, and a late Down from the new proc is not taken
// for it.
TEST_F(RemoteWatchTest, R_SUP_4_AProcThatRestartsEndsTheWatchOnceAndItIsNotResurrected) {
  actors::ActorHandle<Target> target = must(actors::spawn<Target>(b_->proc(), "target"));
  const ActorAddr there = remote(*b_, target.addr());
  watch(there);
  sync_with_b();
  b_->server().vanish();
  b_.reset();
  b_ = start("beta");
  actors::ActorHandle<Target> again = must(actors::spawn<Target>(b_->proc(), "target"));
  absl::StatusOr<Down> d = next_down();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->who.id, there.id);
  EXPECT_TRUE(d->unreachable) << d->reason;
  // The new proc answers pings, so silence is not what ended it: its incarnation did, or the ping
  // in flight when the old one went came back.
  EXPECT_TRUE(absl::StrContains(d->reason, "restarted") ||
              absl::StrContains(d->reason, "cannot be reached"))
      << d->reason;
  again.stop();  // the new incarnation's actor: nobody watches it
  expect_no_more_downs();
}

// When the watcher's proc can no longer reach the target's (killed, cut off), its cancel never
// arrives either: the target's proc drops what that proc registered once its pings stop for
// twice the timeout. Here b's listener closes (b's own status is read locally), so nothing of
// a's reaches b any more.
TEST_F(RemoteWatchTest, R_SUP_4_RegistrationsOfAWatcherProcThatIsGoneAreDroppedByTheTargetsProc) {
  actors::ActorHandle<Target> target = must(actors::spawn<Target>(b_->proc(), "target"));
  watch(remote(*b_, target.addr()));
  sync_with_b();
  auto probe = must(runtime::Client::attach(b_->proc(), "probe"));
  auto watchers = [&]() -> int64_t {
    absl::StatusOr<actors::ProcStatus> st =
        actors::query_status(*probe, b_->proc().addr(), kDeadline);
    if (!st.ok()) return -1;
    for (const actors::ActorInfo& a : st->actors) {
      if (a.id == target.addr().id.to_string()) return static_cast<int64_t>(a.watchers);
    }
    return -2;
  };
  ASSERT_EQ(watchers(), 1);
  const absl::Time cut = absl::Now();
  b_->server().vanish();
  absl::StatusOr<Down> d = next_down();  // a's side ends the watch
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->unreachable);
  const absl::Time deadline = absl::Now() + kDeadline;
  while (watchers() != 0 && absl::Now() < deadline) {
  }
  EXPECT_EQ(watchers(), 0);
  EXPECT_GE(absl::Now() - cut, kTimeout) << "dropped before the pings were overdue";
}

// R-SEC-2 carried to watches: only a watcher's own proc may cancel (or register) it.
TEST_F(RemoteWatchTest, R_SUP_4_AnotherProcCannotCancelSomeoneElsesWatch) {
  actors::ActorHandle<Target> target = must(actors::spawn<Target>(b_->proc(), "target"));
  const ActorAddr there = remote(*b_, target.addr());
  watch(there);
  sync_with_b();
  std::unique_ptr<Node> c = start("gamma");
  auto c_client = must(runtime::Client::attach(c->proc(), "test"));
  runtime::OpenPort<actors::WatchAck> acks = runtime::open_port<actors::WatchAck>(*c_client);
  const ActorAddr victim{watcher_.addr().id, runtime::Location::addr(a_->listen_addr())};
  auto meddler = must(actors::spawn<Meddler>(c->proc(), "meddler", victim, acks.handle.bind()));
  meddler.ref().send(*c_client, WatchIt{there, false});
  ASSERT_TRUE(acks.receiver.recv(kDeadline).ok()) << "b served the meddler's requests";
  target.stop("still watched");
  absl::StatusOr<Down> d = next_down();
  ASSERT_TRUE(d.ok()) << d.status() << ": the meddler cancelled the watch";
  EXPECT_EQ(d->reason, "still watched");
}

// A real proc killed -9: its watcher, in this process, hears of it from the watch keepers' pings
// — directly, through a gateway (whose own channel stays healthy: only the keepers' pings, which
// go end to end, see the proc behind it die), and over nats:// (a nats-server postal up starts).
enum class Path { kDirect, kViaGateway, kOverNats };

class RemoteWatchProcTest : public ::testing::TestWithParam<Path> {};

TEST_P(RemoteWatchProcTest, R_SUP_4_AProcKilledMinus9EndsTheWatchOfItsActorUnreachable) {
  const bool via_gateway = GetParam() == Path::kViaGateway;
  TopologySpec spec;
  spec.name = absl::StrCat("watch-", ::getpid(), "-", static_cast<int>(GetParam()));
  spec.on_proc_exit = OnProcExit::kIgnore;  // the host goes on after the kill
  const std::string dir = absl::StrCat("ipc:///tmp/", spec.name);
  if (via_gateway) {
    spec.gateways.push_back({"edge", must(runtime::ChannelAddr::parse(dir + "/edge.sock")), {}});
  }
  runtime::ChannelAddr listen = must(runtime::ChannelAddr::parse(dir + "/gamma.sock"));
  if (GetParam() == Path::kOverNats) {
    if (test_support::NatsServer::binary().empty())
      GTEST_SKIP() << test_support::NatsServer::kMissing;
    const int port = test_support::free_port();
    spec.start_nats = absl::StrCat("127.0.0.1:", port);
    listen = must(runtime::ChannelAddr::nats("127.0.0.1", static_cast<uint16_t>(port),
                                             absl::StrCat("postal.", spec.name, ".gamma")));
  }
  spec.procs.push_back({"gamma",
                        listen,
                        via_gateway ? std::optional<std::string>("edge") : std::nullopt,
                        1,
                        std::nullopt,
                        {},
                        std::nullopt});
  spec.actors.push_back({"gamma", "echo", std::string(kEchoType), {}});
  HostOptions o;
  o.postal_binary = POSTAL_BINARY;
  o.proc_workers = 1;
  o.channel.heartbeat_interval = kInterval;
  o.channel.heartbeat_timeout = kTimeout;
  auto host = Host::up(spec, o);
  ASSERT_TRUE(host.ok()) << host.status();
  runtime::Proc& proc = (*host)->proc();
  auto client = must(runtime::Client::attach(proc, "test"));
  runtime::OpenPort<Down> downs = runtime::open_port<Down>(*client);
  auto watcher = must(actors::spawn<Watcher>(proc, "watcher", downs.handle.bind()));
  const ActorAddr echo = *(*host)->actor_addr("gamma", "echo");
  EXPECT_EQ(echo.location.is_via(), via_gateway);
  watcher.ref().send(*client, WatchIt{echo, false});
  watcher.ref().send(
      *client,
      WatchIt{ActorAddr{runtime::ActorId{echo.id.proc, runtime::Uid::singleton(
                                                           must(runtime::Label::parse("ghost")))},
                        echo.location},
              false});
  absl::StatusOr<Down> ghost = downs.receiver.recv(kDeadline);
  ASSERT_TRUE(ghost.ok()) << ghost.status();
  ASSERT_EQ(ghost->reason, "no such actor");
  ASSERT_EQ(::kill((*host)->find_proc("gamma")->pid, SIGKILL), 0);
  absl::StatusOr<Down> d = downs.receiver.recv(kDeadline);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->who.id, echo.id);
  EXPECT_TRUE(d->unreachable) << d->reason;
}

INSTANTIATE_TEST_SUITE_P(Paths, RemoteWatchProcTest,
                         ::testing::Values(Path::kDirect, Path::kViaGateway, Path::kOverNats),
                         [](const auto& info) {
                           return info.param == Path::kDirect       ? "Direct"
                                  : info.param == Path::kViaGateway ? "ViaGateway"
                                                                    : "OverNats";
                         });

}  // namespace
}  // namespace postal::routing
