// nats_users.h — the NATS users and permissions of a topology (R-SEC-4, docs/security.md).
//
// With a topology secret, every nats:// tunnel logs in to NATS as a user derived from it: a proc
// or gateway listening on nats:// as its own name, everything that only dials as `~client`. A
// nats-server that knows these users lets each serve only its own subject and publish only inside
// the topology. `postal up` gives them to the server it starts (start_nats); for a cluster you run,
// `postal nats-users TOPOLOGY --secret-fd N` prints the same block for its configuration files.
#pragma once

#include <string>

#include "postal/routing/channel_key.h"
#include "postal/routing/topology_spec.h"

namespace postal::routing {

// The `authorization { users = [...] }` block of a nats-server configuration file: one user per
// proc and gateway of `spec` listening on nats://, and the dial-only user.
std::string nats_authorization(const TopologySpec& spec, const ChannelKey& key);

}  // namespace postal::routing
