// `postal soak` in its CI form: 20 s of kill -9, SIGTERM, SIGSTOP (shorter and longer than a 1 s
// delivery timeout) and restarts of three procs — one behind a gateway, one over tcp — under
// load, with a fixed seed; every payload ends delivered, returned, possibly delivered or lost
// with its proc, none duplicated, none uncounted (the tool exits 0 only then). `make soak` runs
// the long one.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "support/postal_process.h"

namespace postal::test_support {
namespace {

class Soak : public ScratchDirTest {};

TEST_F(Soak, R_CHAN_2_UnderKillStopAndRestartEveryPayloadIsAccountedFor) {
  const std::string name = "soak-" + std::to_string(::getpid());
  const auto file = dir_ / "soak.toml";
  std::ofstream(file) << "[topology]\nname = \"" << name << "\"\ndelivery_timeout = \"1s\"\n"
                      << "[[gateway]]\nname = \"edge\"\nlisten = \"ipc://@" << name << "-edge\"\n"
                      << "[[proc]]\nname = \"alpha\"\nlisten = \"ipc://@" << name << "-alpha\"\n"
                      << "workers = 1\n"
                      << "[[proc]]\nname = \"beta\"\nlisten = \"ipc://@" << name << "-beta\"\n"
                      << "gateway = \"edge\"\nworkers = 1\n"
                      << "[[proc]]\nname = \"gamma\"\nlisten = \"tcp://127.0.0.1:0\"\n"
                      << "workers = 1\n";
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

}  // namespace
}  // namespace postal::test_support
