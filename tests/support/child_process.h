// child_process: a test helper binary run as a real child process, its stdout and stderr in a log
// file read line by line — for the store tests that need a second process on one file (mail
// store admission and crash tests, the inbox's concurrent accepts and kill -9 tests).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/wait_for.h"

namespace postal::test_support {

// `program ARGS` with stdout and stderr to `log`; SIGKILLed when destroyed.
class ChildProcess {
 public:
  ChildProcess(const std::string& program, const std::vector<std::string>& args,
               const std::filesystem::path& log) {
    std::vector<std::string> all{program};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~ChildProcess() { kill(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // SIGKILL (kill -9), then reap.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Sends `sig` (SIGSTOP, SIGCONT, …) while it runs.
  void signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // Its exit status, or -1 when it did not exit within `deadline` (then it is killed).
  int wait_exit(std::chrono::milliseconds deadline) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > until) return kill(), -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
};

// The complete lines of `log` (a line still being written is left out).
inline std::vector<std::string> log_lines(const std::filesystem::path& log) {
  std::ifstream in(log);
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

inline size_t count_prefix(const std::vector<std::string>& lines, const std::string& prefix) {
  size_t n = 0;
  for (const std::string& l : lines) n += l.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

// Waits (with a deadline) until `log` has `n` complete lines starting with `prefix`.
inline bool wait_log_lines(const std::filesystem::path& log, const std::string& prefix, size_t n,
                           absl::Duration deadline = absl::Seconds(60)) {
  return wait_for([&] { return count_prefix(log_lines(log), prefix) >= n; }, deadline);
}

}  // namespace postal::test_support
