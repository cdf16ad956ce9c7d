// `postal soak` in its CI form: 20 s of kill -9, SIGTERM, SIGSTOP (shorter and longer than a 1 s
// delivery timeout) and restarts of three procs — one behind a gateway, one over tcp — under
// load, with a fixed seed; every payload ends delivered, returned, possibly delivered or lost
// with its proc, none duplicated, none uncounted (the tool exits 0 only then). `make soak` runs
// the long one.
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/postal_process.h"

namespace postal::test_support {
namespace {

class Soak : public ScratchDirTest {
 protected:
  // The CI topology: one proc on its own ipc socket, one behind the host's gateway, one on tcp.
  std::filesystem::path topology(const std::string& name) {
    const auto file = dir_ / "soak.toml";
    std::ofstream(file) << "[topology]\nname = \"" << name << "\"\ndelivery_timeout = \"1s\"\n"
                        << "[[gateway]]\nname = \"edge\"\nlisten = \"ipc://@" << name << "-edge\"\n"
                        << "[[proc]]\nname = \"alpha\"\nlisten = \"ipc://@" << name << "-alpha\"\n"
                        << "workers = 1\n"
                        << "[[proc]]\nname = \"beta\"\nlisten = \"ipc://@" << name << "-beta\"\n"
                        << "gateway = \"edge\"\nworkers = 1\n"
                        << "[[proc]]\nname = \"gamma\"\nlisten = \"tcp://127.0.0.1:0\"\n"
                        << "workers = 1\n";
    return file;
  }
};

// Whether a process whose command line mentions `text` is still there (a proc of the topology).
bool any_process_mentions(const std::string& text) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = slurp(e.path() / "cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(text) == std::string::npos) continue;
    const std::string stat = slurp(e.path() / "stat");
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') continue;
    return true;
  }
  return false;
}

TEST_F(Soak, R_CHAN_2_UnderKillStopAndRestartEveryPayloadIsAccountedFor) {
  const std::string name = "soak-" + std::to_string(::getpid());
  const auto file = topology(name);
  Outcome o = run_postal({"soak", file.string(), "--seconds", "20", "--seed", "1", "--rate", "1000"},
                         dir_ / "soak.txt", std::chrono::seconds(100));
  EXPECT_EQ(o.exit_status, 0) << o.output;
  EXPECT_NE(o.output.find("soak: PASS"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("ledger balanced: yes"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("kill -9 "), std::string::npos) << "no kill -9 happened: " << o.output;
  EXPECT_NE(o.output.find("longer than the delivery timeout"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("restarted "), std::string::npos) << o.output;
  // Print the ledger in the test log, for whoever reads a CI run.
  const size_t at = o.output.find("chaos events:");
  if (at != std::string::npos) std::printf("%s", o.output.substr(at).c_str());
}

// Ctrl-C ends the chaos early: the soak still resumes every proc, drains, prints a balanced
// ledger and tears down — no proc is left behind, stopped or not.
TEST_F(Soak, ACtrlCEndsTheChaosEarlyAndStillAccountsForEveryPayload) {
  const std::string name = "soakint-" + std::to_string(::getpid());
  BackgroundPostal soak({"soak", topology(name).string(), "--seconds", "600", "--seed", "2"},
                        dir_ / "soak.txt");
  ASSERT_TRUE(soak.wait_for_output("SIGSTOP ", std::chrono::seconds(30))) << soak.output();
  ASSERT_EQ(::kill(soak.pid(), SIGINT), 0);
  EXPECT_EQ(soak.wait_exit(std::chrono::seconds(30)), 0) << soak.output();
  const std::string out = soak.output();
  EXPECT_NE(out.find("signal 2: ending the chaos early"), std::string::npos) << out;
  EXPECT_NE(out.find("ledger balanced: yes"), std::string::npos) << out;
  EXPECT_FALSE(any_process_mentions(name)) << "a proc outlived the soak";
}

}  // namespace
}  // namespace postal::test_support
