// Down: what a watcher receives, exactly once, when an actor it watches stops or fails
// (R-SUP-2, local part).
//
//   absl::Status init(Context& cx) override { return cx.watch(other.addr()); }
//   absl::Status on_down(Context& cx, const Down& d) override { ... d.who, d.reason ... }
//
// `Context::watch(addr)` watches a local actor (of this proc): when it stops or fails, the
// watcher's `Actor::on_down` runs with its address, the stop reason or the error, and whether it
// failed. Watching an actor that already ended (a tombstone) or does not exist gives Down at once;
// watching one already watched does nothing (still one Down). `Context::unwatch(addr)` cancels:
// no Down arrives after it, even one already on its way. A restart (R-SUP-1) is not an end: the
// address stays valid and watchers hear nothing. A watcher's watches end with its incarnation.
// Watching an actor of another proc (R-SUP-4, remote_watch.h) gives the same one Down, and also
// one with `unreachable` set when that proc is gone; it needs the proc's postal-watch actor (a
// Node installs it), else `watch` returns FailedPrecondition.
#pragma once

#include <string>

#include "postal/runtime/address.h"
#include "postal/wire/type_registry.h"

namespace postal::actors {

struct Down {
  runtime::ActorAddr who;
  std::string reason;   // the stop reason or the error; "no such actor" when it never existed
  bool failed = false;  // it failed (rather than stopped)
  // R-SUP-4: its proc is gone (did not answer, restarted, cannot be reached): the watch is over,
  // though the actor itself may not have ended. `reason` says which. (A field added to the
  // encoding without a wire-version change: no Down crossed procs before remote watches.)
  bool unreachable = false;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(who, reason, failed, unreachable);
  }
};

}  // namespace postal::actors

POSTAL_MESSAGE(postal::actors::Down, "postal.Down");
