// remote_watch.h — watching an actor of another proc (R-SUP-4): the messages between a proc's
// cells and the `postal-watch` actors of procs, and how often those check on each other.
//
// `cx.watch(addr)` of an actor on another proc registers through the watcher's own proc's
// postal-watch (its keeper), which asks the target proc's keeper to add the watcher to the target
// (WatchRequest). From then on exactly one Down reaches the watcher:
//   * the target stops or fails: its proc sends Down{reason, failed} to the watcher, as locally;
//   * the target does not exist or already ended: Down at once, from its proc;
//   * its proc is gone: the keepers ping each other every `interval` (WatchPing/WatchPong); a proc
//     that answers nothing for `timeout`, or whose answers come from another incarnation (it
//     restarted and forgot its watchers), or that the channel cannot reach at all (the request
//     comes back undeliverable), ends the watch with Down{unreachable: true} from the watcher's
//     keeper. That watch is then over (quarantined): a late Down or answer from the old proc is
//     dropped, and a new watch starts afresh.
// Unwatch, the watcher's own end and a watch its keeper ended cancel the registration on the
// target's proc too; that proc's keeper takes a registration or cancel only from the watcher's
// own proc, and drops what a watcher proc registered once its pings stop for twice the timeout
// (it could no longer cancel).
// A keeper holds at most kMaxRemoteWatches watches of its proc's actors and serves at most as
// many of other procs', and a target has at most as many watchers; past them a watch ends at once
// with Down{unreachable} saying so.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/time/time.h"
#include "postal/runtime/address.h"
#include "postal/wire/type_registry.h"

namespace postal::actors {

inline constexpr std::string_view kWatchName = "postal-watch";
inline constexpr size_t kMaxRemoteWatches = 65536;

struct WatchOptions {
  absl::Duration interval = absl::Seconds(1);  // how often a keeper pings each proc it watches
  absl::Duration timeout = absl::Seconds(5);   // silence after which that proc counts as gone
};

// A cell → its own proc's keeper.
struct WatchRemote {
  enum Op : uint8_t { kWatch = 0, kUnwatch = 1, kForget = 2 };  // kForget: a Down arrived
  runtime::ActorAddr target;
  runtime::ActorAddr watcher;
  uint8_t op = kWatch;
  template <class A>
  void serialize(A& a) {
    a(target, watcher, op);
  }
};

// A keeper → the target's proc's keeper: add (or, `watch` false, remove) `watcher`.
struct WatchRequest {
  runtime::ActorAddr target;
  runtime::ActorAddr watcher;
  bool watch = true;
  template <class A>
  void serialize(A& a) {
    a(target, watcher, watch);
  }
};

// The answer to a WatchRequest to watch: the answering proc's incarnation.
struct WatchAck {
  runtime::ActorAddr target;
  runtime::ActorAddr watcher;
  uint64_t incarnation = 0;
  template <class A>
  void serialize(A& a) {
    a(target, watcher, incarnation);
  }
};

struct WatchPing {
  template <class A>
  void serialize(A&) {}
};
struct WatchPong {
  uint64_t incarnation = 0;
  template <class A>
  void serialize(A& a) {
    a(incarnation);
  }
};

}  // namespace postal::actors

POSTAL_MESSAGE(postal::actors::WatchRemote, "postal.WatchRemote");
POSTAL_MESSAGE(postal::actors::WatchRequest, "postal.WatchRequest");
POSTAL_MESSAGE(postal::actors::WatchAck, "postal.WatchAck");
POSTAL_MESSAGE(postal::actors::WatchPing, "postal.WatchPing");
POSTAL_MESSAGE(postal::actors::WatchPong, "postal.WatchPong");
