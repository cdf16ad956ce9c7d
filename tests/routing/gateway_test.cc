// Gateway: Via peeling, peers, attached procs, forwarder (R-GW-1, R-GW-2).
#include "postal/routing/gateway.h"

#include <vector>

#include "gtest/gtest.h"
#include "postal/runtime/proc.h"
#include "support/recording_senders.h"

namespace postal::routing {
namespace {

using runtime::EnvelopePtr;
using runtime::Label;
using runtime::Location;
using runtime::Uid;

struct GwMsg {
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};

}  // namespace
}  // namespace postal::routing

POSTAL_MESSAGE(postal::routing::GwMsg, "test.routing.GwMsg");

namespace postal::routing {
namespace {

using test_support::RecordingReturn;
using test_support::RecordingSender;

Uid label(const char* s) { return Uid::singleton(*Label::parse(s)); }

Location loc(const char* text) { return *Location::parse(text); }

// An envelope for actor `a` on proc `p`, reached at `location`.
EnvelopePtr to(const char* location) {
  runtime::PortAddr dest = *runtime::PortAddr::parse(std::string("a.p:e0@") + location);
  return runtime::MessageEnvelope::make(runtime::ActorAddr{}, dest, wire::Any::make(GwMsg{}));
}

const runtime::ProcId kP{label("p")};

TEST(Gateway, R_GW_1_PeelsItsOwnViaAndDeliversToTheAttachedProc) {
  RecordingSender proc;
  RecordingReturn ret;
  Gateway g1(label("g1"), loc("tcp://127.0.0.1:4000"));
  ASSERT_TRUE(g1.attach(kP, &proc).ok());
  g1.post(to("g1.tcp://127.0.0.1:4000"), ret);
  ASSERT_EQ(proc.got.size(), 1u);
  EXPECT_FALSE(proc.got[0]->next_hop().location.is_via());
  EXPECT_EQ(proc.got[0]->dest().location, loc("g1.tcp://127.0.0.1:4000"));  // dest unchanged
}

TEST(Gateway, R_GW_1_ViaNamingAPeerIsPeeledAndPostedToThatPeer) {
  RecordingSender peer;
  RecordingReturn ret;
  Gateway g1(label("g1"), loc("tcp://127.0.0.1:4000"));
  ASSERT_TRUE(g1.add_peer(label("g2"), &peer).ok());
  g1.post(to("g2.g3.ipc:///tmp/x.sock"), ret);
  ASSERT_EQ(peer.got.size(), 1u);
  EXPECT_EQ(peer.got[0]->next_hop().location, loc("g3.ipc:///tmp/x.sock"));
}

TEST(Gateway, R_GW_1_RouteThroughTwoGatewaysByViaHops) {
  RecordingSender proc;
  RecordingReturn ret;
  Gateway g1(label("g1"), loc("tcp://127.0.0.1:4000"));
  Gateway g2(label("g2"), loc("tcp://127.0.0.1:5000"));
  ASSERT_TRUE(g1.add_peer(label("g2"), &g2).ok());
  ASSERT_TRUE(g2.attach(kP, &proc).ok());
  g1.post(to("g1.g2.tcp://127.0.0.1:5000"), ret);
  ASSERT_EQ(proc.got.size(), 1u);
  EXPECT_TRUE(ret.returned.empty());
}

TEST(Gateway, R_GW_1_ViaNamingNeitherSelfNorPeerGoesToTheForwarder) {
  RecordingSender forwarder, proc;
  RecordingReturn ret;
  Gateway g1(label("g1"), loc("tcp://127.0.0.1:4000"), &forwarder);
  ASSERT_TRUE(g1.attach(kP, &proc).ok());
  g1.post(to("g9.tcp://10.0.0.1:4000"), ret);
  ASSERT_EQ(forwarder.got.size(), 1u);
  EXPECT_EQ(forwarder.got[0]->next_hop().location, loc("g9.tcp://10.0.0.1:4000"));  // unpeeled
}

TEST(Gateway, R_GW_2_ForeignViaIsNeverDeliveredLocallyEvenWhenTheProcIsAttached) {
  RecordingSender proc;
  RecordingReturn ret;
  Gateway g1(label("g1"), loc("tcp://127.0.0.1:4000"));  // no forwarder
  ASSERT_TRUE(g1.attach(kP, &proc).ok());
  g1.post(to("g9.tcp://127.0.0.1:4000"), ret);
  EXPECT_TRUE(proc.got.empty());
  ASSERT_EQ(ret.returned.size(), 1u);
  EXPECT_EQ(ret.returned[0]->root_failure()->transport, runtime::TransportReason::kNoRoute);
}

TEST(Gateway, R_GW_1_PeeledHopWithoutTheProcAttachedIsNoRoute) {
  RecordingSender forwarder;
  RecordingReturn ret;
  Gateway g1(label("g1"), loc("tcp://127.0.0.1:4000"), &forwarder);
  g1.post(to("g1.tcp://127.0.0.1:4000"), ret);
  EXPECT_TRUE(forwarder.got.empty());  // a peeled hop is never forwarded on
  ASSERT_EQ(ret.returned.size(), 1u);
  EXPECT_EQ(ret.returned[0]->root_failure()->transport, runtime::TransportReason::kNoRoute);
}

TEST(Gateway, R_GW_1_NoViaUnknownProcGoesToTheForwarderOrNoRoute) {
  RecordingSender forwarder;
  RecordingReturn ret;
  Gateway g1(label("g1"), loc("tcp://127.0.0.1:4000"));
  g1.post(to("tcp://127.0.0.1:7000"), ret);
  ASSERT_EQ(ret.returned.size(), 1u);
  g1.set_forwarder(&forwarder);
  g1.post(to("tcp://127.0.0.1:7000"), ret);
  EXPECT_EQ(forwarder.got.size(), 1u);
}

TEST(Gateway, R_GW_1_NoViaAttachedProcIsDelivered) {
  RecordingSender proc, forwarder;
  RecordingReturn ret;
  Gateway g1(label("g1"), loc("tcp://127.0.0.1:4000"), &forwarder);
  ASSERT_TRUE(g1.attach(kP, &proc).ok());
  g1.post(to("tcp://127.0.0.1:7000"), ret);
  EXPECT_EQ(proc.got.size(), 1u);
  EXPECT_TRUE(forwarder.got.empty());
}

TEST(Gateway, AdvertisesAttachedProcsBehindItself) {
  Gateway g1(label("g1"), loc("ipc:///tmp/g1.sock"));
  EXPECT_EQ(g1.advertise(kP).to_string(), "p@g1.ipc:///tmp/g1.sock");
}

TEST(Gateway, R_GW_1_AdvertisedAddressBehindTwoGatewaysRoutesFromTheEntry) {
  // g2 is reached through g1 (its location is g1's); procs behind g2 are advertised in path
  // order, and an envelope entering at g1 with that location reaches the proc.
  RecordingSender proc;
  RecordingReturn ret;
  Gateway g1(label("g1"), loc("tcp://127.0.0.1:4000"));
  Gateway g2(label("g2"), loc("g1.tcp://127.0.0.1:4000"));
  ASSERT_TRUE(g1.add_peer(label("g2"), &g2).ok());
  ASSERT_TRUE(g2.attach(kP, &proc).ok());
  runtime::ProcAddr advertised = g2.advertise(kP);
  EXPECT_EQ(advertised.to_string(), "p@g1.g2.tcp://127.0.0.1:4000");
  g1.post(to(advertised.location.to_string().c_str()), ret);
  EXPECT_EQ(proc.got.size(), 1u);
  EXPECT_TRUE(ret.returned.empty());
}

TEST(Gateway, R_ENV_3_ExpiresWhenTheTtlRunsOutBetweenGateways) {
  RecordingSender proc;
  RecordingReturn ret;
  Gateway g1(label("g1"), loc("tcp://127.0.0.1:4000"));
  Gateway g2(label("g2"), loc("tcp://127.0.0.1:5000"));
  ASSERT_TRUE(g1.add_peer(label("g2"), &g2).ok());
  ASSERT_TRUE(g2.attach(kP, &proc).ok());
  auto env = to("g1.g2.tcp://127.0.0.1:5000");
  env->set_ttl(1);  // enough for g1's post, not for g2's
  g1.post(std::move(env), ret);
  EXPECT_TRUE(proc.got.empty());
  ASSERT_EQ(ret.returned.size(), 1u);
  EXPECT_EQ(ret.returned[0]->root_failure()->kind, runtime::FailureKind::kExpired);
}

// A second attach of an id (or a second peer of a name) never takes over the first's traffic.
TEST(Gateway, ASecondAttachOrPeerOfTheSameIdIsRefusedAndTheFirstKeepsItsTraffic) {
  RecordingSender first, second;
  Gateway g1(label("g1"), loc("tcp://127.0.0.1:4000"));
  ASSERT_TRUE(g1.attach(kP, &first).ok());
  absl::Status again = g1.attach(kP, &second);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_NE(again.message().find("detach it first"), absl::string_view::npos) << again;
  ASSERT_TRUE(g1.add_peer(label("g2"), &first).ok());
  EXPECT_EQ(g1.add_peer(label("g2"), &second).code(), absl::StatusCode::kAlreadyExists);

  RecordingReturn ret;
  g1.post(to("g1.tcp://127.0.0.1:4000"), ret);
  EXPECT_EQ(first.got.size(), 1u);
  EXPECT_TRUE(second.got.empty());
  EXPECT_TRUE(g1.detach(kP));
  EXPECT_TRUE(g1.attach(kP, &second).ok()) << "after a detach the id may attach again";
}

}  // namespace
}  // namespace postal::routing
