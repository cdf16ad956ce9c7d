// FlatPrefixTable: the same longest-prefix contract as PrefixTable (R-ROUTE-2) — the shared
// behaviour is a typed test over both tables — and agreement with PrefixTable on random tables
// up to 1 M routes, including the probe runs that removals shift back.
#include "postal/routing/flat_prefix_table.h"

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "postal/routing/prefix_table.h"

namespace postal::routing {
namespace {

using runtime::ActorId;
using runtime::Label;
using runtime::Port;
using runtime::PortId;
using runtime::ProcId;
using runtime::Uid;

Uid named(const char* s) { return Uid::singleton(*Label::parse(s)); }

template <class Table>
class PrefixTables : public ::testing::Test {};
using Tables = ::testing::Types<PrefixTable<int>, FlatPrefixTable<int>>;
TYPED_TEST_SUITE(PrefixTables, Tables);

TYPED_TEST(PrefixTables, R_ROUTE_2_LongestPrefixPortOverActorOverProc) {
  TypeParam table;
  const ActorId a{ProcId{named("p")}, named("a")};
  const PortId routed{a, Port::ephemeral(3)};
  table.add(a.proc, 1);
  table.add(a, 2);
  table.add(routed, 3);
  ASSERT_NE(table.lookup(routed), nullptr);
  EXPECT_EQ(*table.lookup(routed), 3);
  EXPECT_EQ(*table.lookup(PortId{a, Port::ephemeral(4)}), 2);  // other port
  EXPECT_EQ(*table.lookup(PortId{ActorId{a.proc, named("b")}, Port::ephemeral(3)}), 1);  // actor
  EXPECT_EQ(table.lookup(PortId{ActorId{ProcId{named("q")}, named("a")}, Port::ephemeral(3)}),
            nullptr);  // other proc
  EXPECT_EQ(table.size(), 3u);
}

TYPED_TEST(PrefixTables, R_ROUTE_2_RemoveFallsBackToTheShorterPrefix) {
  TypeParam table;
  const PortId id{ActorId{ProcId{named("p")}, named("a")}, Port::handler(0xff)};
  table.add(id.actor.proc, 1);
  table.add(id.actor, 2);
  table.add(id, 3);
  EXPECT_TRUE(table.remove(id));
  EXPECT_FALSE(table.remove(id));
  EXPECT_EQ(*table.lookup(id), 2);
  EXPECT_TRUE(table.remove(id.actor));
  EXPECT_EQ(*table.lookup(id), 1);
  EXPECT_TRUE(table.remove(id.actor.proc));
  EXPECT_EQ(table.lookup(id), nullptr);
  EXPECT_EQ(table.size(), 0u);
}

TYPED_TEST(PrefixTables, AddReplacesTheValue) {
  TypeParam table;
  const ProcId p{named("p")};
  table.add(p, 1);
  table.add(p, 2);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(*table.lookup(PortId{ActorId{p, named("a")}, Port()}), 2);
}

// uid.h: instances compare by number (the label is display-only), singletons by label, and a
// singleton never equals an instance; ports compare by kind and value.
TYPED_TEST(PrefixTables, R_ADDR_2_KeysFollowUidAndPortEquality) {
  TypeParam table;
  table.add(ProcId{Uid::instance(7, *Label::parse("worker"))}, 1);
  table.add(ProcId{named("host")}, 2);
  const ActorId a{ProcId{Uid::instance(9)}, named("a")};
  table.add(PortId{a, Port::handler(5)}, 3);
  table.add(PortId{a, Port::ephemeral(5)}, 4);

  auto in = [](ProcId p) { return PortId{ActorId{p, named("a")}, Port()}; };
  EXPECT_EQ(*table.lookup(in(ProcId{Uid::instance(7)})), 1);
  EXPECT_EQ(*table.lookup(in(ProcId{Uid::instance(7, *Label::parse("other"))})), 1);
  EXPECT_EQ(*table.lookup(in(ProcId{named("host")})), 2);
  EXPECT_EQ(table.lookup(in(ProcId{named("worker")})), nullptr);  // singleton ≠ instance 7
  EXPECT_EQ(*table.lookup(PortId{a, Port::handler(5)}), 3);
  EXPECT_EQ(*table.lookup(PortId{a, Port::ephemeral(5)}), 4);
  EXPECT_EQ(table.lookup(PortId{a, Port::control(5)}), nullptr);
}

TEST(FlatPrefixTable, HoldsValuesThatOwnMemory) {
  FlatPrefixTable<std::string> table;
  for (uint64_t i = 0; i < 1000; ++i) {
    table.add(ProcId{Uid::instance(i)}, std::string(100, static_cast<char>('a' + i % 26)));
  }
  for (uint64_t i = 0; i < 1000; i += 2) EXPECT_TRUE(table.remove(ProcId{Uid::instance(i)}));
  FlatPrefixTable<std::string> moved = std::move(table);
  EXPECT_EQ(moved.size(), 500u);
  const std::string* v = moved.lookup(PortId{ActorId{ProcId{Uid::instance(7)}, Uid()}, Port()});
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(*v, std::string(100, 'h'));
}

// Random prefixes over few procs and actors, so levels nest and probe runs are long; the flat
// table must answer every lookup as PrefixTable does.
struct RandomIds {
  explicit RandomIds(uint64_t seed, size_t procs, size_t actors_per_proc, size_t ports_per_actor)
      : rng(seed), procs(procs), actors(actors_per_proc), ports(ports_per_actor) {}
  PortId port() {
    // A third of the procs are singletons, so label words mix with numbers.
    const uint64_t p = rng() % procs;
    Uid proc = Uid::instance(p);
    if (p % 3 == 0) proc = Uid::singleton(*Label::parse(absl::StrCat("p", p)));
    return PortId{ActorId{ProcId{proc}, Uid::instance(rng() % actors)},
                  rng() % 2 ? Port::handler(rng() % ports) : Port::ephemeral(rng() % ports)};
  }
  RoutePrefix prefix() {
    const PortId id = port();
    switch (rng() % 3) {
      case 0:
        return id.actor.proc;
      case 1:
        return id.actor;
      default:
        return id;
    }
  }
  std::mt19937_64 rng;
  size_t procs, actors, ports;
};

template <class A, class B>
void expect_same(const A& reference, const B& flat, RandomIds& ids, int queries) {
  ASSERT_EQ(reference.size(), flat.size());
  for (int q = 0; q < queries; ++q) {
    const PortId id = ids.port();
    const auto* want = reference.lookup(id);
    const auto* got = flat.lookup(id);
    ASSERT_EQ(want == nullptr, got == nullptr) << id;
    if (want != nullptr) {
      ASSERT_EQ(*want, *got) << id;
    }
  }
}

TEST(FlatPrefixTable, R_ROUTE_2_AgreesWithPrefixTableThroughAddsAndRemoves) {
  RandomIds ids(1, 40, 8, 8);
  PrefixTable<int> reference;
  FlatPrefixTable<int> flat;
  for (int step = 0; step < 20000; ++step) {
    const RoutePrefix p = ids.prefix();
    if (ids.rng() % 3 == 0) {
      ASSERT_EQ(reference.remove(p), flat.remove(p));
    } else {
      reference.add(p, step);
      flat.add(p, step);
    }
    if (step % 500 == 0) expect_same(reference, flat, ids, 200);
  }
  expect_same(reference, flat, ids, 5000);
}

TEST(FlatPrefixTable, R_ROUTE_2_AgreesWithPrefixTableAtOneMillionRoutes) {
  RandomIds ids(2, 600'000, 4, 4);
  PrefixTable<int> reference;
  FlatPrefixTable<int> flat;
  int value = 0;
  while (reference.size() < 1'000'000) {
    const RoutePrefix p = ids.prefix();
    reference.add(p, value);
    flat.add(p, value);
    ++value;
  }
  expect_same(reference, flat, ids, 300'000);
  for (int i = 0; i < 200'000; ++i) {
    const RoutePrefix p = ids.prefix();
    ASSERT_EQ(reference.remove(p), flat.remove(p));
  }
  expect_same(reference, flat, ids, 300'000);
}

}  // namespace
}  // namespace postal::routing
