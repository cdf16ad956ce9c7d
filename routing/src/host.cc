#include "postal/routing/host.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "postal/routing/workload.h"
#include "postal/wire/absl_compat.h"

extern char** environ;

namespace postal::routing {
namespace {

runtime::Uid named(std::string_view name) {
  return runtime::Uid::singleton(*runtime::Label::parse(name));
}

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

actors::SpawnParams to_params(const std::map<std::string, ActorParam, std::less<>>& params) {
  actors::SpawnParams out;
  for (const auto& entry : params) {
    std::visit([&](const auto& v) { out.set_value(entry.first, wire::HeaderValue(v)); },
               entry.second);
  }
  return out;
}

// Reads the child's ready line from `fd` until `deadline`.
absl::StatusOr<std::string> read_ready_line(int fd, absl::Time deadline) {
  std::string line;
  char buf[512];
  for (;;) {
    if (auto nl = line.find('\n'); nl != std::string::npos) return line.substr(0, nl);
    int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return absl::DeadlineExceededError("did not report ready in time");
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(ms));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) continue;
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got == 0) return absl::UnavailableError("exited before it reported ready");
    if (got < 0 && errno != EINTR) return absl::UnavailableError(std::strerror(errno));
    if (got > 0) line.append(buf, static_cast<size_t>(got));
  }
}

}  // namespace

std::string ProcExit::to_string() const {
  std::string how;
  if (WIFEXITED(wait_status)) {
    how = absl::StrCat("exited with status ", WEXITSTATUS(wait_status));
  } else if (WIFSIGNALED(wait_status)) {
    how = absl::StrCat("was killed by signal ", WTERMSIG(wait_status), " (",
                       ::strsignal(WTERMSIG(wait_status)), ")");
  } else {
    how = "ended";
  }
  return absl::StrCat(name, " (pid ", pid, ") ", how);
}

Host::Host(TopologySpec spec, HostOptions options)
    : spec_(std::move(spec)), options_(std::move(options)) {
  if (spec_.ready_timeout) options_.ready_timeout = *spec_.ready_timeout;
}

absl::StatusOr<std::unique_ptr<Host>> Host::up(const TopologySpec& spec, HostOptions options) {
  register_workload_actors();
  std::unique_ptr<Host> host(new Host(spec, std::move(options)));
  host->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  host->reaper_ = std::thread([h = host.get()] { h->reap_loop(); });
  absl::Status s = host->start_gateways();
  if (s.ok()) {
    auto client = runtime::Client::attach(host->entry_->proc(), "host");
    if (client.ok()) {
      host->client_ = *std::move(client);
    } else {
      s = client.status();
    }
  }
  for (const ProcSpec& p : host->spec_.procs) {
    if (!s.ok()) break;
    host->procs_.push_back(LaunchedProc{p.name, -1, {}, p.listen, p.gateway});
    s = host->launch(host->procs_.back(), p);
  }
  if (s.ok()) s = host->spawn_actors();
  if (!s.ok()) {
    host->teardown();
    return s;
  }
  return host;
}

absl::Status Host::start_gateways() {
  for (const GatewaySpec& g : spec_.gateways) {
    NodeOptions o;
    o.id = runtime::ProcId{named(g.name)};
    o.listen = g.listen;
    o.gateway = named(g.name);
    o.scheduler.workers = 1;
    o.channel = options_.channel;
    absl::StatusOr<std::unique_ptr<Node>> node = Node::start(std::move(o));
    if (!node.ok()) {
      return absl::Status(node.status().code(),
                          absl::StrCat("gateway ", g.name, ": ", node.status().message()));
    }
    log(absl::StrCat("gateway ", g.name, " listening on ", (*node)->listen_addr().to_string()));
    gateway_nodes_.push_back(*std::move(node));
  }
  for (size_t i = 0; i < spec_.gateways.size(); ++i) {
    for (const std::string& peer : spec_.gateways[i].peers) {
      for (size_t j = 0; j < spec_.gateways.size(); ++j) {
        if (spec_.gateways[j].name != peer) continue;
        absl::Status s =
            gateway_nodes_[i]->add_peer(named(peer), gateway_nodes_[j]->listen_addr());
        if (!s.ok()) return s;
      }
    }
  }
  if (!gateway_nodes_.empty()) {
    entry_ = gateway_nodes_.front().get();
    return absl::OkStatus();
  }
  NodeOptions o;
  o.id = runtime::ProcId{named("host")};
  o.listen = *runtime::ChannelAddr::ipc_abstract(
      absl::StrCat("postal-", spec_.name, "-host-", ::getpid()));
  o.scheduler.workers = 1;
  o.channel = options_.channel;
  absl::StatusOr<std::unique_ptr<Node>> node = Node::start(std::move(o));
  if (!node.ok()) return node.status();
  plain_entry_ = *std::move(node);
  entry_ = plain_entry_.get();
  return absl::OkStatus();
}

absl::Status Host::launch(LaunchedProc& proc, const ProcSpec& spec) {
  Node* gateway = nullptr;
  for (size_t i = 0; i < spec_.gateways.size(); ++i) {
    if (spec.gateway && spec_.gateways[i].name == *spec.gateway) gateway = gateway_nodes_[i].get();
  }
  std::vector<std::string> args{spec.binary.value_or(options_.postal_binary)};
  if (!spec.binary) args.push_back("proc");
  for (std::string a : {"--name", spec.name.c_str()}) args.push_back(a);
  args.insert(args.end(), {"--listen", spec.listen.to_string(), "--ready-fd", "3"});
  const int workers = spec.workers.value_or(options_.proc_workers);
  if (workers > 0) args.insert(args.end(), {"--workers", std::to_string(workers)});
  args.insert(args.end(), {"--delivery-timeout-ms",
                           std::to_string(absl::ToInt64Milliseconds(
                               options_.channel.delivery_timeout))});
  const runtime::ProcId id{named(spec.name)};
  if (gateway != nullptr) {
    args.insert(args.end(),
                {"--location", gateway->gateway()->advertise(id).location.to_string()});
  }
  args.insert(args.end(), spec.args.begin(), spec.args.end());

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 3);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Children get their own process group: a Ctrl-C at the terminal reaches the host alone, which
  // then tears them down in order (and PR_SET_PDEATHSIG covers a host that dies).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    return absl::UnavailableError(
        absl::StrCat("proc ", spec.name, ": cannot start ", args[0], ": ", std::strerror(rc),
                     spec.binary ? "; check the proc's binary path" : ""));
  }
  proc.pid = pid;
  {
    absl::MutexLock lock(&mu_);
    pidfds_.emplace_back(pid, pidfd_open(pid));
  }
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);

  absl::StatusOr<std::string> line =
      read_ready_line(pipe_fds[0], absl::Now() + options_.ready_timeout);
  ::close(pipe_fds[0]);
  if (!line.ok()) {
    return absl::Status(line.status().code(),
                        absl::StrCat("proc ", spec.name, " (pid ", pid, ") ",
                                     line.status().message(), " (ready timeout ",
                                     absl::FormatDuration(options_.ready_timeout), ")"));
  }
  std::vector<std::string> words = absl::StrSplit(*line, ' ');
  absl::StatusOr<runtime::ProcAddr> addr =
      words.size() == 3 && words[0] == "POSTAL-READY" ? runtime::ProcAddr::parse(words[1])
                                                      : absl::InvalidArgumentError("bad line");
  absl::StatusOr<runtime::ChannelAddr> listen =
      words.size() == 3 ? runtime::ChannelAddr::parse(words[2])
                        : absl::InvalidArgumentError("bad line");
  if (!addr.ok() || !listen.ok()) {
    return absl::InternalError(
        absl::StrCat("proc ", spec.name, " reported an unreadable ready line: ", *line));
  }
  proc.listen = *listen;
  proc.addr = *addr;
  if (gateway != nullptr) {
    absl::StatusOr<runtime::ProcAddr> advertised = gateway->attach(id, *listen);
    if (!advertised.ok()) return advertised.status();
    proc.addr = *advertised;
  }
  log(absl::StrCat("proc ", spec.name, " (pid ", pid, ") serving ", listen->to_string(),
                   ", reached at ", proc.addr.to_string()));
  return absl::OkStatus();
}

absl::Status Host::spawn_actors() {
  for (const ActorSpec& a : spec_.actors) {
    absl::StatusOr<runtime::ActorAddr> addr = spawn(a.proc, a.type, a.name, to_params(a.params));
    if (!addr.ok()) {
      return absl::Status(addr.status().code(), absl::StrCat("actor ", a.proc, "/", a.name, " (",
                                                             a.type, "): ", addr.status().message()));
    }
    actors_.emplace_back(absl::StrCat(a.proc, "/", a.name), *addr);
    log(absl::StrCat("actor ", a.proc, "/", a.name, " (", a.type, ") at ", addr->to_string()));
  }
  return absl::OkStatus();
}

absl::StatusOr<runtime::ActorAddr> Host::spawn(std::string_view proc, std::string type,
                                               std::string name, actors::SpawnParams params) {
  const LaunchedProc* p = find_proc(proc);
  if (p == nullptr) return absl::NotFoundError(absl::StrCat("no proc named ", sv(proc)));
  return actors::spawn_remote(*client_, p->addr, std::move(type), std::move(name),
                              std::move(params), options_.spawn_timeout);
}

const LaunchedProc* Host::find_proc(std::string_view name) const {
  for (const auto& p : procs_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<const Node*> Host::gateways() const {
  std::vector<const Node*> out;
  for (const auto& n : gateway_nodes_) out.push_back(n.get());
  return out;
}

std::optional<runtime::ActorAddr> Host::actor_addr(std::string_view proc,
                                                   std::string_view actor) const {
  std::string key = absl::StrCat(sv(proc), "/", sv(actor));
  for (const auto& [k, addr] : actors_) {
    if (k == key) return addr;
  }
  return std::nullopt;
}

void Host::reap_loop() {
  for (;;) {
    std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}};
    std::vector<pid_t> pids;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ && pidfds_.empty()) return;
      for (const auto& [pid, fd] : pidfds_) {
        fds.push_back({fd, POLLIN, 0});
        pids.push_back(pid);
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
      std::string name;
      for (auto& p : procs_) {
        if (p.pid == pids[i - 1]) name = p.name;
      }
      exits_.push_back(ProcExit{name, pids[i - 1], status});
      std::erase_if(pidfds_, [&](const auto& e) {
        if (e.first != pids[i - 1]) return false;
        ::close(e.second);
        return true;
      });
    }
  }
}

std::optional<ProcExit> Host::next_exit(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !exits_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) return std::nullopt;
  ProcExit e = exits_.front();
  exits_.pop_front();
  return e;
}

absl::Status Host::restart(std::string_view name) {
  for (size_t i = 0; i < procs_.size(); ++i) {
    if (procs_[i].name != name) continue;
    if (procs_[i].pid > 0 && ::kill(procs_[i].pid, 0) == 0) {
      absl::MutexLock lock(&mu_);
      bool reaped = false;
      for (const auto& e : exits_) reaped |= e.pid == procs_[i].pid;
      bool tracked = false;
      for (const auto& [pid, fd] : pidfds_) tracked |= pid == procs_[i].pid;
      if (tracked && !reaped) {
        return absl::FailedPreconditionError(absl::StrCat("proc ", sv(name), " is still running"));
      }
    }
    ProcSpec spec = spec_.procs[i];
    spec.listen = procs_[i].listen;  // same address as before (a tcp port 0 stays resolved)
    return launch(procs_[i], spec);
  }
  return absl::NotFoundError(absl::StrCat("no proc named ", sv(name)));
}

absl::Status Host::kill(std::string_view name, int signal) {
  const LaunchedProc* p = find_proc(name);
  if (p == nullptr || p->pid <= 0) return absl::NotFoundError(absl::StrCat("no proc ", sv(name)));
  if (::kill(p->pid, signal) != 0) return absl::InternalError(std::strerror(errno));
  return absl::OkStatus();
}

std::vector<actors::ProcStatus> Host::status(absl::Duration timeout) {
  std::vector<actors::ProcStatus> out;
  auto ask = [&](const std::string& label, const runtime::ProcAddr& addr) {
    absl::StatusOr<actors::ProcStatus> s = actors::query_status(*client_, addr, timeout);
    if (s.ok()) {
      out.push_back(*std::move(s));
    } else {
      actors::ProcStatus missing;
      missing.proc = absl::StrCat(label, " ", addr.to_string(), ": no answer (",
                                  s.status().message(), ")");
      out.push_back(std::move(missing));
    }
  };
  for (const auto& g : gateway_nodes_) {
    ask("gateway", const_cast<Node&>(*g).proc().addr());
  }
  for (const auto& p : procs_) ask("proc " + p.name, p.addr);
  return out;
}

void Host::teardown() {
  for (auto& p : procs_) {
    if (p.pid > 0) ::kill(p.pid, SIGTERM);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (auto& p : procs_) {
    if (p.pid <= 0) continue;
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        bool tracked = false;
        for (const auto& [pid, fd] : pidfds_) tracked |= pid == p.pid;
        if (!tracked) break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(p.pid, SIGKILL);
        deadline += std::chrono::seconds(3);
      }
      absl::SleepFor(absl::Milliseconds(5));  // the reaper reaps; we wait for it
    }
    p.pid = -1;
  }
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  if (reaper_.joinable()) reaper_.join();
  client_.reset();
  gateway_nodes_.clear();
  plain_entry_.reset();
  entry_ = nullptr;
}

Host::~Host() {
  teardown();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Host::log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

}  // namespace postal::routing
