// PrefixTable<V>: values keyed by an id prefix — a proc, an actor or a port — looked up by true
// longest-prefix match (port ⊒ actor ⊒ proc, R-ROUTE-2). Three hash probes at most, whatever the
// table size. Not synchronized: its owner locks.
//
// The plain implementation: three absl::flat_hash_maps keyed by the ids themselves. Router and
// DialRouter use FlatPrefixTable (flat_prefix_table.h), which keeps this contract in a layout
// that costs about one cache miss per lookup in large tables; this one stays as its reference in
// tests and its peer in benchmarks/router_bench.cc.
#pragma once

#include <cstddef>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "postal/routing/route_prefix.h"
#include "postal/runtime/ids.h"

namespace postal::routing {

template <class V>
class PrefixTable {
 public:
  void add(const RoutePrefix& prefix, V value) {
    std::visit([&](const auto& id) { map_for(id)[id] = std::move(value); }, prefix);
  }

  bool remove(const RoutePrefix& prefix) {
    return std::visit([&](const auto& id) { return map_for(id).erase(id) > 0; }, prefix);
  }

  // The value of the longest prefix of `id`, or nullptr.
  const V* lookup(const runtime::PortId& id) const {
    if (!ports_.empty()) {
      if (auto it = ports_.find(id); it != ports_.end()) return &it->second;
    }
    if (!actors_.empty()) {
      if (auto it = actors_.find(id.actor); it != actors_.end()) return &it->second;
    }
    if (auto it = procs_.find(id.actor.proc); it != procs_.end()) return &it->second;
    return nullptr;
  }

  size_t size() const { return ports_.size() + actors_.size() + procs_.size(); }

 private:
  auto& map_for(const runtime::PortId&) { return ports_; }
  auto& map_for(const runtime::ActorId&) { return actors_; }
  auto& map_for(const runtime::ProcId&) { return procs_; }

  absl::flat_hash_map<runtime::PortId, V> ports_;
  absl::flat_hash_map<runtime::ActorId, V> actors_;
  absl::flat_hash_map<runtime::ProcId, V> procs_;
};

}  // namespace postal::routing
