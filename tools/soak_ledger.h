// SoakLedger: every payload `postal soak` sends, from its id to exactly one final state
// (decisions.md, "The soak's ledger").
//
// The soak sends each payload as a ping to the echo of one target proc; the echo answers with the
// same payload (its seq is the id). An id ends in one state:
//
//   delivered           a reply came, and no return
//   returned            an UndeliverableEnvelope came back with an exact failure: not delivered
//                       (DialFailed, ActorNotExist, ChannelClosed after server_stopping, …)
//   possibly delivered  a return that may or may not have been delivered (return_kinds.h:
//                       AckTimedOut, ChannelClosed "written, never acked"), with or without a reply
//   lost with its proc  neither, and its target proc (or the proc of the relay it went through)
//                       died (kill -9, SIGTERM) while it was open,
//                       `grace` or more before the end: acked by the channel ("enqueued at the
//                       receiving proc", R-CHAN-1) or handled there, then the proc died before
//                       its reply (or its return) left — nobody can return it: the envelope
//                       lived in the dead process
//   contradicted        a reply and an exact return: a return that lied (a bug)
//   uncounted           none of these at the end: a silent loss (a bug)
//
// Duplicates are counted on arrival: a second reply for one id (a payload handled twice), and a
// second return for one id (a failure reported twice). The consumer keeps no memory — a killed
// echo loses it — so the ledger, which lives in the soak process that is never killed, is where
// duplicates are seen: the echo answers once per payload it handles, and two answers are two
// handlings.
//
// Thread safety: every member takes the ledger's mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "postal/runtime/delivery_failure.h"

namespace postal::tools {

struct SoakCounts {
  uint64_t sent = 0;
  uint64_t delivered = 0;
  uint64_t returned = 0;
  std::map<std::string, uint64_t> returned_by_kind;
  uint64_t possibly_delivered = 0;
  uint64_t possibly_then_delivered = 0;  // of those, a reply came too
  std::map<std::string, uint64_t> possibly_by_kind;
  uint64_t lost_with_proc = 0;
  uint64_t contradicted = 0;
  uint64_t duplicate_replies = 0;
  uint64_t duplicate_returns = 0;
  std::string first_duplicate;  // what the first duplicate return was: id, first and second kind
  uint64_t late = 0;       // resolved after being counted lost (moved to their true state)
  uint64_t open = 0;       // not yet in a final state (while running)
  uint64_t uncounted = 0;  // open at the end, never touched by a death
  uint64_t unknown = 0;    // replies or returns for ids never sent (a bug)
  uint64_t relayed_returns = 0;  // returns relays reported for the copies they forwarded

  uint64_t duplicates() const { return duplicate_replies + duplicate_returns; }
  // Every id in exactly one final state (or still open).
  bool balanced() const {
    return sent == delivered + returned + possibly_delivered + lost_with_proc + contradicted +
                       open + uncounted;
  }
  bool pass() const {
    return duplicates() == 0 && uncounted == 0 && contradicted == 0 && unknown == 0 && balanced();
  }
};

class SoakLedger {
 public:
  static constexpr uint32_t kDirect = 0xffff;  // `via` of a payload sent straight to its echo
  // A new id for a payload sent to `target`'s incarnation `incarnation`, through the relay on
  // proc `via` (or kDirect).
  uint64_t sent(uint32_t target, uint32_t incarnation, uint32_t via = kDirect);
  void replied(uint64_t id);
  // A return: of the soak's own envelope (`relayed` false), or of the copy a relay forwarded,
  // reported by the relay (true). Each hop's envelope returns at most once; a payload can come
  // back from both hops only when the first return was "possibly delivered" (it was, to the
  // relay, which forwarded it).
  void returned(uint64_t id, const runtime::DeliveryFailure& root, bool relayed = false);
  // Proc `target`'s incarnation `incarnation` died at `at`: every id open for it — sent to its
  // echo or through its relay — may be lost with it (see the .cc for why not only that
  // incarnation's).
  void proc_died(uint32_t target, uint32_t incarnation, absl::Time at);
  // Ids open `grace` after their incarnation died are lost with their proc (a later reply or
  // return still moves them: `late`).
  void expire(absl::Time now, absl::Duration grace);
  // Ids sent to `target` and in no final state (a window's worth at most).
  size_t in_flight(uint32_t target) const;
  size_t open() const;
  // The counts; with `final`, open ids become uncounted.
  SoakCounts counts(bool final) const;

 private:
  enum class State : uint8_t { kOpen, kDelivered, kReturned, kPossibly, kLost, kContradicted };
  enum class Ret : uint8_t { kNone, kExact, kPossibly };
  // What was seen for an id; its state is derived from these (`state_of`).
  struct Entry {
    uint32_t incarnation = 0;
    uint16_t target = 0;
    uint16_t via = kDirect;
    uint8_t replies = 0;      // saturating
    Ret own = Ret::kNone;     // the return of the soak's envelope
    Ret relayed = Ret::kNone;  // the return of the relay's copy
    uint16_t own_kind = 0;    // indexes into kinds_
    uint16_t relayed_kind = 0;
    bool open = true;   // unresolved, in open_ (and open_via_)
    bool died = false;  // a proc it depended on died while it was open
    bool lost = false;  // counted lost with its proc (until a late answer)
  };
  State state_of(const Entry& e, bool final) const;
  void resolve(uint64_t id, Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint16_t kind_index(const std::string& kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);  // by id
  std::vector<absl::flat_hash_set<uint64_t>> open_ ABSL_GUARDED_BY(mu_);      // by target
  std::vector<absl::flat_hash_set<uint64_t>> open_via_ ABSL_GUARDED_BY(mu_);  // by relay proc
  std::deque<std::pair<uint64_t, absl::Time>> dying_ ABSL_GUARDED_BY(mu_);  // id, death
  std::vector<std::string> kinds_ ABSL_GUARDED_BY(mu_);
  uint64_t duplicate_replies_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t duplicate_returns_ ABSL_GUARDED_BY(mu_) = 0;
  std::string first_duplicate_ ABSL_GUARDED_BY(mu_);
  uint64_t late_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t unknown_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t relayed_returns_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace postal::tools
