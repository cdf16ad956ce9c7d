// Router: true longest-prefix match on port ⊒ actor ⊒ proc, fallback, NoRoute (R-ROUTE-1, -2).
#include "postal/routing/router.h"

#include <vector>

#include "gtest/gtest.h"
#include "postal/runtime/proc.h"
#include "support/recording_senders.h"

namespace postal::routing {
namespace {

using runtime::ActorId;
using runtime::EnvelopePtr;
using runtime::Label;
using runtime::PortId;
using runtime::ProcId;
using runtime::Uid;

struct Msg {
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};

}  // namespace
}  // namespace postal::routing

POSTAL_MESSAGE(postal::routing::Msg, "test.routing.Msg");

namespace postal::routing {
namespace {

using test_support::RecordingReturn;
using test_support::RecordingSender;

Uid label(const char* s) { return Uid::singleton(*Label::parse(s)); }

runtime::PortAddr port(const char* proc, const char* actor, uint64_t port_index) {
  ActorId a{ProcId{label(proc)}, label(actor)};
  return runtime::PortAddr{PortId{a, runtime::Port::ephemeral(port_index)}, runtime::Location()};
}

EnvelopePtr envelope_to(runtime::PortAddr dest) {
  return runtime::MessageEnvelope::make(runtime::ActorAddr{}, std::move(dest),
                                        wire::Any::make(Msg{1}));
}

TEST(Router, R_ROUTE_2_LongestPrefixWinsPortOverActorOverProc) {
  RecordingSender by_proc, by_actor, by_port;
  RecordingReturn ret;
  Router router;
  auto dest = port("p", "a", 3);
  router.add(dest.id.actor.proc, &by_proc);
  router.add(dest.id.actor, &by_actor);
  router.add(dest.id, &by_port);

  router.post(envelope_to(dest), ret);
  router.post(envelope_to(port("p", "a", 4)), ret);   // same actor, other port
  router.post(envelope_to(port("p", "b", 3)), ret);   // same proc, other actor
  EXPECT_EQ(by_port.got.size(), 1u);
  EXPECT_EQ(by_actor.got.size(), 1u);
  EXPECT_EQ(by_proc.got.size(), 1u);
  EXPECT_TRUE(ret.returned.empty());
}

TEST(Router, R_ROUTE_2_InsertionOrderDoesNotMatter) {
  RecordingSender by_proc, by_port;
  RecordingReturn ret;
  Router router;
  auto dest = port("p", "a", 3);
  router.add(dest.id, &by_port);  // the more specific route first
  router.add(dest.id.actor.proc, &by_proc);
  router.post(envelope_to(dest), ret);
  EXPECT_EQ(by_port.got.size(), 1u);
  EXPECT_EQ(by_proc.got.size(), 0u);
}

TEST(Router, R_ROUTE_2_NoMatchIsNoRouteOrTheFallback) {
  RecordingSender fallback;
  RecordingReturn ret;
  Router router;
  router.post(envelope_to(port("p", "a", 0)), ret);
  ASSERT_EQ(ret.returned.size(), 1u);
  const auto* root = ret.returned[0]->root_failure();
  EXPECT_EQ(root->kind, runtime::FailureKind::kTransport);
  EXPECT_EQ(root->transport, runtime::TransportReason::kNoRoute);

  router.set_fallback(&fallback);
  router.post(envelope_to(port("p", "a", 0)), ret);
  EXPECT_EQ(fallback.got.size(), 1u);
  EXPECT_EQ(ret.returned.size(), 1u);
}

TEST(Router, R_ROUTE_2_RoutesOnTheNextHopNotTheDestination) {
  RecordingSender to_dest, to_hop;
  RecordingReturn ret;
  Router router;
  auto dest = port("far", "a", 0);
  auto hop = port("near", "relay", 0);
  router.add(dest.id.actor.proc, &to_dest);
  router.add(hop.id.actor.proc, &to_hop);
  auto env = envelope_to(dest);
  env->set_next_hop(hop);
  router.post(std::move(env), ret);
  ASSERT_EQ(to_hop.got.size(), 1u);
  EXPECT_EQ(to_hop.got[0]->dest(), dest);  // R-ENV-1: dest never changes
}

TEST(Router, R_ROUTE_1_RoutersComposeAsMailboxSenders) {
  RecordingSender leaf;
  RecordingReturn ret;
  Router inner, outer;
  auto dest = port("p", "a", 0);
  inner.add(dest.id, &leaf);
  outer.add(dest.id.actor.proc, &inner);
  auto env = envelope_to(dest);
  const uint8_t ttl = env->ttl();
  outer.post(std::move(env), ret);
  ASSERT_EQ(leaf.got.size(), 1u);
  EXPECT_EQ(leaf.got[0]->ttl(), ttl - 3);  // outer, inner and leaf each applied post (R-ENV-3)
}

TEST(Router, RemoveAndReplaceRoutes) {
  RecordingSender a, b;
  RecordingReturn ret;
  Router router;
  auto dest = port("p", "a", 0);
  router.add(dest.id.actor, &a);
  router.add(dest.id.actor, &b);
  router.post(envelope_to(dest), ret);
  EXPECT_EQ(b.got.size(), 1u);
  EXPECT_TRUE(router.remove(dest.id.actor));
  EXPECT_FALSE(router.remove(dest.id.actor));
  router.post(envelope_to(dest), ret);
  EXPECT_EQ(ret.returned.size(), 1u);
  EXPECT_EQ(router.size(), 0u);
}

}  // namespace
}  // namespace postal::routing
