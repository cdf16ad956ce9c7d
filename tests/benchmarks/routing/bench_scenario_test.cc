// `postal bench`'s scenario names: sizes in any whole number of B, KiB, MiB or GiB (large-message
// runs, wire.md §9), with clear errors for the rest.
#include "bench_scenario.h"

#include "gtest/gtest.h"

namespace postal::tools::bench {
namespace {

TEST(BenchScenario, SizesAreAnyWholeNumberOfTheirUnit) {
  absl::StatusOr<Scenario> s = parse_scenario("ipc/hops1/1023MiB/stream");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->size, uint64_t{1023} << 20);
  EXPECT_EQ(s->name(), "ipc/hops1/1023MiB/stream");
  EXPECT_EQ(s->messages, 3u) << "large payloads: a few, not hundreds";
  s = parse_scenario("tcp/hops0/1GiB/ping-pong");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->size, uint64_t{1} << 30);
  EXPECT_EQ(s->name(), "tcp/hops0/1GiB/ping-pong");
  EXPECT_EQ(parse_scenario("ipc/hops0/64B/stream")->messages, 50'000u);
}

TEST(BenchScenario, ABadSizeSaysWhatToWrite) {
  for (const char* bad : {"ipc/hops0/0B/stream", "ipc/hops0/5GiB/stream", "ipc/hops0/1.5MiB/stream",
                          "ipc/hops0/64/stream", "ipc/hops0/MiB/stream"}) {
    absl::StatusOr<Scenario> s = parse_scenario(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("unknown size"), std::string_view::npos) << s.status();
    EXPECT_NE(s.status().message().find("at most 4GiB"), std::string_view::npos) << s.status();
  }
}

}  // namespace
}  // namespace postal::tools::bench
