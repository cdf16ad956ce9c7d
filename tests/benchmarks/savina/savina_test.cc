// The Savina suite's correctness: every workload runs once with its small parameters on two
// worker threads and its own check passes (a Fibonacci number, a count, a conserved balance, …).
// The timings are not looked at; docs/benchmarks.md has them.
#include <ostream>
#include <string>

#include "gtest/gtest.h"
#include "savina_runner.h"
#include "workload.h"

namespace postal::savina {

// ctest names and failures show the workload, not its bytes.
void PrintTo(const Workload& w, std::ostream* os) { *os << w.name; }

namespace {

class SavinaWorkload : public testing::TestWithParam<Workload> {};

TEST_P(SavinaWorkload, RunsAndItsResultChecks) {
  RunOptions options;
  options.threads = 2;
  options.size = Size::kSmall;
  options.timeout = absl::Seconds(30);
  absl::StatusOr<std::string> check = GetParam().run(options);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_FALSE(check->empty());
}

INSTANTIATE_TEST_SUITE_P(Savina, SavinaWorkload, testing::ValuesIn(workloads()),
                         [](const testing::TestParamInfo<Workload>& info) {
                           std::string name(info.param.name);
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

TEST(SavinaRunner, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({}), 0);
}

TEST(SavinaRunner, FindsEveryWorkloadByName) {
  for (const Workload& w : workloads()) EXPECT_EQ(find_workload(w.name), &w);
  EXPECT_EQ(find_workload("no-such-workload"), nullptr);
}

}  // namespace
}  // namespace postal::savina
