// `postal bench` end to end, as a user runs it: the quick suite with few messages and no peers,
// as a subprocess of the real binary. Checks the plumbing — exit status, the JSON report and its
// scenarios, the HTML report's charts — never the numbers (benchmarks do not run in the test
// suite otherwise).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/postal_process.h"

namespace {

namespace fs = std::filesystem;
using postal::test_support::Outcome;
using postal::test_support::run_postal;
using postal::test_support::slurp;

using BenchSmoke = postal::test_support::ScratchDirTest;

TEST_F(BenchSmoke, QuickSuiteWritesJsonWithEveryScenarioAndHtmlWithCharts) {
  const fs::path json_path = dir_ / "bench.json", html_path = dir_ / "bench.html";
  Outcome run = run_postal({"bench", "--suite", "quick", "--messages", "200", "--no-peers",
                            "--json", json_path.string(), "--html", html_path.string()},
                           dir_ / "log.txt", std::chrono::seconds(100));
  ASSERT_EQ(run.exit_status, 0) << run.output;

  nlohmann::json j = nlohmann::json::parse(slurp(json_path), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << "the JSON report does not parse:\n" << slurp(json_path);
  ASSERT_TRUE(j.contains("scenarios") && j["scenarios"].is_array());
  const nlohmann::json& scenarios = j["scenarios"];
  EXPECT_EQ(scenarios.size(), 6u) << scenarios.dump(2);
  std::set<std::string> transports, patterns;
  for (const auto& s : scenarios) {
    const std::string name = s.value("name", "?");
    EXPECT_GT(s.value("msgs_per_s", 0.0), 0.0) << name;
    EXPECT_GT(s.value("mb_per_s", 0.0), 0.0) << name;
    EXPECT_EQ(s.value("messages", uint64_t{0}), 200u) << name;
    EXPECT_EQ(s.value("failures", uint64_t{1}), 0u) << name;
    EXPECT_EQ(s.value("error", std::string("?")), "") << name;
    ASSERT_TRUE(s.contains("latency_us")) << name;
    EXPECT_GT(s["latency_us"].value("p50", 0.0), 0.0) << name;
    EXPECT_GE(s["latency_us"].value("max", 0.0), s["latency_us"].value("p99", 0.0)) << name;
    transports.insert(s.value("transport", ""));
    patterns.insert(s.value("pattern", ""));
  }
  EXPECT_EQ(transports, (std::set<std::string>{"inproc", "ipc", "tcp"}));
  EXPECT_EQ(patterns, (std::set<std::string>{"stream", "ping-pong", "fan-out", "fan-in"}));
  EXPECT_GT(j["machine"].value("nproc", 0), 0);
  EXPECT_EQ(j["machine"]["load_average_start"].size(), 3u);
  EXPECT_TRUE(j["peers"].empty());  // --no-peers

  const std::string html = slurp(html_path);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("ipc/hops1/1KiB/fan-out"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // self-contained, no scripts
}

// --no-auth runs the rig's topology without channel authentication (R-SEC-1's cost is measured
// as the difference) and says so in both reports.
TEST_F(BenchSmoke, NoAuthRunsTheScenarioUnauthenticatedAndSaysSo) {
  const fs::path json_path = dir_ / "bench.json";
  Outcome run = run_postal({"bench", "--scenario", "ipc/hops1/64B/ping-pong", "--messages", "100",
                            "--no-peers", "--no-auth", "--json", json_path.string()},
                           dir_ / "log.txt", std::chrono::seconds(60));
  ASSERT_EQ(run.exit_status, 0) << run.output;
  EXPECT_NE(run.output.find("channels: unauthenticated (--no-auth)"), std::string::npos)
      << run.output;
  nlohmann::json j = nlohmann::json::parse(slurp(json_path), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["options"].value("authenticated", true), false) << j["options"].dump();
  ASSERT_EQ(j["scenarios"].size(), 1u);
  EXPECT_EQ(j["scenarios"][0].value("failures", uint64_t{1}), 0u);
}

TEST_F(BenchSmoke, AnUnknownScenarioIsRefusedWithTheFormToWrite) {
  Outcome run = run_postal({"bench", "--scenario", "ipc/hops3/64B/stream", "--no-peers"},
                           dir_ / "log.txt", std::chrono::seconds(30));
  EXPECT_EQ(run.exit_status, 2) << run.output;
  EXPECT_NE(run.output.find("hops \"hops3\""), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("e.g. ipc/hops1/64B/stream"), std::string::npos) << run.output;
}

}  // namespace
