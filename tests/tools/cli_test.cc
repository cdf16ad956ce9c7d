// The `postal` command follows conventions: --version, exit codes (0 ok, 1 runtime failure,
// 2 usage error) for every subcommand, `status --json` that parses, a dead proc shown as dead,
// and --log-level / POSTAL_LOG reaching the loggers. Runs the real binary as a subprocess.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "nlohmann/json.hpp"
#include "support/postal_process.h"

namespace postal::test_support {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class Cli : public ScratchDirTest {
 protected:
  Outcome run(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    return run_postal(args, dir_ / "out.txt", seconds(30), env);
  }
};

TEST_F(Cli, VersionPrintsTheVersionAndTheWireVersion) {
  for (const char* form : {"--version", "version"}) {
    Outcome o = run({form});
    EXPECT_EQ(o.exit_status, 0) << form << ": " << o.output;
    EXPECT_NE(o.output.find("postal 0."), std::string::npos) << o.output;
    EXPECT_NE(o.output.find("wire version "), std::string::npos) << o.output;
  }
}

TEST_F(Cli, UsageErrorsExitTwo) {
  Outcome unknown = run({"frobnicate"});
  EXPECT_EQ(unknown.exit_status, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("unknown subcommand 'frobnicate'"), std::string::npos)
      << unknown.output;
  EXPECT_EQ(run({}).exit_status, 2) << "no subcommand";
  EXPECT_EQ(run({"status", "--bogus-flag"}).exit_status, 2);
  EXPECT_EQ(run({"up"}).exit_status, 2) << "a missing required argument";
  EXPECT_EQ(run({"bench", "--messages", "many"}).exit_status, 2) << "a value that does not parse";
  EXPECT_EQ(run({"bench", "--scenario", "x", "--suite", "quick"}).exit_status, 2);
  EXPECT_EQ(run({"demo", "--log-level", "loud"}).exit_status, 2);
  EXPECT_EQ(run({"proc", "--name"}).exit_status, 2) << "a flag without its value";
  EXPECT_EQ(run({"proc", "--bogus"}).exit_status, 2);
}

TEST_F(Cli, HelpExitsZeroForTheCommandAndForProc) {
  Outcome top = run({"--help"});
  EXPECT_EQ(top.exit_status, 0) << top.output;
  EXPECT_NE(top.output.find("status"), std::string::npos);
  Outcome proc = run({"proc", "--help"});
  EXPECT_EQ(proc.exit_status, 0) << proc.output;
  EXPECT_NE(proc.output.find("usage: postal proc"), std::string::npos) << proc.output;
}

TEST_F(Cli, RuntimeFailuresExitOne) {
  Outcome status = run({"status", "no-such-topology-" + std::to_string(::getpid())});
  EXPECT_EQ(status.exit_status, 1) << status.output;
  EXPECT_NE(status.output.find("no running topology"), std::string::npos) << status.output;
}

TEST_F(Cli, ATopologyFileThatDoesNotLoadIsAUsageError) {
  Outcome missing = run({"up", (dir_ / "missing.toml").string()});
  EXPECT_EQ(missing.exit_status, 2) << missing.output;
  EXPECT_NE(missing.output.find("missing.toml"), std::string::npos) << missing.output;
  std::ofstream(dir_ / "bad.toml") << "[topology]\nname = \"x\"\n[[proc]]\nnme = \"a\"\n";
  Outcome bad = run({"up", (dir_ / "bad.toml").string()});
  EXPECT_EQ(bad.exit_status, 2) << bad.output;
}

TEST_F(Cli, StatusJsonParsesAndShowsADeadProcAsDead) {
  const std::string name = "cli-status-" + std::to_string(::getpid());
  const fs::path file = dir_ / "t.toml";
  // log: the procs log at debug (the host does not), so their accepted connections show.
  std::ofstream(file) << "[topology]\nname = \"" << name << "\"\non_proc_exit = \"ignore\"\n"
                      << "log = \"debug\"\n"
                      << "[[proc]]\nname = \"alpha\"\nlisten = \"ipc://@" << name << "-alpha\"\n"
                      << "workers = 1\n"
                      << "[[proc]]\nname = \"beta\"\nlisten = \"ipc://@" << name << "-beta\"\n"
                      << "workers = 1\n";
  BackgroundPostal up({"up", file.string()}, dir_ / "up.txt");
  ASSERT_TRUE(up.wait_for_output("is up", seconds(30))) << up.output();

  auto status = [&] {
    Outcome o = run({"status", name, "--json"});
    nlohmann::json j = nlohmann::json::parse(o.output, nullptr, /*allow_exceptions=*/false);
    return std::make_pair(o, j);
  };
  auto [first, j] = status();
  ASSERT_EQ(first.exit_status, 0) << first.output;
  ASSERT_FALSE(j.is_discarded()) << "not JSON:\n" << first.output;
  ASSERT_EQ(j["topologies"].size(), 1u);
  const nlohmann::json& procs = j["topologies"][0]["procs"];
  ASSERT_EQ(procs.size(), 2u) << j.dump(2);
  long beta_pid = 0;
  for (const auto& p : procs) {
    EXPECT_EQ(p["state"], "up") << p.dump();
    EXPECT_TRUE(p["stats"].contains("delivered")) << p.dump();
    EXPECT_TRUE(p["actors"].is_array()) << p.dump();
    if (p["address"].get<std::string>().find("beta") != std::string::npos) beta_pid = p["pid"];
  }
  ASSERT_GT(beta_pid, 0) << j.dump(2);
  EXPECT_NE(up.output().find("debug postal.routing"), std::string::npos)
      << "the topology's log reaches its procs: " << up.output();

  ::kill(static_cast<pid_t>(beta_pid), SIGKILL);
  ASSERT_TRUE(up.wait_for_output("supervision: proc beta", seconds(10))) << up.output();
  auto [after, k] = status();
  EXPECT_EQ(after.exit_status, 1) << "a dead proc is a failure to report: " << after.output;
  ASSERT_FALSE(k.is_discarded()) << after.output;
  for (const auto& p : k["topologies"][0]["procs"]) {
    const bool beta = p["address"].get<std::string>().find("beta") != std::string::npos;
    EXPECT_EQ(p["state"], beta ? "dead" : "up") << p.dump();
    if (beta) {
      EXPECT_NE(p["detail"].get<std::string>().find("signal 9"), std::string::npos) << p;
    }
  }
}

TEST_F(Cli, PostalLogAndLogLevelReachTheLoggers) {
  // An unknown subcommand never gets to log; `proc` with a bad --listen logs an error; at
  // `off` nothing is logged, and the env variable is overridden by the flag.
  Outcome err = run({"proc", "--name", "x", "--listen", "nonsense://"});
  EXPECT_EQ(err.exit_status, 2);
  EXPECT_NE(err.output.find("error postal.routing"), std::string::npos) << err.output;
  Outcome off = run({"proc", "--name", "x", "--listen", "nonsense://", "--log-level", "off"});
  EXPECT_EQ(off.exit_status, 2);
  EXPECT_EQ(off.output.find("postal.routing"), std::string::npos) << off.output;
  Outcome env_off = run({"proc", "--name", "x", "--listen", "nonsense://"}, {"POSTAL_LOG=off"});
  EXPECT_EQ(env_off.output.find("postal.routing"), std::string::npos) << env_off.output;
  Outcome bad_env = run({"proc", "--name", "x", "--listen", "nonsense://"}, {"POSTAL_LOG=loud"});
  EXPECT_NE(bad_env.output.find("POSTAL_LOG ignored"), std::string::npos) << bad_env.output;
}

// A proc killed while the workload runs is seen at once (the host watches its children), not
// after the workload's 30 s delivery timeout, and on_proc_exit = teardown stops everything.
TEST_F(Cli, AProcKilledDuringTheWorkloadIsSeenAtOnce) {
  const std::string name = "cli-work-" + std::to_string(::getpid());
  const fs::path file = dir_ / "t.toml";
  std::ofstream(file) << "[topology]\nname = \"" << name << "\"\n"
                      << "[[proc]]\nname = \"alpha\"\nlisten = \"ipc://@" << name << "-a\"\n"
                      << "workers = 1\n"
                      << "[[proc]]\nname = \"beta\"\nlisten = \"ipc://@" << name << "-b\"\n"
                      << "workers = 1\n"
                      << "[[actor]]\nproc = \"alpha\"\nname = \"pinger\"\ntype = \"postal.Driver\"\n"
                      << "[[actor]]\nproc = \"beta\"\nname = \"ponger\"\ntype = \"postal.Echo\"\n"
                      << "[workload]\npattern = \"ping-pong\"\nfrom = \"alpha/pinger\"\n"
                      << "to = \"beta/ponger\"\nmessages = 1000000000\nsize = 64\n";
  BackgroundPostal up({"up", file.string()}, dir_ / "up.txt");
  ASSERT_TRUE(up.wait_for_output("actor beta/ponger", seconds(30))) << up.output();
  const std::string out = up.output();
  const size_t at = out.find("proc beta (pid ");
  ASSERT_NE(at, std::string::npos) << out;
  const long pid = std::stol(out.substr(at + 15));
  ASSERT_GT(pid, 0);
  // Killed only once pings flow (beta has delivered some): killed before the first one, the
  // drive ends at once on its own (dial failed) and there is no workload to die during.
  const auto flowing_by = std::chrono::steady_clock::now() + seconds(30);
  bool flowing = false;
  while (!flowing && std::chrono::steady_clock::now() < flowing_by) {
    nlohmann::json j = nlohmann::json::parse(run({"status", name, "--json"}).output, nullptr,
                                             /*allow_exceptions=*/false);
    if (j.is_discarded() || j["topologies"].empty()) continue;
    for (const auto& p : j["topologies"][0]["procs"]) {
      if (p["address"].get<std::string>().find("beta") != std::string::npos &&
          p.contains("stats") && p["stats"]["delivered"].get<uint64_t>() > 10) {
        flowing = true;
      }
    }
  }
  ASSERT_TRUE(flowing) << "the workload never got going: " << up.output();
  ::kill(static_cast<pid_t>(pid), SIGKILL);
  EXPECT_TRUE(up.wait_for_output("a proc died during the workload", seconds(10))) << up.output();
  EXPECT_TRUE(up.wait_for_output("on_proc_exit = teardown", seconds(1))) << up.output();
  EXPECT_EQ(up.wait_exit(seconds(20)), 1) << up.output();
  // The driver was stopped and said what it had: the ping in flight is unresolved, not lost.
  EXPECT_NE(up.output().find("accounted: sent "), std::string::npos) << up.output();
  EXPECT_NE(up.output().find("(the drive was stopped"), std::string::npos) << up.output();
}

// R-SEC-3: the state folder is private and a planted link is replaced, never written through.
TEST_F(Cli, R_SEC_3_AStateFileLinkIsReplacedNotFollowed) {
  const std::string name = "cli-link-" + std::to_string(::getpid());
  const fs::path rundir = dir_ / "run";
  fs::create_directories(rundir);
  const std::string xdg = "XDG_RUNTIME_DIR=" + rundir.string();
  const fs::path folder = rundir / ("postal-" + std::to_string(::geteuid()));
  fs::create_directories(folder);
  fs::permissions(folder, fs::perms::owner_all, fs::perm_options::replace);
  const fs::path victim = dir_ / "victim.txt";
  std::ofstream(victim) << "precious";
  fs::create_symlink(victim, folder / (name + ".state"));

  const fs::path file = dir_ / "t.toml";
  std::ofstream(file) << "[topology]\nname = \"" << name << "\"\n[[proc]]\nname = \"a\"\n"
                      << "listen = \"ipc://@" << name << "-a\"\nworkers = 1\n";
  BackgroundPostal up({"up", file.string()}, dir_ / "up.txt", {xdg});
  ASSERT_TRUE(up.wait_for_output("is up", seconds(30))) << up.output();
  EXPECT_EQ(slurp(victim), "precious") << "the state was written through the link";
  EXPECT_FALSE(fs::is_symlink(folder / (name + ".state")));
  EXPECT_EQ(fs::status(folder / (name + ".state")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  Outcome status = run_postal({"status", name}, dir_ / "status.txt", seconds(30), {xdg});
  EXPECT_EQ(status.exit_status, 0) << status.output;
}

// R-SEC-1: `postal up` runs its topology with a secret, recorded in the 0600 state file, and
// `postal status` authenticates with it; the same state without the secret gets no answer (the
// procs refuse a client without it).
TEST_F(Cli, R_SEC_1_PostalStatusJoinsAnAuthenticatedTopologyWithTheStateFilesSecret) {
  const std::string name = "cli-auth-" + std::to_string(::getpid());
  auto private_folder = [&](const std::string& run) {
    const fs::path rundir = dir_ / run;
    const fs::path folder = rundir / ("postal-" + std::to_string(::geteuid()));
    fs::create_directories(folder);
    fs::permissions(folder, fs::perms::owner_all, fs::perm_options::replace);
    return std::make_pair("XDG_RUNTIME_DIR=" + rundir.string(), folder);
  };
  const auto [xdg, folder] = private_folder("run");
  const fs::path file = dir_ / "t.toml";
  std::ofstream(file) << "[topology]\nname = \"" << name << "\"\n[[proc]]\nname = \"a\"\n"
                      << "listen = \"tcp://127.0.0.1:0\"\nworkers = 1\n";
  BackgroundPostal up({"up", file.string()}, dir_ / "up.txt", {xdg});
  ASSERT_TRUE(up.wait_for_output("is up", seconds(30))) << up.output();
  const fs::path state = folder / (name + ".state");
  EXPECT_EQ(fs::status(state).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  const std::string text = slurp(state);
  const size_t at = text.find("secret ");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_EQ(text.find('\n', at) - at, 7u + 64u) << "32 bytes, hex";
  Outcome status = run_postal({"status", name}, dir_ / "status.txt", seconds(30), {xdg});
  EXPECT_EQ(status.exit_status, 0) << status.output;

  const auto [other_xdg, other_folder] = private_folder("other");
  std::ofstream(other_folder / (name + ".state"))
      << text.substr(0, at) << text.substr(text.find('\n', at) + 1);
  fs::permissions(other_folder / (name + ".state"), fs::perms::owner_read | fs::perms::owner_write,
                  fs::perm_options::replace);
  Outcome keyless = run_postal({"status", name}, dir_ / "keyless.txt", seconds(30), {other_xdg});
  EXPECT_EQ(keyless.exit_status, 1) << keyless.output;
  EXPECT_NE(keyless.output.find("unreachable"), std::string::npos) << keyless.output;
}

TEST_F(Cli, R_SEC_3_StateNotOwnedByTheUserIsIgnored) {
  const std::string name = "cli-foreign-" + std::to_string(::getpid());
  const fs::path rundir = dir_ / "run";
  const fs::path folder = rundir / ("postal-" + std::to_string(::geteuid()));
  fs::create_directories(folder);
  fs::permissions(folder, fs::perms::owner_all, fs::perm_options::replace);
  const std::string xdg = "XDG_RUNTIME_DIR=" + rundir.string();
  const fs::path state = folder / (name + ".state");
  std::ofstream(state) << "proc alpha@ipc://@nowhere 1\n";
  if (::chown(state.c_str(), 65534, 65534) != 0) GTEST_SKIP() << "not root: cannot chown";
  Outcome foreign = run({"status", name}, {xdg});
  EXPECT_EQ(foreign.exit_status, 1) << foreign.output;
  EXPECT_NE(foreign.output.find("belongs to uid 65534"), std::string::npos) << foreign.output;

  ASSERT_EQ(::chown(state.c_str(), ::geteuid(), ::getegid()), 0);
  fs::permissions(folder, fs::perms::others_write, fs::perm_options::add);
  Outcome open_folder = run({"status", name}, {xdg});
  EXPECT_EQ(open_folder.exit_status, 1) << open_folder.output;
  EXPECT_NE(open_folder.output.find("ignoring the state folder"), std::string::npos)
      << open_folder.output;
}

}  // namespace
}  // namespace postal::test_support
