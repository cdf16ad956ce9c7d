#include "proc_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <utility>

#include "ready_protocol.h"

extern char** environ;

namespace postal::routing::internal {
namespace {

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// Moves `fd` above the fds a child gets (kChildReadyFd, kChildSecretFd), so that one dup2 of
// the spawn never overwrites the source of the other. Keeps `fd` when it cannot.
int above_child_fds(int fd) {
  if (fd > kChildSecretFd) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, kChildSecretFd + 1);
  if (moved < 0) return fd;
  ::close(fd);
  return moved;
}

}  // namespace

ProcSupervisor::Child::Child(Child&& other) noexcept
    : pid_(other.pid_), ready_fd_(std::exchange(other.ready_fd_, -1)) {}

ProcSupervisor::Child::~Child() {
  if (ready_fd_ >= 0) ::close(ready_fd_);
}

ProcSupervisor::ProcSupervisor(absl::Duration teardown_grace) : teardown_grace_(teardown_grace) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  reaper_ = std::thread([this] { reap_loop(); });
}

ProcSupervisor::~ProcSupervisor() {
  stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

absl::StatusOr<ProcSupervisor::Child> ProcSupervisor::spawn(std::string name,
                                                            std::vector<std::string> args,
                                                            std::string_view secret) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  // R-SEC-1: the secret travels in a pipe of its own, written in full before the spawn (32
  // bytes: far below the pipe's buffer, so the write cannot block).
  int secret_fds[2] = {-1, -1};
  if (!secret.empty()) {
    if (::pipe2(secret_fds, O_CLOEXEC) != 0) {
      ::close(pipe_fds[0]);
      ::close(pipe_fds[1]);
      return absl::InternalError("pipe2 failed");
    }
    const bool written =
        ::write(secret_fds[1], secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
    ::close(secret_fds[1]);
    if (!written) {
      for (int fd : {pipe_fds[0], pipe_fds[1], secret_fds[0]}) ::close(fd);
      return absl::InternalError("cannot write the topology secret into its pipe");
    }
  }
  pipe_fds[1] = above_child_fds(pipe_fds[1]);
  if (secret_fds[0] >= 0) secret_fds[0] = above_child_fds(secret_fds[0]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], kChildReadyFd);
  if (secret_fds[0] >= 0) posix_spawn_file_actions_adddup2(&actions, secret_fds[0], kChildSecretFd);
  // R-SEC-3: a child inherits stdin/out/err, the ready fd and (R-SEC-1) the secret fd, nothing
  // else — not the host's listening sockets or channels, even one opened by another thread
  // without CLOEXEC yet.
  posix_spawn_file_actions_addclosefrom_np(
      &actions, (secret_fds[0] >= 0 ? kChildSecretFd : kChildReadyFd) + 1);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Children get their own process group: a Ctrl-C at the terminal reaches the host alone, which
  // then tears them down in order (and PR_SET_PDEATHSIG covers a host that dies).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Nor does a child inherit the host's signal mask (`postal up` blocks SIGINT and SIGTERM for
  // its sigwait thread): a proc stuck before it serves must still die of the host's SIGTERM.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (secret_fds[0] >= 0) ::close(secret_fds[0]);
  Child child(pid, pipe_fds[0]);
  if (rc != 0) return absl::UnavailableError(std::strerror(rc));
  {
    absl::MutexLock lock(&mu_);
    children_.push_back(Tracked{pid, pidfd_open(pid), std::move(name)});
  }
  wake();
  return child;
}

std::optional<ProcExit> ProcSupervisor::next_exit(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !exits_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) return std::nullopt;
  ProcExit e = exits_.front();
  exits_.pop_front();
  return e;
}

bool ProcSupervisor::running(pid_t pid) const {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  absl::MutexLock lock(&mu_);
  bool reaped = false;
  for (const auto& e : exits_) reaped |= e.pid == pid;
  return tracked(pid) && !reaped;
}

void ProcSupervisor::terminate(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) ::kill(pid, SIGTERM);
  const auto grace = absl::ToChronoNanoseconds(teardown_grace_);
  auto deadline = std::chrono::steady_clock::now() + grace;
  for (pid_t pid : pids) {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        if (!tracked(pid)) break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        deadline += grace;
      }
      absl::SleepFor(absl::Milliseconds(5));  // the reaper reaps; we wait for it
    }
  }
}

void ProcSupervisor::stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  wake();
  if (reaper_.joinable()) reaper_.join();
}

void ProcSupervisor::reap_loop() {
  for (;;) {
    std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}};
    std::vector<pid_t> pids;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ && children_.empty()) return;
      for (const Tracked& c : children_) {
        fds.push_back({c.pidfd, POLLIN, 0});
        pids.push_back(c.pid);
      }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
    if (fds[0].revents & POLLIN) {
      uint64_t n;
      (void)!::read(wake_fd_, &n, sizeof n);
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
      int status = 0;
      if (::waitpid(pids[i - 1], &status, WNOHANG) != pids[i - 1]) continue;
      absl::MutexLock lock(&mu_);
      auto it = std::find_if(children_.begin(), children_.end(),
                             [&](const Tracked& c) { return c.pid == pids[i - 1]; });
      if (it == children_.end()) continue;
      exits_.push_back(ProcExit{std::move(it->name), it->pid, status});
      ::close(it->pidfd);
      children_.erase(it);
    }
  }
}

void ProcSupervisor::wake() {
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

bool ProcSupervisor::tracked(pid_t pid) const {
  for (const Tracked& c : children_) {
    if (c.pid == pid) return true;
  }
  return false;
}

}  // namespace postal::routing::internal
