// Running the real `postal` binary from a test: once to completion, or in the background.
//
// Output (stdout and stderr) goes to a log file the test reads; every run has a deadline, and a
// background process is killed (SIGKILL) when its handle goes out of scope, so no test leaves a
// process behind on any exit path. The binary's path is POSTAL_BINARY, set by CMake.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/scratch_dir.h"

namespace postal::test_support {

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts `binary args...` with stdout and stderr to `log`; returns its pid.
inline pid_t spawn_logged(const std::string& binary, const std::vector<std::string>& args,
                          const std::filesystem::path& log,
                          const std::vector<std::string>& env = {}) {
  std::vector<std::string> all{binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: a kill reaches the procs it launched too
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Polls `done` every 20 ms until it holds or `deadline` passes; returns whether it held.
inline bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

struct Outcome {
  int exit_status = -1;  // -1: did not exit in time (killed)
  std::string output;    // stdout and stderr
};

// Runs the postal binary with `args` to completion, output to `log`; kills it after `deadline`.
inline Outcome run_postal(const std::vector<std::string>& args, const std::filesystem::path& log,
                          std::chrono::milliseconds deadline,
                          const std::vector<std::string>& env = {}) {
  const pid_t pid = spawn_logged(POSTAL_BINARY, args, log, env);
  Outcome run;
  int status = 0;
  if (!wait_for([&] { return ::waitpid(pid, &status, WNOHANG) != 0; }, deadline)) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    run.output = slurp(log);
    return run;
  }
  run.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.output = slurp(log);
  return run;
}

// The postal binary running in the background (e.g. `postal up FILE`); SIGTERM then SIGKILL to
// its process group when destroyed.
class BackgroundPostal {
 public:
  BackgroundPostal(const std::vector<std::string>& args, std::filesystem::path log,
                   const std::vector<std::string>& env = {})
      : log_(std::move(log)), pid_(spawn_logged(POSTAL_BINARY, args, log_, env)) {}
  ~BackgroundPostal() { stop(); }
  BackgroundPostal(const BackgroundPostal&) = delete;
  BackgroundPostal& operator=(const BackgroundPostal&) = delete;

  std::string output() const { return slurp(log_); }
  pid_t pid() const { return pid_; }
  // Waits until the output contains `text`.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds deadline) const {
    return wait_for([&] { return output().find(text) != std::string::npos; }, deadline);
  }
  // Waits for the process to exit by itself; its exit status, or -1 after `deadline`.
  int wait_exit(std::chrono::milliseconds deadline) {
    if (pid_ <= 0) return -1;
    int status = 0;
    if (!wait_for([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, deadline)) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    if (!wait_for([&] { return ::waitpid(pid_, &status, WNOHANG) != 0; },
                  std::chrono::seconds(10))) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }

 private:
  std::filesystem::path log_;
  pid_t pid_;
};

}  // namespace postal::test_support
