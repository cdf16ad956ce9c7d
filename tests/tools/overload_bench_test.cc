// The overload demonstration (benchmarks/overload/overload_bench.cc) run for 2 s with a small
// bound, as a test, not a measurement: two real procs over ipc, a producer at full speed into a
// 1 ms consumer. It asserts what R-FLOW-1 and R-FLOW-2 promise: the bytes queued for the
// consumer never exceed its bound, Overloaded returns happen, every envelope is handled or
// returned (none unaccounted), and the second actor behind the same connection answers every
// ping.
#include <chrono>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "support/postal_process.h"
#include "support/scratch_dir.h"

namespace postal::test_support {
namespace {

// The summary line's key=value pairs.
std::map<std::string, long long> summary_of(const std::string& output) {
  std::map<std::string, long long> out;
  const size_t at = output.find("summary ");
  if (at == std::string::npos) return out;
  std::istringstream line(output.substr(at + 8, output.find('\n', at) - at - 8));
  std::string pair;
  while (line >> pair) {
    const size_t eq = pair.find('=');
    if (eq != std::string::npos) out[pair.substr(0, eq)] = std::stoll(pair.substr(eq + 1));
  }
  return out;
}

class OverloadBench : public ScratchDirTest {};

TEST_F(OverloadBench, R_FLOW_2_AFloodedSlowConsumerStaysBoundedAndEveryEnvelopeIsAccounted) {
  constexpr long long kBound = 32 << 10;
  const auto log = dir_ / "overload.txt";
  const pid_t pid = spawn_logged(
      OVERLOAD_BENCH,
      {"--seconds", "2", "--bound-bytes", std::to_string(kBound), "--per-destination", "256"}, log);
  int status = 0;
  const bool exited =
      wait_for([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, std::chrono::seconds(90));
  if (!exited) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  const std::string output = slurp(log);
  ASSERT_TRUE(exited) << output;
  std::map<std::string, long long> s = summary_of(output);
  ASSERT_FALSE(s.empty()) << output;
  EXPECT_GT(s["handled"], 0) << output;
  EXPECT_GT(s["overloaded"], 0) << output;             // the bound was met
  EXPECT_LE(s["max_queued_bytes"], kBound) << output;  // and never passed
  EXPECT_GT(s["max_queued_bytes"], 0) << output;
  EXPECT_EQ(s["unaccounted"], 0) << output;  // handled + returned == sent
  // handled, returned, or — a return the consumer's full channel could not take — dropped and
  // counted by the consumer's proc (R-FAIL-4).
  EXPECT_EQ(s["sent"], s["handled"] + s["returned"] + s["dropped_at_consumer"]) << output;
  EXPECT_GT(s["pings"], 0) << output;
  EXPECT_EQ(s["pings"], s["pongs"]) << output;  // the other actor kept answering
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
}

}  // namespace
}  // namespace postal::test_support
