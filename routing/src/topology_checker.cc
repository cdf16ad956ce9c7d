// Checker's checks of each table kind, in file order: [topology], [[gateway]], [[proc]],
// [[actor]], [workload].
#include "topology_checker.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include "absl/container/flat_hash_set.h"

namespace postal::routing::topology_internal {
namespace {

constexpr std::string_view kTopLevel = "[topology], [[gateway]], [[proc]], [[actor]], [workload]";

// Positive whole number with a unit: "500ms", "10s", "2m", "1h".
std::optional<absl::Duration> parse_duration(std::string_view text) {
  std::size_t digits = 0;
  std::int64_t value = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    if (value > 1'000'000'000) return std::nullopt;
    value = value * 10 + (text[digits++] - '0');
  }
  if (digits == 0) return std::nullopt;
  const std::string_view unit = text.substr(digits);
  if (unit == "ms") return absl::Milliseconds(value);
  if (unit == "s") return absl::Seconds(value);
  if (unit == "m") return absl::Minutes(value);
  if (unit == "h") return absl::Hours(value);
  return std::nullopt;
}

bool is_type_name(std::string_view text) {
  if (text.empty() || text.size() > 255) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == ':' || c == '-';
  });
}

// How messages name the `index`th (from 0) [[kind]] entry: by its name when it has a string one
// (`proc "alpha"`, `actor "alpha/pinger"`), else by position (`[[proc]] #2`).
std::string entry_name(const toml::table& table, std::string_view kind, std::size_t index) {
  const std::optional<std::string_view> name = table["name"].value<std::string_view>();
  if (kind == "actor") {
    const std::optional<std::string_view> proc = table["proc"].value<std::string_view>();
    if (name && proc) return absl::StrCat("actor ", quote(absl::StrCat(sv(*proc), "/", sv(*name))));
  } else if (name) {
    return absl::StrCat(sv(kind), " ", quote(*name));
  }
  return absl::StrCat("[[", sv(kind), "]] #", index + 1);
}

}  // namespace

absl::Status Checker::check_topology(const toml::table& root, TopologySpec& spec) const {
  const toml::node* node = root.get("topology");
  if (node == nullptr) {
    return fail(root.source(), "",
                R"(missing the [topology] table; add at the top: [topology] name = "demo")");
  }
  if (!node->is_table()) {
    return fail(node->source(), "", R"(topology must be a table; write [topology] name = "demo")");
  }
  const Entry e{*node->as_table(), "[topology]"};
  POSTAL_TOPO_TRY(
      check_keys(e, {"name", "on_proc_exit", "ready_timeout", "delivery_timeout", "log",
                     "start_nats", "nats_tls_ca", "nats_tls_cert", "nats_tls_key", "tls"}));
  std::optional<std::string> name, exit, timeout;
  POSTAL_TOPO_TRY(read_label(e, "name", true, R"(name = "demo")", name));
  spec.name = *name;
  POSTAL_TOPO_TRY(read_string(e, "on_proc_exit", false, R"(on_proc_exit = "teardown")", exit));
  if (exit == "ignore") {
    spec.on_proc_exit = OnProcExit::kIgnore;
  } else if (exit && *exit != "teardown") {
    return fail(
        e.table.get("on_proc_exit")->source(), e.where,
        absl::StrCat("on_proc_exit ", quote(*exit),
                     R"( is not a policy; write "teardown" (stop everything) or "ignore")"));
  }
  POSTAL_TOPO_TRY(read_string(e, "ready_timeout", false, R"(ready_timeout = "10s")", timeout));
  if (timeout) {
    const std::optional<absl::Duration> d = parse_duration(*timeout);
    if (!d || *d <= absl::ZeroDuration() || *d > kMaxReadyTimeout) {
      return fail(e.table.get("ready_timeout")->source(), e.where,
                  absl::StrCat("ready_timeout ", quote(*timeout),
                               " is not a duration from 1ms to 24h; write a whole number and a ",
                               R"(unit, e.g. "500ms", "10s" or "2m")"));
    }
    spec.ready_timeout = d;
  }
  std::optional<std::string> delivery;
  POSTAL_TOPO_TRY(
      read_string(e, "delivery_timeout", false, R"(delivery_timeout = "2s")", delivery));
  if (delivery) {
    const std::optional<absl::Duration> d = parse_duration(*delivery);
    if (!d || *d < kMinDeliveryTimeout || *d > kMaxDeliveryTimeout) {
      return fail(e.table.get("delivery_timeout")->source(), e.where,
                  absl::StrCat("delivery_timeout ", quote(*delivery),
                               " is not a duration from 100ms to 1h; write a whole number and a ",
                               R"(unit, e.g. "500ms", "2s" or "30s")"));
    }
    spec.delivery_timeout = d;
  }
  POSTAL_TOPO_TRY(read_log(e, spec.log));
  std::optional<std::string> nats;
  POSTAL_TOPO_TRY(read_string(e, "start_nats", false, R"(start_nats = "127.0.0.1:4222")", nats));
  if (nats) {
    absl::StatusOr<runtime::ChannelAddr> at =
        runtime::ChannelAddr::parse(absl::StrCat("tcp://", *nats));
    if (!at.ok() || at->port() == 0 || at->host().find(':') != std::string_view::npos) {
      return fail(
          e.table.get("start_nats")->source(), e.where,
          absl::StrCat("start_nats ", quote(*nats),
                       R"( is not an IPv4 host:port with a port; write e.g. "127.0.0.1:4222")"));
    }
    spec.start_nats = *nats;
  }
  POSTAL_TOPO_TRY(check_nats_tls(e, spec.nats_tls));
  std::optional<std::string> tls;  // R-SEC-1
  POSTAL_TOPO_TRY(read_string(e, "tls", false, R"(tls = "auto")", tls));
  if (tls) {
    absl::StatusOr<TlsMode> mode = parse_tls_mode(*tls);
    if (!mode.ok()) {
      return fail(e.table.get("tls")->source(), e.where,
                  absl::StrCat("tls ", quote(*tls),
                               R"( is not a mode; write "auto" (TLS off loopback, the default), )",
                               R"("on" (every tcp channel) or "off")"));
    }
    spec.tls = *mode;
  }
  if (spec.start_nats && spec.nats_tls.enabled()) {
    return fail(e.table.get("nats_tls_ca")->source(), e.where,
                "nats_tls_ca with start_nats: the nats-server postal up starts serves no TLS (it "
                "is for one machine; keep it on loopback); drop one of the two");
  }
  return absl::OkStatus();
}

absl::Status Checker::check_nats_tls(const Entry& e, NatsTls& tls) const {
  std::optional<std::string> ca, cert, key;
  POSTAL_TOPO_TRY(
      read_string(e, "nats_tls_ca", false, R"(nats_tls_ca = "/etc/postal/ca.pem")", ca));
  POSTAL_TOPO_TRY(
      read_string(e, "nats_tls_cert", false, R"(nats_tls_cert = "/etc/postal/proc.pem")", cert));
  POSTAL_TOPO_TRY(
      read_string(e, "nats_tls_key", false, R"(nats_tls_key = "/etc/postal/proc-key.pem")", key));
  for (const auto* f : {&ca, &cert, &key}) {
    if (*f && f->value().empty()) {
      const char* name = f == &ca ? "nats_tls_ca" : f == &cert ? "nats_tls_cert" : "nats_tls_key";
      return fail(e.table.get(name)->source(), e.where,
                  absl::StrCat(name, " is empty; name a PEM file, or leave the key out"));
    }
  }
  if ((cert || key) && !ca) {
    const char* name = cert ? "nats_tls_cert" : "nats_tls_key";
    return fail(e.table.get(name)->source(), e.where,
                absl::StrCat(name, R"( needs nats_tls_ca, the CA that signed the NATS server's )",
                             R"(certificate; add e.g. nats_tls_ca = "/etc/postal/ca.pem")"));
  }
  if (cert.has_value() != key.has_value()) {
    const char* name = cert ? "nats_tls_cert" : "nats_tls_key";
    return fail(e.table.get(name)->source(), e.where,
                "a NATS client certificate needs both nats_tls_cert and nats_tls_key");
  }
  tls = NatsTls{ca.value_or(""), cert.value_or(""), key.value_or("")};
  return absl::OkStatus();
}

absl::Status Checker::check_gateways(const toml::table& root, TopologySpec& spec) {
  std::vector<const toml::table*> tables;
  POSTAL_TOPO_TRY(tables_of(root, "gateway", tables));
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const Entry e{*tables[i], entry_name(*tables[i], "gateway", i)};
    POSTAL_TOPO_TRY(check_keys(e, {"name", "listen", "peers"}));
    std::optional<std::string> name;
    POSTAL_TOPO_TRY(read_label(e, "name", true, R"(name = "edge")", name));
    const toml::source_region& at = e.table.get("name")->source();
    if (auto [it, fresh] = gateway_lines_.emplace(*name, at.begin.line); !fresh) {
      return fail(at, e.where,
                  absl::StrCat("name ", quote(*name), " is declared twice (first at line ",
                               it->second, "); give each [[gateway]] a unique name"));
    }
    GatewaySpec gateway;
    gateway.name = *name;
    POSTAL_TOPO_TRY(read_listen(e, gateway.listen));
    POSTAL_TOPO_TRY(read_strings(e, "peers", R"(peers = ["core"])", gateway.peers));
    spec.gateways.push_back(std::move(gateway));
  }
  // Peers may name gateways declared further down, so they are checked once all are known.
  std::vector<std::string> names;
  for (const GatewaySpec& g : spec.gateways) names.push_back(g.name);
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const GatewaySpec& g = spec.gateways[i];
    absl::flat_hash_set<std::string_view> seen;
    const Entry e{*tables[i], entry_name(*tables[i], "gateway", i)};
    for (std::size_t p = 0; p < g.peers.size(); ++p) {
      const std::string& peer = g.peers[p];
      const toml::source_region& at = (*e.table.get("peers")->as_array())[p].source();
      if (peer == g.name) {
        return fail(at, e.where, "a gateway cannot peer itself; list only other gateways in peers");
      }
      if (!seen.insert(peer).second) {
        return fail(at, e.where,
                    absl::StrCat("peer ", quote(peer), " is listed twice; list each peer once"));
      }
      if (!gateway_lines_.contains(peer)) {
        return fail(at, e.where, undeclared("peer", peer, "gateway", names));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Checker::check_procs(const toml::table& root, TopologySpec& spec) {
  std::vector<const toml::table*> tables;
  POSTAL_TOPO_TRY(tables_of(root, "proc", tables));
  if (tables.empty()) {
    return fail(root.source(), "",
                R"(no [[proc]] declared; add at least one: [[proc]] name = "alpha" )"
                R"(listen = "tcp://127.0.0.1:0")");
  }
  std::vector<std::string> gateways;
  for (const GatewaySpec& g : spec.gateways) gateways.push_back(g.name);
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const Entry e{*tables[i], entry_name(*tables[i], "proc", i)};
    POSTAL_TOPO_TRY(
        check_keys(e, {"name", "listen", "gateway", "workers", "binary", "args", "log"}));
    std::optional<std::string> name;
    POSTAL_TOPO_TRY(read_label(e, "name", true, R"(name = "alpha")", name));
    const toml::source_region& at = e.table.get("name")->source();
    if (auto [it, fresh] = proc_lines_.emplace(*name, at.begin.line); !fresh) {
      return fail(at, e.where,
                  absl::StrCat("name ", quote(*name), " is declared twice (first at line ",
                               it->second, "); give each [[proc]] a unique name"));
    }
    ProcSpec proc;
    proc.name = *name;
    POSTAL_TOPO_TRY(read_listen(e, proc.listen));
    POSTAL_TOPO_TRY(read_string(e, "gateway", false, R"(gateway = "edge")", proc.gateway));
    if (proc.gateway && !gateway_lines_.contains(*proc.gateway)) {
      return fail(e.table.get("gateway")->source(), e.where,
                  undeclared("gateway", *proc.gateway, "gateway", gateways));
    }
    std::optional<std::int64_t> workers;
    POSTAL_TOPO_TRY(read_int(e, "workers", false, 1, kMaxProcWorkers, "workers = 2", workers));
    if (workers) proc.workers = static_cast<int>(*workers);
    POSTAL_TOPO_TRY(read_string(e, "binary", false, R"(binary = "./my_actors")", proc.binary));
    if (proc.binary && (proc.binary->empty() || proc.binary->find('\0') != std::string::npos)) {
      return fail(e.table.get("binary")->source(), e.where,
                  absl::StrCat("binary ", quote(*proc.binary),
                               " is not a program path; write e.g. binary = \"./my_actors\", or "
                               "leave it out to run postal"));
    }
    POSTAL_TOPO_TRY(read_strings(e, "args", R"(args = ["--flag"])", proc.args));
    if (!proc.args.empty() && !proc.binary) {
      return fail(e.table.get("args")->source(), e.where,
                  "args are passed to a user binary, and this proc has none; add e.g. binary = "
                  "\"./my_actors\", or remove args");
    }
    for (std::size_t a = 0; a < proc.args.size(); ++a) {
      if (proc.args[a].find('\0') == std::string::npos) continue;
      return fail(
          (*e.table.get("args")->as_array())[a].source(), e.where,
          "an argument contains a NUL character, which a program cannot receive; remove it");
    }
    POSTAL_TOPO_TRY(read_log(e, proc.log));
    spec.procs.push_back(std::move(proc));
  }
  return absl::OkStatus();
}

absl::Status Checker::check_actors(const toml::table& root, TopologySpec& spec) {
  std::vector<const toml::table*> tables;
  POSTAL_TOPO_TRY(tables_of(root, "actor", tables));
  std::vector<std::string> procs;
  for (const ProcSpec& p : spec.procs) procs.push_back(p.name);
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const Entry e{*tables[i], entry_name(*tables[i], "actor", i)};
    POSTAL_TOPO_TRY(check_keys(e, {"proc", "name", "type", "params"}));
    std::optional<std::string> proc, name, type;
    POSTAL_TOPO_TRY(read_string(e, "proc", true, R"(proc = "alpha")", proc));
    if (!proc_lines_.contains(*proc)) {
      return fail(e.table.get("proc")->source(), e.where, undeclared("proc", *proc, "proc", procs));
    }
    POSTAL_TOPO_TRY(read_label(e, "name", true, R"(name = "pinger")", name));
    const toml::source_region& at = e.table.get("name")->source();
    if (auto [it, fresh] = actor_lines_.emplace(absl::StrCat(*proc, "/", *name), at.begin.line);
        !fresh) {
      return fail(at, e.where,
                  absl::StrCat("name ", quote(*name), " is declared twice in proc ", quote(*proc),
                               " (first at line ", it->second,
                               "); give each actor of a proc a unique name"));
    }
    POSTAL_TOPO_TRY(read_string(e, "type", true, R"(type = "demo.Pinger")", type));
    if (!is_type_name(*type)) {
      return fail(
          e.table.get("type")->source(), e.where,
          absl::StrCat("type ", quote(*type),
                       " is not an actor type name; write the name it is registered under",
                       R"( (1-255 characters of [A-Za-z0-9_.:-]), e.g. type = "demo.Pinger")"));
    }
    ActorSpec actor;
    actor.proc = *proc;
    actor.name = *name;
    actor.type = *type;
    POSTAL_TOPO_TRY(read_params(e, actor));
    spec.actors.push_back(std::move(actor));
  }
  return absl::OkStatus();
}

absl::Status Checker::check_workload(const toml::table& root, TopologySpec& spec) const {
  const toml::node* node = root.get("workload");
  if (node == nullptr) return absl::OkStatus();
  if (!node->is_table()) {
    return fail(node->source(), "",
                "workload must be a table; write [workload] (single brackets, at most one)");
  }
  const Entry e{*node->as_table(), "[workload]"};
  POSTAL_TOPO_TRY(check_keys(e, {"pattern", "from", "to", "messages", "size"}));
  WorkloadSpec workload;
  std::optional<std::string> pattern;
  POSTAL_TOPO_TRY(read_string(e, "pattern", true, R"(pattern = "ping-pong")", pattern));
  static constexpr WorkloadPattern kPatterns[] = {
      WorkloadPattern::kPingPong, WorkloadPattern::kStream, WorkloadPattern::kFanOut,
      WorkloadPattern::kFanIn};
  const auto* match = std::find_if(std::begin(kPatterns), std::end(kPatterns),
                                   [&](WorkloadPattern p) { return to_string(p) == *pattern; });
  if (match == std::end(kPatterns)) {
    return fail(e.table.get("pattern")->source(), e.where,
                absl::StrCat("pattern ", quote(*pattern),
                             " is not a workload pattern; write "
                             R"("ping-pong", "stream", "fan-out" or "fan-in")"));
  }
  workload.pattern = *match;
  POSTAL_TOPO_TRY(read_endpoint(e, "from", spec, workload.from));
  POSTAL_TOPO_TRY(read_endpoint(e, "to", spec, workload.to));
  if (workload.from == workload.to) {
    return fail(e.table.get("to")->source(), e.where,
                absl::StrCat("from and to both name ", quote(workload.to.to_string()),
                             "; a workload runs between two different actors"));
  }
  std::optional<std::int64_t> messages, size;
  POSTAL_TOPO_TRY(read_int(e, "messages", true, 1, std::numeric_limits<std::int64_t>::max(),
                           "messages = 100000", messages));
  POSTAL_TOPO_TRY(read_int(e, "size", true, 1, kMaxWorkloadMessageSize, "size = 64", size));
  workload.messages = *messages;
  workload.size = *size;
  spec.workload = std::move(workload);
  return absl::OkStatus();
}

absl::Status Checker::check(const toml::table& root, TopologySpec& spec) {
  const Keys kTables = {"topology", "gateway", "proc", "actor", "workload"};
  for (auto&& [key, node] : root) {
    if (std::find(kTables.begin(), kTables.end(), key.str()) != kTables.end()) continue;
    return fail(
        key.source(), "",
        absl::StrCat(node.is_table() || node.is_array_of_tables() ? "unknown table "
                                                                  : "unknown top-level key ",
                     quote(key.str()), did_you_mean(key.str(), kTables),
                     "; a topology file holds only ", sv(kTopLevel),
                     node.is_table() ? "" : " (keys go inside one of them)"));
  }
  POSTAL_TOPO_TRY(check_topology(root, spec));
  POSTAL_TOPO_TRY(check_gateways(root, spec));
  POSTAL_TOPO_TRY(check_procs(root, spec));
  POSTAL_TOPO_TRY(check_actors(root, spec));
  return check_workload(root, spec);
}

}  // namespace postal::routing::topology_internal
