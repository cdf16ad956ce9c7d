// SessionCredit: the server's half of credit for one session (docs/wire.md §10.1, R-FLOW-2;
// routing internal). Which destination actors the session's client holds back because their
// mailbox on this proc is full, and the opens that could not be sent while the session had no
// connection. The mechanism around it — asking the mailbox to call back once it has room, the
// I/O thread sending `open` — is the connection's and the ServerCore's (stream_connection.h,
// stream_server.cc). I/O thread only.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "postal/runtime/ids.h"
#include "postal/runtime/message_envelope.h"

namespace postal::routing::internal {

class SessionCredit {
 public:
  // Actors one session may have paused at once, and a client may hold back at once; past it a
  // full mailbox refuses envelopes one by one (R-FLOW-2's fail-back), as without the feature.
  static constexpr size_t kMaxPaused = 4096;

  // The actor to pause when `env` — returned by the proc while the server delivered it — was
  // refused because its destination actor's mailbox is full (bound `mailbox messages` or
  // `mailbox bytes`), for one of its handler ports; nullopt for any other failure.
  static std::optional<runtime::ActorId> refused_by_full_mailbox(const runtime::MessageEnvelope& env);

  // Whether `actor` may be paused now: not paused already, and the bound leaves room.
  bool may_pause(const runtime::ActorId& actor) const {
    return !paused_.contains(actor) && paused_.size() < kMaxPaused;
  }
  // Records the pause and appends its CREDIT `paused` to `out`.
  void pause(const runtime::ActorId& actor, std::string& out);
  // The actor has room again: whether it was paused (the caller then sends `open`, or keeps it
  // for the next connection with `open_later`).
  bool open(const runtime::ActorId& actor) { return paused_.erase(actor) > 0; }
  void open_later(const runtime::ActorId& actor) { unsent_opens_.push_back(actor); }
  // A resumed session (§10.1 rule 58): appends CREDIT `paused` for every pause and `open` for
  // every open kept for it; a pause sent on the lost connection may not have arrived.
  void repeat(std::string& out);

 private:
  absl::flat_hash_set<runtime::ActorId> paused_;
  std::vector<runtime::ActorId> unsent_opens_;  // at most one per actor that was paused
};

}  // namespace postal::routing::internal
