#include "bench_rig.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "nats_server.h"
#include "postal/actors/actor_registry.h"
#include "postal/routing/node.h"
#include "postal/routing/workload.h"
#include "postal/wire/absl_compat.h"

namespace postal::tools::bench {
namespace {

runtime::Uid named(std::string_view name) {
  return runtime::Uid::singleton(*runtime::Label::parse(name));
}

std::string actor_name(char prefix, int i) { return absl::StrCat(std::string(1, prefix), i); }

// Every proc and gateway in this process; procs joined by inproc channels (hops 1, 2) or one
// proc for driver and echo (hops 0).
class InprocRig final : public Rig {
 public:
  static absl::StatusOr<std::unique_ptr<Rig>> make(int hops, const RigOptions& options) {
    std::unique_ptr<InprocRig> rig(new InprocRig());
    routing::register_workload_actors();
    runtime::Proc* driver_proc = nullptr;
    runtime::Proc* echo_proc = nullptr;
    if (hops == 0) {
      runtime::ProcOptions o = runtime::ProcOptions::threads(options.workers);
      o.id = runtime::ProcId{named("bench")};
      rig->solo_ = std::make_unique<runtime::Proc>(std::move(o));
      driver_proc = echo_proc = rig->solo_.get();
    } else {
      if (absl::Status s = rig->start_nodes(hops, options); !s.ok()) return s;
      echo_proc = &rig->nodes_[hops]->proc();
      driver_proc = &rig->nodes_[hops + 1]->proc();
    }
    for (int i = 0; i < kFanWidth; ++i) {
      absl::StatusOr<runtime::ActorAddr> d = rig->spawn(*driver_proc, routing::kDriverType, 'd', i);
      if (!d.ok()) return d.status();
      rig->drivers_.push_back(*d);
      absl::StatusOr<runtime::ActorAddr> e = rig->spawn(*echo_proc, routing::kEchoType, 'e', i);
      if (!e.ok()) return e.status();
      if (hops == 2) {  // enter at `outer`, which passes to its peer `inner` (R-GW-1)
        e->location = *runtime::Location::parse(
            absl::StrCat("outer.inner.", rig->nodes_[0]->listen_addr().to_string()));
      }
      rig->echoes_.push_back(*e);
    }
    absl::StatusOr<std::unique_ptr<runtime::Client>> client =
        runtime::Client::attach(*driver_proc, "bench");
    if (!client.ok()) return client.status();
    rig->client_ = *std::move(client);
    return std::unique_ptr<Rig>(std::move(rig));
  }

  ~InprocRig() override {
    client_.reset();
    // Stop the actors while their procs run: a driver holds refs to its own ports, which would
    // keep it (and its mailbox) alive past the procs otherwise.
    for (const auto& a : actors_) a->stop("postal bench: done");
    for (const auto& a : actors_) (void)a->wait(absl::Seconds(5));
    actors_.clear();
    while (!nodes_.empty()) nodes_.pop_back();  // senders first: drivers, echoes, then gateways
    solo_.reset();
  }

  runtime::Client& client() override { return *client_; }
  std::vector<pid_t> pids() const override { return {}; }

 private:
  InprocRig() = default;

  // nodes_: the gateways (`edge` for hops 1; `outer` peered to `inner` for hops 2), then the
  // echoes' proc attached behind the last gateway, then the drivers' proc.
  absl::Status start_nodes(int hops, const RigOptions& options) {
    std::vector<std::string> names =
        hops == 1 ? std::vector<std::string>{"edge"} : std::vector<std::string>{"outer", "inner"};
    for (const std::string& name : names) {
      absl::StatusOr<std::unique_ptr<routing::Node>> g = start_node(name, true, options, {});
      if (!g.ok()) return g.status();
      nodes_.push_back(*std::move(g));
    }
    if (hops == 2) {
      absl::Status s = nodes_[0]->add_peer(named("inner"), nodes_[1]->listen_addr());
      if (!s.ok()) return s;
    }
    routing::Node& last = *nodes_.back();
    const runtime::ProcId echo_id{named("echoes")};
    absl::StatusOr<std::unique_ptr<routing::Node>> echoes =
        start_node("echoes", false, options, last.gateway()->advertise(echo_id).location);
    if (!echoes.ok()) return echoes.status();
    absl::StatusOr<runtime::ProcAddr> attached = last.attach(echo_id, (*echoes)->listen_addr());
    if (!attached.ok()) return attached.status();
    nodes_.push_back(*std::move(echoes));
    absl::StatusOr<std::unique_ptr<routing::Node>> drivers =
        start_node("drivers", false, options, {});
    if (!drivers.ok()) return drivers.status();
    nodes_.push_back(*std::move(drivers));
    return absl::OkStatus();
  }

  static absl::StatusOr<std::unique_ptr<routing::Node>> start_node(
      const std::string& name, bool gateway, const RigOptions& options,
      std::optional<runtime::Location> location) {
    routing::NodeOptions o;
    o.id = runtime::ProcId{named(name)};
    o.listen = runtime::ChannelAddr::inproc(0);
    if (gateway) o.gateway = named(name);
    o.location = std::move(location);
    o.scheduler.workers = gateway ? 1 : options.workers;
    o.system_actors = false;
    absl::StatusOr<std::unique_ptr<routing::Node>> node = routing::Node::start(std::move(o));
    if (!node.ok()) {
      return absl::Status(node.status().code(),
                          absl::StrCat("inproc ", name, ": ", node.status().message()));
    }
    return node;
  }

  absl::StatusOr<runtime::ActorAddr> spawn(runtime::Proc& proc, std::string_view type, char prefix,
                                           int i) {
    absl::StatusOr<std::shared_ptr<actors::ActorControl>> a =
        actors::spawn_by_type(proc, type, actor_name(prefix, i), actors::SpawnParams{});
    if (!a.ok()) return a.status();
    actors_.push_back(*a);
    return (*a)->addr();
  }

  std::unique_ptr<runtime::Proc> solo_;
  std::vector<std::unique_ptr<routing::Node>> nodes_;
  std::vector<std::shared_ptr<actors::ActorControl>> actors_;
  std::unique_ptr<runtime::Client> client_;
};

// `postal proc` children brought up by a Host, gateways in this process.
class HostRig final : public Rig {
 public:
  HostRig(std::unique_ptr<routing::Host> host, std::string dir,
          std::unique_ptr<postal::bench::NatsServer> nats = nullptr)
      : host_(std::move(host)), dir_(std::move(dir)), nats_(std::move(nats)) {}
  ~HostRig() override {
    host_->teardown();
    nats_.reset();  // after the procs: their channels run through it
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  static absl::StatusOr<std::unique_ptr<Rig>> make(Transport transport, int hops,
                                                   const RigOptions& options) {
    const std::string dir = transport == Transport::kIpc
                                ? absl::StrCat("/tmp/postal-bench-", ::getpid(), "-hops", hops)
                                : "";
    if (!dir.empty()) std::filesystem::create_directories(dir);
    // nats: a nats-server of the run's own; every proc and gateway listens on a subject there.
    std::unique_ptr<postal::bench::NatsServer> nats;
    if (transport == Transport::kNats) {
      absl::StatusOr<std::unique_ptr<postal::bench::NatsServer>> server =
          postal::bench::NatsServer::start({.binary = postal::bench::find_nats_server()});
      if (!server.ok()) return server.status();
      nats = *std::move(server);
    }
    auto addr = [&](const std::string& name) {
      switch (transport) {
        case Transport::kIpc:
          return *runtime::ChannelAddr::parse(absl::StrCat("ipc://", dir, "/", name, ".sock"));
        case Transport::kNats:
          return *runtime::ChannelAddr::parse(
              absl::StrCat(nats->url(), "/postal.bench", ::getpid(), "h", hops, ".", name));
        default:
          return *runtime::ChannelAddr::parse("tcp://127.0.0.1:0");
      }
    };
    routing::TopologySpec spec;
    spec.name = absl::StrCat("bench-", sv(to_string(transport)), "-hops", hops);
    std::optional<std::string> behind;
    if (hops == 1) {
      spec.gateways.push_back({"edge", addr("edge"), {}});
      behind = "edge";
    } else if (hops == 2) {
      spec.gateways.push_back({"outer", addr("outer"), {"inner"}});
      spec.gateways.push_back({"inner", addr("inner"), {}});
      behind = "inner";
    }
    spec.procs.push_back({"drivers",
                          addr("drivers"),
                          std::nullopt,
                          options.workers,
                          std::nullopt,
                          {},
                          std::nullopt});
    spec.procs.push_back(
        {"echoes", addr("echoes"), behind, options.workers, std::nullopt, {}, std::nullopt});
    for (int i = 0; i < kFanWidth; ++i) {
      spec.actors.push_back({"drivers", actor_name('d', i), std::string(routing::kDriverType), {}});
      spec.actors.push_back({"echoes", actor_name('e', i), std::string(routing::kEchoType), {}});
    }
    routing::HostOptions o;
    o.postal_binary = options.postal_binary;
    o.proc_workers = options.workers;
    o.authenticate = options.authenticate;
    if (options.tls) o.channel.tls = routing::TlsMode::kOn;  // R-SEC-1: measured on loopback
    if (options.verbose)
      o.log = [](const std::string& line) { std::printf("  %s\n", line.c_str()); };
    absl::StatusOr<std::unique_ptr<routing::Host>> host = routing::Host::up(spec, o);
    if (!host.ok()) {
      if (!dir.empty()) std::filesystem::remove_all(dir);
      return host.status();
    }
    auto rig = std::make_unique<HostRig>(*std::move(host), dir, std::move(nats));
    routing::Host& h = *rig->host_;
    for (int i = 0; i < kFanWidth; ++i) {
      rig->drivers_.push_back(*h.actor_addr("drivers", actor_name('d', i)));
      runtime::ActorAddr e = *h.actor_addr("echoes", actor_name('e', i));
      if (hops == 2) {  // enter at `outer`, which passes to its peer `inner` (R-GW-1)
        e.location = *runtime::Location::parse(
            absl::StrCat("outer.inner.", h.gateways()[0]->listen_addr().to_string()));
      }
      rig->echoes_.push_back(std::move(e));
    }
    return std::unique_ptr<Rig>(std::move(rig));
  }

  void set_actors(std::vector<runtime::ActorAddr> drivers, std::vector<runtime::ActorAddr> echoes) {
    drivers_ = std::move(drivers);
    echoes_ = std::move(echoes);
  }

  runtime::Client& client() override { return host_->client(); }
  std::vector<pid_t> pids() const override {
    std::vector<pid_t> out;
    for (const auto& p : host_->procs()) {
      if (p.pid > 0) out.push_back(p.pid);
    }
    return out;
  }

 private:
  std::unique_ptr<routing::Host> host_;
  std::string dir_;
  std::unique_ptr<postal::bench::NatsServer> nats_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Rig>> make_rig(Transport transport, int hops,
                                              const RigOptions& options) {
  if (transport == Transport::kInproc) return InprocRig::make(hops, options);
  return HostRig::make(transport, hops, options);
}

std::unique_ptr<Rig> host_rig(std::unique_ptr<routing::Host> host,
                              std::vector<runtime::ActorAddr> drivers,
                              std::vector<runtime::ActorAddr> echoes) {
  auto rig = std::make_unique<HostRig>(std::move(host), "");
  rig->set_actors(std::move(drivers), std::move(echoes));
  return rig;
}

}  // namespace postal::tools::bench
