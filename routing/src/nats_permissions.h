// nats_permissions.h — the users and permissions of the nats-server `postal up` starts for a
// topology with a key (start_nats; R-SEC-4; routing internal).
//
// Each member listening on nats:// is a user of its own (nats_credentials: its name, a password
// derived from the key); everything that only dials is the user `~client`. A member may
//   publish    to every member's `<subject>.t.*` (open and feed connections) and to `_INBOX.>`
//              (answers and the bytes of connections it serves go to the dialer's inbox);
//   subscribe  to its own `<subject>.t.*` and to its own inboxes only.
// So no member can serve or read another's subject or inboxes, and none can publish outside the
// topology's subjects (`$JS`, `$SYS`, another topology's procs); a connection without a user of
// the topology is refused. The dial-only nodes share `~client`, and so its inboxes: they are not
// kept from one another (they hold the secret like every member).
#pragma once

#include <string>
#include <vector>

namespace postal::routing {
class ChannelKey;  // channel_key.h
}

namespace postal::routing::internal {

struct NatsMember {
  std::string name;     // its proc id (ChannelOptions::nats_member)
  std::string subject;  // of its nats:// listen address
};

// The `authorization { users = [...] }` block of a nats-server configuration file.
std::string nats_authorization(const routing::ChannelKey& key,
                               const std::vector<NatsMember>& members);

}  // namespace postal::routing::internal
