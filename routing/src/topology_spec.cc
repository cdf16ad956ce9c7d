#include "postal/routing/topology_spec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <limits>
#include <new>
#include <string>
#include <utility>

#include <toml++/toml.h>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "postal/runtime/label.h"
#include "postal/wire/absl_compat.h"

// Returns from the enclosing function when `expr`, an absl::Status, is not OK. A template cannot
// return from its caller; this file-local macro is the only way to keep the checks one line each.
#define POSTAL_TOPO_TRY(expr)                 \
  do {                                        \
    if (absl::Status s_ = (expr); !s_.ok()) { \
      return s_;                              \
    }                                         \
  } while (false)

namespace postal::routing {
namespace {

using runtime::ChannelAddr;
using Keys = std::initializer_list<std::string_view>;

constexpr std::string_view kAddrHint =
    R"(write e.g. "tcp://127.0.0.1:0", "ipc:///tmp/x.sock" or "ipc://@name")";
constexpr std::string_view kTopLevel = "[topology], [[gateway]], [[proc]], [[actor]], [workload]";
constexpr std::size_t kMaxQuoted = 64;        // Bytes of a value shown in a message.
constexpr std::size_t kMaxDescription = 200;  // Bytes of a TOML syntax error shown.
constexpr std::size_t kMaxListed = 8;         // Names listed in a "declared are ..." hint.

// `text` with quotes, backslashes, control and non-ASCII bytes escaped, cut after `max` bytes, so
// a message stays short and printable whatever the file holds. `quote` adds double quotes.
std::string printable(std::string_view text, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i == max) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string quote(std::string_view text) {
  return absl::StrCat("\"", printable(text, kMaxQuoted), "\"");
}

std::string_view type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    default:
      return "nothing";
  }
}

// Levenshtein distance, for "did you mean" hints. Inputs are capped so the cost stays bounded.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  a = a.substr(0, 32);
  b = b.substr(0, 32);
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "; did you mean "x"?" for the closest candidate within two edits, or "".
template <class Names>
std::string did_you_mean(std::string_view typo, const Names& names) {
  std::string_view best;
  std::size_t best_distance = 3;
  for (std::string_view name : names) {
    const std::size_t d = edit_distance(typo, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  return best.empty() ? std::string() : absl::StrCat(" (did you mean ", quote(best), "?)");
}

std::string join(Keys keys) {
  std::string out;
  for (std::string_view key : keys) absl::StrAppend(&out, out.empty() ? "" : ", ", sv(key));
  return out;
}

std::string list_names(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::vector<std::string> shown;
  for (std::size_t i = 0; i < names.size() && i < kMaxListed; ++i) shown.push_back(quote(names[i]));
  return absl::StrCat(absl::StrJoin(shown, ", "), names.size() > kMaxListed ? ", ..." : "");
}

// "<subject> is not a declared <kind> (did you mean ...?); declare it with [[kind]] or name one
// of: ...", for a reference to a name that no entry declares.
std::string undeclared(std::string_view subject, std::string_view name, std::string_view kind,
                       const std::vector<std::string>& declared) {
  return absl::StrCat(
      sv(subject), " ", quote(name), " is not a declared ", sv(kind), did_you_mean(name, declared),
      "; declare it with [[", sv(kind), "]]",
      declared.empty() ? " (none is declared yet)" : " or name one of: ", list_names(declared));
}

// The problem part of a runtime parser's "bad <what> "<text>": <problem>" message.
std::string problem_of(const absl::Status& status, std::string_view what, std::string_view text) {
  const std::string prefix =
      absl::StrCat("bad ", sv(what), " ", runtime::address_internal::quote(text), ": ");
  std::string_view message(status.message().data(), status.message().size());
  if (message.substr(0, prefix.size()) == prefix) message.remove_prefix(prefix.size());
  return std::string(message);
}

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

bool is_param_key(std::string_view text) {
  if (text.empty() || text.size() > 64) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
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

// A table under check and how messages name it: `[topology]`, `proc "alpha"`, `[[proc]] #2`.
struct Entry {
  const toml::table& table;
  std::string where;
};

// Checks a parsed TOML document against the topology format. Holds only the file name and the
// bookkeeping for uniqueness; one instance checks one document.
class Checker {
 public:
  explicit Checker(std::string_view file) : file_(file) {}

  absl::Status check(const toml::table& root, TopologySpec& spec);

 private:
  absl::Status fail(const toml::source_region& at, std::string_view where,
                    std::string_view what) const {
    std::string position(file_);
    if (at.begin.line > 0) {
      absl::StrAppend(&position, ":", at.begin.line);
      if (at.begin.column > 0) absl::StrAppend(&position, ":", at.begin.column);
    }
    return absl::InvalidArgumentError(
        absl::StrCat(position, ": ", sv(where), where.empty() ? "" : ": ", sv(what)));
  }

  absl::Status check_keys(const Entry& e, Keys allowed) const;
  absl::Status missing(const Entry& e, std::string_view key, std::string_view example) const;
  absl::Status wrong_type(const Entry& e, std::string_view key, const toml::node& node,
                          std::string_view want, std::string_view example) const;
  // Each reader leaves `out` empty when the key is absent and not required.
  absl::Status read_string(const Entry& e, std::string_view key, bool required,
                           std::string_view example, std::optional<std::string>& out) const;
  absl::Status read_label(const Entry& e, std::string_view key, bool required,
                          std::string_view example, std::optional<std::string>& out) const;
  absl::Status read_int(const Entry& e, std::string_view key, bool required, std::int64_t lo,
                        std::int64_t hi, std::string_view example,
                        std::optional<std::int64_t>& out) const;
  absl::Status read_strings(const Entry& e, std::string_view key, std::string_view example,
                            std::vector<std::string>& out) const;
  absl::Status read_listen(const Entry& e, ChannelAddr& out);
  absl::Status read_params(const Entry& e, ActorSpec& actor) const;
  absl::Status read_endpoint(const Entry& e, std::string_view key, const TopologySpec& spec,
                             ActorRef& out) const;
  // The entries of an array of tables (`[[name]]`), or an error when `name` is something else.
  absl::Status tables_of(const toml::table& root, std::string_view name,
                         std::vector<const toml::table*>& out) const;

  absl::Status check_topology(const toml::table& root, TopologySpec& spec) const;
  absl::Status check_gateways(const toml::table& root, TopologySpec& spec);
  absl::Status check_procs(const toml::table& root, TopologySpec& spec);
  absl::Status check_actors(const toml::table& root, TopologySpec& spec);
  absl::Status check_workload(const toml::table& root, TopologySpec& spec) const;

  std::string_view file_;
  // Declared names → the line of their declaration; actors as "proc/name". Hash lookups keep a
  // large file linear (the TopologySpec::find_* scans are for small specs).
  absl::flat_hash_map<std::string, std::int64_t> gateway_lines_;
  absl::flat_hash_map<std::string, std::int64_t> proc_lines_;
  absl::flat_hash_map<std::string, std::int64_t> actor_lines_;
  // Listen addresses taken so far (exact text; tcp ports; tcp wildcard ports) → who took it.
  absl::flat_hash_map<std::string, std::string> listens_;
  absl::flat_hash_map<std::uint16_t, std::string> tcp_ports_;
  absl::flat_hash_map<std::uint16_t, std::string> tcp_wildcards_;
};

absl::Status Checker::check_keys(const Entry& e, Keys allowed) const {
  for (auto&& [key, node] : e.table) {
    if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
    return fail(key.source(), e.where,
                absl::StrCat("unknown key ", quote(key.str()), did_you_mean(key.str(), allowed),
                             "; the keys allowed here are ", join(allowed)));
  }
  return absl::OkStatus();
}

absl::Status Checker::missing(const Entry& e, std::string_view key,
                              std::string_view example) const {
  return fail(e.table.source(), e.where,
              absl::StrCat("missing required key ", quote(key), "; add e.g. ", sv(example)));
}

absl::Status Checker::wrong_type(const Entry& e, std::string_view key, const toml::node& node,
                                 std::string_view want, std::string_view example) const {
  return fail(node.source(), e.where,
              absl::StrCat(sv(key), " must be ", sv(want), ", not ", sv(type_name(node)),
                           "; write e.g. ", sv(example)));
}

absl::Status Checker::read_string(const Entry& e, std::string_view key, bool required,
                                  std::string_view example, std::optional<std::string>& out) const {
  const toml::node* node = e.table.get(key);
  if (node == nullptr) return required ? missing(e, key, example) : absl::OkStatus();
  const auto* value = node->as_string();
  if (value == nullptr) return wrong_type(e, key, *node, "a string", example);
  out = value->get();
  return absl::OkStatus();
}

absl::Status Checker::read_label(const Entry& e, std::string_view key, bool required,
                                 std::string_view example, std::optional<std::string>& out) const {
  POSTAL_TOPO_TRY(read_string(e, key, required, example, out));
  if (!out) return absl::OkStatus();
  const absl::StatusOr<runtime::Label> label = runtime::Label::parse(*out);
  if (label.ok()) return absl::OkStatus();
  // The label rule says what to write; add an example unless the problem already suggests one.
  const std::string problem = problem_of(label.status(), "label", *out);
  const bool has_advice = problem.find("write") != std::string::npos;
  return fail(e.table.get(key)->source(), e.where,
              absl::StrCat(sv(key), " ", quote(*out), " is not a label: ", problem,
                           has_advice ? "" : "; e.g. ", has_advice ? "" : sv(example)));
}

absl::Status Checker::read_int(const Entry& e, std::string_view key, bool required, std::int64_t lo,
                               std::int64_t hi, std::string_view example,
                               std::optional<std::int64_t>& out) const {
  const toml::node* node = e.table.get(key);
  if (node == nullptr) return required ? missing(e, key, example) : absl::OkStatus();
  const auto* value = node->as_integer();
  if (value == nullptr) return wrong_type(e, key, *node, "an integer", example);
  if (value->get() < lo || value->get() > hi) {
    return fail(
        node->source(), e.where,
        absl::StrCat(sv(key), " = ", value->get(), " is out of range; write a whole number from ",
                     lo, " to ", hi, ", e.g. ", sv(example)));
  }
  out = value->get();
  return absl::OkStatus();
}

absl::Status Checker::read_strings(const Entry& e, std::string_view key, std::string_view example,
                                   std::vector<std::string>& out) const {
  const toml::node* node = e.table.get(key);
  if (node == nullptr) return absl::OkStatus();
  const toml::array* array = node->as_array();
  if (array == nullptr) return wrong_type(e, key, *node, "an array of strings", example);
  for (const toml::node& item : *array) {
    const auto* value = item.as_string();
    if (value == nullptr) {
      return wrong_type(e, absl::StrCat("every item of ", sv(key)), item, "a string", example);
    }
    out.push_back(value->get());
  }
  return absl::OkStatus();
}

absl::Status Checker::read_listen(const Entry& e, ChannelAddr& out) {
  std::optional<std::string> text;
  POSTAL_TOPO_TRY(read_string(e, "listen", true, R"(listen = "tcp://127.0.0.1:0")", text));
  const toml::source_region& at = e.table.get("listen")->source();
  absl::StatusOr<ChannelAddr> addr = ChannelAddr::parse(*text);
  if (!addr.ok()) {
    return fail(
        at, e.where,
        absl::StrCat("listen ", quote(*text), " is not a channel address (",
                     problem_of(addr.status(), "channel address", *text), "); ", sv(kAddrHint)));
  }
  out = *std::move(addr);
  // Ephemeral binds never clash: the OS picks a tcp port, inproc://0 is "any".
  const bool is_tcp = out.transport() == ChannelAddr::Transport::kTcp;
  if ((is_tcp && out.port() == 0) || out == ChannelAddr()) return absl::OkStatus();
  const std::string* taken = nullptr;
  const bool wildcard = is_tcp && (out.host() == "0.0.0.0" || out.host() == "::");
  if (auto it = listens_.find(out.to_string()); it != listens_.end()) {
    taken = &it->second;
  } else if (auto port = tcp_ports_.find(out.port());
             is_tcp && wildcard && port != tcp_ports_.end()) {
    taken = &port->second;
  } else if (auto any = tcp_wildcards_.find(out.port()); is_tcp && any != tcp_wildcards_.end()) {
    taken = &any->second;
  }
  if (taken != nullptr) {
    return fail(at, e.where,
                absl::StrCat("listen ", quote(*text), " is already taken by ", *taken,
                             "; give each proc and gateway its own address, or use tcp port 0 to "
                             "let the system pick one"));
  }
  listens_.emplace(out.to_string(), e.where);
  if (is_tcp) {
    tcp_ports_.emplace(out.port(), e.where);
    if (wildcard) tcp_wildcards_.emplace(out.port(), e.where);
  }
  return absl::OkStatus();
}

absl::Status Checker::read_params(const Entry& e, ActorSpec& actor) const {
  constexpr std::string_view kExample = R"(params = { count = 1000, target = "beta/ponger" })";
  const toml::node* node = e.table.get("params");
  if (node == nullptr) return absl::OkStatus();
  const toml::table* table = node->as_table();
  if (table == nullptr) return wrong_type(e, "params", *node, "a table", kExample);
  for (auto&& [key, value] : *table) {
    const std::string_view name = key.str();
    if (!is_param_key(name)) {
      return fail(
          key.source(), e.where,
          absl::StrCat(
              "params key ", quote(name),
              " is not a parameter name; use 1-64 characters of [A-Za-z0-9_.-], e.g. count"));
    }
    ActorParam param;
    if (const auto* s = value.as_string()) {
      param = s->get();
    } else if (const auto* i = value.as_integer()) {
      param = i->get();
    } else if (const auto* b = value.as_boolean()) {
      param = b->get();
    } else if (const auto* f = value.as_floating_point(); f != nullptr && std::isfinite(f->get())) {
      param = f->get();
    } else {
      return fail(
          value.source(), e.where,
          absl::StrCat("params.", sv(name), " is ",
                       sv(value.is_floating_point() ? "not a finite number" : type_name(value)),
                       "; a parameter is a string, an integer, a boolean or a finite float (params "
                       "is a flat table), e.g. ",
                       sv(kExample)));
    }
    actor.params.emplace(std::string(name), std::move(param));
  }
  return absl::OkStatus();
}

absl::Status Checker::read_endpoint(const Entry& e, std::string_view key, const TopologySpec& spec,
                                    ActorRef& out) const {
  const std::string example = absl::StrCat(sv(key), R"( = "alpha/pinger")");
  std::optional<std::string> text;
  POSTAL_TOPO_TRY(read_string(e, key, true, example, text));
  const toml::source_region& at = e.table.get(key)->source();
  const std::size_t slash = text->find('/');
  if (slash == std::string::npos) {
    return fail(at, e.where,
                absl::StrCat(sv(key), " ", quote(*text),
                             " does not name an actor; write proc/actor, e.g. ", example));
  }
  out = ActorRef{text->substr(0, slash), text->substr(slash + 1)};
  if (actor_lines_.contains(*text)) return absl::OkStatus();
  std::vector<std::string> declared;
  for (const ActorSpec& actor : spec.actors) declared.push_back(actor.proc + "/" + actor.name);
  return fail(at, e.where, undeclared(key, *text, "actor", declared));
}

absl::Status Checker::tables_of(const toml::table& root, std::string_view name,
                                std::vector<const toml::table*>& out) const {
  const toml::node* node = root.get(name);
  if (node == nullptr) return absl::OkStatus();
  const std::string hint = absl::StrCat(sv(name), " must be an array of tables; write [[", sv(name),
                                        "]] (double brackets) before each ", sv(name));
  const toml::array* array = node->as_array();
  if (array == nullptr) return fail(node->source(), "", hint);
  for (const toml::node& item : *array) {
    if (!item.is_table()) return fail(item.source(), "", hint);
    out.push_back(item.as_table());
  }
  return absl::OkStatus();
}

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
  POSTAL_TOPO_TRY(check_keys(e, {"name", "on_proc_exit", "ready_timeout"}));
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
    POSTAL_TOPO_TRY(check_keys(e, {"name", "listen", "gateway", "workers", "binary", "args"}));
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

absl::StatusOr<TopologySpec> parse_unguarded(std::string_view text, std::string_view file) {
  if (text.size() > kMaxTopologyFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(sv(file), ": the topology is ", text.size(), " bytes, more than the limit of ",
                     kMaxTopologyFileBytes, "; a topology file describes procs, not data"));
  }
#if TOML_EXCEPTIONS
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(file));
  } catch (const toml::parse_error& e) {
#else
  toml::parse_result parsed = toml::parse(text, std::string_view(file));
  if (!parsed) {
    const toml::parse_error& e = parsed.error();
#endif
    return absl::InvalidArgumentError(
        absl::StrCat(sv(file), ":", e.source().begin.line, ":", e.source().begin.column,
                     ": not valid TOML: ", printable(e.description(), kMaxDescription),
                     "; fix the syntax here (see docs/topologies.md for the format)"));
  }
#if !TOML_EXCEPTIONS
  toml::table root = std::move(parsed).table();
#endif
  TopologySpec spec;
  POSTAL_TOPO_TRY(Checker(file).check(root, spec));
  return spec;
}

absl::StatusOr<TopologySpec> load_unguarded(const std::string& path) {
  // O_NOFOLLOW refuses a symlink; O_NONBLOCK keeps a FIFO without a writer from blocking the open.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP) {
      return absl::InvalidArgumentError(
          absl::StrCat(path,
                       ": is a symbolic link; topology files are read only as regular files, so "
                       "give the path of the file it points to"));
    }
    if (err == ENXIO) {  // A Unix socket, or a device file without a device.
      return absl::InvalidArgumentError(absl::StrCat(
          path,
          ": is a socket or a device; a topology must be a regular .toml file, give its path"));
    }
    return absl::ErrnoToStatus(err, absl::StrCat(path, ": cannot open the topology file"));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot stat the topology file"));
  }
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISFIFO(st.st_mode)                           ? "a FIFO"
                       : S_ISDIR(st.st_mode)                          ? "a directory"
                       : S_ISSOCK(st.st_mode)                         ? "a socket"
                       : (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) ? "a device"
                                                                      : "not a regular file";
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": is ", kind, "; a topology must be a regular .toml file, give its path"));
  }
  const std::string too_big =
      absl::StrCat(path, ": is larger than ", kMaxTopologyFileBytes,
                   " bytes (1 MiB), the limit for a topology file; is it the right file?");
  if (st.st_size > static_cast<off_t>(kMaxTopologyFileBytes)) {
    return absl::InvalidArgumentError(too_big);
  }
  // Read at most one byte past the limit: the file may grow after fstat.
  std::string text(kMaxTopologyFileBytes + 1, '\0');
  std::size_t used = 0;
  while (used < text.size()) {
    const ssize_t n = ::read(fd, text.data() + used, text.size() - used);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot read the topology file"));
    }
    used += static_cast<std::size_t>(n);
  }
  if (used > kMaxTopologyFileBytes) return absl::InvalidArgumentError(too_big);
  text.resize(used);
  return parse_unguarded(text, path);
}

// Runs `body`, turning an escaping exception (only allocation failure is expected) into a status:
// exceptions never cross the public API.
template <class Body>
absl::StatusOr<TopologySpec> guarded(std::string_view file, Body body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat(sv(file), ": out of memory while reading the topology"));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(sv(file), ": unexpected error while reading the topology: ", e.what()));
  } catch (...) {
    return absl::InternalError(
        absl::StrCat(sv(file), ": unexpected error while reading the topology"));
  }
}

}  // namespace

const GatewaySpec* TopologySpec::find_gateway(std::string_view name) const {
  for (const GatewaySpec& g : gateways) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

const ProcSpec* TopologySpec::find_proc(std::string_view name) const {
  for (const ProcSpec& p : procs) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const ActorSpec* TopologySpec::find_actor(const ActorRef& ref) const {
  for (const ActorSpec& a : actors) {
    if (a.proc == ref.proc && a.name == ref.actor) return &a;
  }
  return nullptr;
}

std::string_view to_string(OnProcExit value) {
  return value == OnProcExit::kIgnore ? "ignore" : "teardown";
}

std::string_view to_string(WorkloadPattern value) {
  switch (value) {
    case WorkloadPattern::kStream:
      return "stream";
    case WorkloadPattern::kFanOut:
      return "fan-out";
    case WorkloadPattern::kFanIn:
      return "fan-in";
    case WorkloadPattern::kPingPong:
      break;
  }
  return "ping-pong";
}

absl::StatusOr<TopologySpec> parse_topology(std::string_view toml_text,
                                            std::string_view file_name) noexcept {
  return guarded(file_name, [&] { return parse_unguarded(toml_text, file_name); });
}

absl::StatusOr<TopologySpec> load_topology(const std::string& path) noexcept {
  return guarded(path, [&] { return load_unguarded(path); });
}

}  // namespace postal::routing

#undef POSTAL_TOPO_TRY
