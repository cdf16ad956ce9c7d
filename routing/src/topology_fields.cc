// Checker's field readers: one typed key of one table, with the error message for each way the key
// can be wrong.
#include <algorithm>
#include <cmath>

#include "postal/runtime/label.h"
#include "postal/runtime/logger.h"
#include "topology_checker.h"

namespace postal::routing::topology_internal {
namespace {

using runtime::ChannelAddr;

constexpr std::string_view kAddrHint =
    R"(write e.g. "tcp://127.0.0.1:0", "ipc:///tmp/x.sock" or "ipc://@name")";

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

// The problem part of a runtime parser's "bad <what> "<text>": <problem>" message.
std::string problem_of(const absl::Status& status, std::string_view what, std::string_view text) {
  const std::string prefix =
      absl::StrCat("bad ", sv(what), " ", runtime::address_internal::quote(text), ": ");
  std::string_view message(status.message().data(), status.message().size());
  if (message.substr(0, prefix.size()) == prefix) message.remove_prefix(prefix.size());
  return std::string(message);
}

bool is_param_key(std::string_view text) {
  if (text.empty() || text.size() > 64) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

}  // namespace

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

absl::Status Checker::read_log(const Entry& e, std::optional<std::string>& out) const {
  POSTAL_TOPO_TRY(read_string(e, "log", false, R"(log = "info,postal.routing=debug")", out));
  if (!out) return absl::OkStatus();
  if (absl::Status s = runtime::check_logging_spec(*out); !s.ok()) {
    return fail(e.table.get("log")->source(), e.where,
                absl::StrCat("log ", quote(*out), " is not a log level spec (", s.message(),
                             R"(); write e.g. log = "debug" or log = "info,postal.routing=debug")"));
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

}  // namespace postal::routing::topology_internal
