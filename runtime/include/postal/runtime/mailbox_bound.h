// MailboxBound: how much an actor's mailbox may hold, and what a sender meets when it is full
// (R-FLOW-1).
//
// A mailbox holds at most `max_messages` envelopes and `max_bytes` payload bytes: the envelopes
// queued for the actor's handlers, the one being handled, the stashed ones and those unstashed
// and not yet handled again (restart backoffs queue into the same mailbox). The bytes counted for
// an envelope are its payload's size as known without serializing (`wire::Any::known_size`: the
// bytes when it has them — it arrived over a channel, or was serialized already — else `sizeof`
// the typed value, not what the value owns on the heap). Replies to the actor's own requests
// (ephemeral ports) and supervision messages (`SupervisionEvent`, `Down`) are counted but never
// refused: losing them would break R-ACT-10, R-SUP-1 and R-SUP-2, and they are bounded by what
// the actor itself started.
//
// When an envelope does not fit, the actor's `policy` applies:
//   - kBlock: the sender waits, up to `block_timeout`, for room, then the envelope returns
//     `Transport(Overloaded)`. Only a sender that may wait waits (`may_block_here`): a fiber on a
//     scheduler worker, or an ordinary thread (a `Client`'s user thread). Threads that move
//     envelopes (I/O threads, proc timers), sends inside a `NoBlockScope` (channel servers'
//     delivery, gateways, `try_post`) and returned undeliverables get kFail instead, and so does
//     any send into a deterministic proc (no thread would make room while the caller waits).
//   - kFail: the envelope returns `Overloaded` at once.
//   - kDropOldest: the oldest queued envelope that may be dropped (replies and supervision
//     messages never are; they are kept, in order) is dropped to make room, counted in the proc's
//     statistics (`dropped_oldest`) and returned to its sender as `Overloaded` (detail "dropped
//     as the oldest"), so nothing vanishes (R-FAIL-4). When nothing queued can be dropped (what
//     fills the bound is being handled or stashed) the new envelope returns `Overloaded`.
// An envelope larger than `max_bytes` on its own returns `Overloaded` at once, whatever the
// policy. `Overloaded` failures carry the bound, the mailbox's depth in its unit, and the maximum.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/time/time.h"

namespace postal::runtime {

class Scheduler;

enum class OverloadPolicy : uint8_t { kBlock, kFail, kDropOldest };
std::string_view to_string(OverloadPolicy policy);

struct MailboxBound {
  // Defaults (docs/decisions.md, "Bounded mailboxes"): generous enough that no test or benchmark
  // of the runtime reaches them, finite so that a flood cannot exhaust the host.
  uint64_t max_messages = 1'000'000;
  uint64_t max_bytes = uint64_t{1} << 30;
  OverloadPolicy policy = OverloadPolicy::kBlock;
  absl::Duration block_timeout = absl::Seconds(10);

  static MailboxBound of(uint64_t messages, OverloadPolicy policy = OverloadPolicy::kBlock) {
    MailboxBound b;
    b.max_messages = messages;
    b.policy = policy;
    return b;
  }
};

// R-FLOW-1, R-FLOW-2: sends made on this thread while it lives never block for room in a full
// mailbox (they fail as kFail would). Set around deliveries from channels and gateways, around
// `try_post`, and for the life of I/O and timer threads. Nests.
class NoBlockScope {
 public:
  NoBlockScope();
  ~NoBlockScope();
  NoBlockScope(const NoBlockScope&) = delete;
  NoBlockScope& operator=(const NoBlockScope&) = delete;
};

// Whether a send on this thread may wait for room in a mailbox of a proc scheduled by `dest`:
// not inside a NoBlockScope, and `dest` is not deterministic.
bool may_block_here(const Scheduler& dest);

}  // namespace postal::runtime
