// Checker: checks a parsed TOML document against the topology format and builds the
// TopologySpec (routing internal, topology_spec).
//
// It enforces the "Guarantees of a returned spec" of topology_spec.h and produces its error
// messages: the first problem found, as `<file>:<line>:<column>: <where>: <what>; <what to write>`.
// Field readers (one typed key of one table) are in topology_fields.cc; the checks of each
// table kind ([topology], [[gateway]], [[proc]], [[actor]], [workload]) in topology_checker.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "postal/routing/topology_spec.h"
#include "postal/wire/absl_compat.h"
#include "topology_hints.h"

// Returns from the enclosing function when `expr`, an absl::Status, is not OK. A template cannot
// return from its caller; this macro, private to the topology_*.cc files, is the only way to keep
// the checks one line each.
#define POSTAL_TOPO_TRY(expr)                 \
  do {                                        \
    if (absl::Status s_ = (expr); !s_.ok()) { \
      return s_;                              \
    }                                         \
  } while (false)

namespace postal::routing::topology_internal {

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
  absl::Status read_listen(const Entry& e, runtime::ChannelAddr& out);
  // `log`: log levels in POSTAL_LOG's syntax, checked now so a typo fails at load, not in a child.
  absl::Status read_log(const Entry& e, std::optional<std::string>& out) const;
  absl::Status read_params(const Entry& e, ActorSpec& actor) const;
  absl::Status read_endpoint(const Entry& e, std::string_view key, const TopologySpec& spec,
                             ActorRef& out) const;
  // The entries of an array of tables (`[[name]]`), or an error when `name` is something else.
  absl::Status tables_of(const toml::table& root, std::string_view name,
                         std::vector<const toml::table*>& out) const;

  absl::Status check_topology(const toml::table& root, TopologySpec& spec) const;
  absl::Status check_nats_tls(const Entry& e, NatsTls& tls) const;
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

}  // namespace postal::routing::topology_internal
