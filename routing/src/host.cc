#include "postal/routing/host.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "local_nats.h"
#include "postal/routing/channel_key.h"
#include "postal/routing/nats_users.h"
#include "postal/routing/workload.h"
#include "postal/wire/absl_compat.h"
#include "proc_supervisor.h"
#include "ready_protocol.h"

namespace postal::routing {
namespace {

runtime::Uid named(std::string_view name) {
  return runtime::Uid::singleton(*runtime::Label::parse(name));
}

actors::SpawnParams to_params(const std::map<std::string, ActorParam, std::less<>>& params) {
  actors::SpawnParams out;
  for (const auto& entry : params) {
    std::visit([&](const auto& v) { out.set_value(entry.first, wire::HeaderValue(v)); },
               entry.second);
  }
  return out;
}

}  // namespace

// R-SEC-1: one secret for the topology; its key authenticates the gateways' and the entry's
// channels here, and the secret goes to every launched proc (launch).
absl::Status Host::make_key() {
  if (!options_.authenticate) {
    options_.channel.key = nullptr;
    return absl::OkStatus();
  }
  if (options_.secret.empty()) {
    absl::StatusOr<std::string> secret = ChannelKey::random_secret();
    if (!secret.ok()) return secret.status();
    options_.secret = *std::move(secret);
  }
  absl::StatusOr<std::shared_ptr<const ChannelKey>> key = ChannelKey::derive(options_.secret);
  if (!key.ok()) return key.status();
  options_.channel.key = *std::move(key);
  return absl::OkStatus();
}

Host::Host(TopologySpec spec, HostOptions options)
    : spec_(std::move(spec)), options_(std::move(options)) {
  if (spec_.ready_timeout) options_.ready_timeout = *spec_.ready_timeout;
  if (spec_.delivery_timeout) options_.channel.delivery_timeout = *spec_.delivery_timeout;
  if (spec_.nats_tls.enabled()) options_.channel.nats_tls = spec_.nats_tls;
  if (spec_.tls) options_.channel.tls = *spec_.tls;  // R-SEC-1
}

absl::StatusOr<std::unique_ptr<Host>> Host::up(const TopologySpec& spec, HostOptions options) {
  register_workload_actors();
  std::unique_ptr<Host> host(new Host(spec, std::move(options)));
  if (absl::Status k = host->make_key(); !k.ok()) return k;
  host->supervisor_ = std::make_unique<internal::ProcSupervisor>(host->options_.teardown_grace);
  absl::Status s = host->start_nats();
  if (s.ok()) s = host->start_gateways();
  if (s.ok()) {
    auto client = runtime::Client::attach(host->entry_->proc(), "host");
    if (client.ok()) {
      host->client_ = *std::move(client);
    } else {
      s = client.status();
    }
  }
  for (const ProcSpec& p : host->spec_.procs) {
    if (s.ok() && host->cancelled()) s = absl::CancelledError("the host was asked to stop");
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

absl::Status Host::start_nats() {
  if (!spec_.start_nats) return absl::OkStatus();
  const std::string& at = *spec_.start_nats;
  const size_t colon = at.rfind(':');
  const std::string log_file = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                            "/postal-", spec_.name, "-nats-server.log");
  // With a topology key, the server takes only the topology's users, each with its own
  // permissions (R-SEC-4): the procs and gateways listening on nats://, and the dial-only user.
  const std::string authorization = options_.channel.key != nullptr
                                        ? nats_authorization(spec_, *options_.channel.key)
                                        : std::string();
  absl::StatusOr<std::unique_ptr<internal::LocalNats>> nats = internal::LocalNats::start(
      at.substr(0, colon), static_cast<uint16_t>(std::stoi(at.substr(colon + 1))), authorization,
      log_file, spec_.ready_timeout.value_or(absl::Seconds(10)));
  if (!nats.ok()) return nats.status();
  nats_ = *std::move(nats);
  log(absl::StrCat("nats-server listening on ", at, " (pid ", nats_->pid(), ", log ", log_file,
                   ")"));
  return absl::OkStatus();
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
        absl::Status s = gateway_nodes_[i]->add_peer(named(peer), gateway_nodes_[j]->listen_addr());
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
  args.insert(args.end(), {"--listen", spec.listen.to_string(), std::string(internal::kReadyFdFlag),
                           std::to_string(internal::kChildReadyFd)});
  // The child checks its parent after PR_SET_PDEATHSIG: a host that died in between is seen.
  args.insert(args.end(), {"--parent-pid", std::to_string(::getpid())});
  const int workers = spec.workers.value_or(options_.proc_workers);
  if (workers > 0) args.insert(args.end(), {"--workers", std::to_string(workers)});
  args.insert(args.end(),
              {"--delivery-timeout-ms",
               std::to_string(absl::ToInt64Milliseconds(options_.channel.delivery_timeout))});
  // R-FLOW-4: the children's heartbeats follow the host's channel options too.
  args.insert(args.end(),
              {"--heartbeat-ms",
               absl::StrCat(absl::ToInt64Milliseconds(options_.channel.heartbeat_interval), ",",
                            absl::ToInt64Milliseconds(options_.channel.heartbeat_timeout))});
  if (const NatsTls& tls = options_.channel.nats_tls; tls.enabled()) {
    args.insert(args.end(), {"--nats-tls-ca", tls.ca_file});
    if (!tls.cert_file.empty()) {
      args.insert(args.end(), {"--nats-tls-cert", tls.cert_file, "--nats-tls-key", tls.key_file});
    }
  }
  // R-SEC-1: the children's tcp channels follow the host's TLS mode.
  if (options_.channel.tls != TlsMode::kAuto) {
    args.insert(args.end(), {"--tls", std::string(to_string(options_.channel.tls))});
  }
  if (const std::optional<std::string>& log = spec.log ? spec.log : spec_.log) {
    args.insert(args.end(), {"--log-level", *log});
  }
  const runtime::ProcId id{named(spec.name)};
  if (gateway != nullptr) {
    args.insert(args.end(), {"--location", gateway->gateway()->advertise(id).location.to_string()});
  }
  if (!options_.secret.empty()) {  // R-SEC-1: the fd, not the secret, is in argv
    args.insert(args.end(),
                {std::string(internal::kSecretFdFlag), std::to_string(internal::kChildSecretFd)});
  }
  args.insert(args.end(), spec.args.begin(), spec.args.end());
  const std::string program = args[0];

  absl::StatusOr<internal::ProcSupervisor::Child> child =
      supervisor_->spawn(spec.name, std::move(args), options_.secret);
  if (child.status().code() == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(
        absl::StrCat("proc ", spec.name, ": cannot start ", program, ": ", child.status().message(),
                     spec.binary ? "; check the proc's binary path" : ""));
  }
  if (!child.ok()) return child.status();
  const pid_t pid = child->pid();
  proc.pid = pid;

  absl::StatusOr<std::string> line = internal::read_ready_line(
      child->ready_fd(), absl::Now() + options_.ready_timeout, options_.cancel_fd);
  if (!line.ok()) {
    return absl::Status(
        line.status().code(),
        absl::StrCat("proc ", spec.name, " (pid ", pid, ") ", line.status().message(),
                     " (ready timeout ", absl::FormatDuration(options_.ready_timeout), ")"));
  }
  absl::StatusOr<internal::ReadyReport> ready = internal::parse_ready_line(*line);
  if (!ready.ok()) {
    return absl::InternalError(
        absl::StrCat("proc ", spec.name, " reported an unreadable ready line: ", *line));
  }
  proc.listen = ready->listen;
  proc.addr = ready->addr;
  if (gateway != nullptr) {
    absl::StatusOr<runtime::ProcAddr> advertised = gateway->attach(id, ready->listen);
    if (!advertised.ok()) return advertised.status();
    proc.addr = *advertised;
  }
  log(absl::StrCat("proc ", spec.name, " (pid ", pid, ") serving ", ready->listen.to_string(),
                   ", reached at ", proc.addr.to_string()));
  return absl::OkStatus();
}

absl::Status Host::spawn_actors() {
  for (const ActorSpec& a : spec_.actors) {
    if (cancelled()) return absl::CancelledError("the host was asked to stop");
    absl::StatusOr<runtime::ActorAddr> addr = spawn(a.proc, a.type, a.name, to_params(a.params));
    if (!addr.ok()) {
      return absl::Status(addr.status().code(),
                          absl::StrCat("actor ", a.proc, "/", a.name, " (", a.type,
                                       "): ", addr.status().message()));
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

std::optional<ProcExit> Host::next_exit(absl::Duration timeout) {
  return supervisor_->next_exit(timeout);
}

absl::Status Host::restart(std::string_view name) {
  for (size_t i = 0; i < procs_.size(); ++i) {
    if (procs_[i].name != name) continue;
    if (supervisor_->running(procs_[i].pid)) {
      return absl::FailedPreconditionError(absl::StrCat("proc ", sv(name), " is still running"));
    }
    ProcSpec spec = spec_.procs[i];
    spec.listen = procs_[i].listen;  // same address as before (a tcp port 0 stays resolved)
    for (size_t g = 0; g < spec_.gateways.size(); ++g) {  // the new incarnation attaches afresh
      if (spec.gateway && spec_.gateways[g].name == *spec.gateway) {
        gateway_nodes_[g]->detach(runtime::ProcId{named(spec.name)});
      }
    }
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
      missing.proc =
          absl::StrCat(label, " ", addr.to_string(), ": no answer (", s.status().message(), ")");
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
  std::vector<pid_t> children;
  for (auto& p : procs_) {
    if (p.pid > 0) children.push_back(p.pid);
    p.pid = -1;
  }
  if (supervisor_ != nullptr) {
    supervisor_->terminate(children);
    supervisor_->stop();
  }
  client_.reset();
  gateway_nodes_.clear();
  plain_entry_.reset();
  entry_ = nullptr;
  nats_.reset();  // last: the channels above ran through it
}

Host::~Host() {
  teardown();
  ChannelKey::wipe(options_.secret);
}

bool Host::cancelled() const {
  if (options_.cancel_fd < 0) return false;
  pollfd p{options_.cancel_fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

void Host::log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

}  // namespace postal::routing
