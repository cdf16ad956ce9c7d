#include "soak_ledger.h"

#include <algorithm>

#include "postal/routing/return_kinds.h"

namespace postal::tools {

uint64_t SoakLedger::sent(uint32_t target, uint32_t incarnation, uint32_t via) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = entries_.size();
  Entry e;
  e.target = static_cast<uint16_t>(target);
  e.via = static_cast<uint16_t>(via);
  e.incarnation = incarnation;
  entries_.push_back(e);
  const size_t procs = std::max<size_t>(target, via == kDirect ? 0 : via) + 1;
  if (open_.size() < procs) open_.resize(procs);
  if (open_via_.size() < procs) open_via_.resize(procs);
  open_[target].insert(id);
  if (via != kDirect) open_via_[via].insert(id);
  return id;
}

void SoakLedger::resolve(uint64_t id, Entry& e) {
  if (e.lost) {  // an answer after the grace: the id moves to its true state
    ++late_;
    e.lost = false;
  }
  if (!e.open) return;
  e.open = false;
  open_[e.target].erase(id);
  if (e.via != kDirect) open_via_[e.via].erase(id);
}

uint16_t SoakLedger::kind_index(const std::string& kind) {
  for (size_t i = 0; i < kinds_.size(); ++i) {
    if (kinds_[i] == kind) return static_cast<uint16_t>(i);
  }
  kinds_.push_back(kind);
  return static_cast<uint16_t>(kinds_.size() - 1);
}

void SoakLedger::replied(uint64_t id) {
  absl::MutexLock lock(&mu_);
  if (id >= entries_.size()) {
    ++unknown_;
    return;
  }
  Entry& e = entries_[id];
  if (e.replies < 255) ++e.replies;
  if (e.replies > 1) {  // the echo handled this payload twice
    ++duplicate_replies_;
    return;
  }
  resolve(id, e);
}

void SoakLedger::returned(uint64_t id, const runtime::DeliveryFailure& root, bool relayed) {
  absl::MutexLock lock(&mu_);
  if (id >= entries_.size()) {
    ++unknown_;
    return;
  }
  Entry& e = entries_[id];
  Ret& ret = relayed ? e.relayed : e.own;
  if (ret != Ret::kNone) {  // one envelope, two failures
    if (duplicate_returns_++ == 0) {
      first_duplicate_ = absl::StrCat("payload ", id, relayed ? " (a relay's copy)" : "", ": ",
                                      kinds_[relayed ? e.relayed_kind : e.own_kind], ", then ",
                                      routing::return_kind(root), ": ", root.to_string());
    }
    return;
  }
  if (relayed) ++relayed_returns_;
  ret = routing::possibly_delivered(root) ? Ret::kPossibly : Ret::kExact;
  (relayed ? e.relayed_kind : e.own_kind) = kind_index(routing::return_kind(root));
  resolve(id, e);
}

SoakLedger::State SoakLedger::state_of(const Entry& e, bool final) const {
  const bool reply = e.replies > 0;
  const bool own_exact = e.own == Ret::kExact, relayed_exact = e.relayed == Ret::kExact;
  // "Not delivered" lied: a reply came, or the relay had the payload after all.
  if ((reply && (own_exact || relayed_exact)) || (own_exact && e.relayed != Ret::kNone)) {
    return State::kContradicted;
  }
  if (reply) {
    return e.own == Ret::kNone && e.relayed == Ret::kNone ? State::kDelivered : State::kPossibly;
  }
  if (own_exact || relayed_exact) return State::kReturned;  // the relay's copy failed exactly
  if (e.own == Ret::kPossibly || e.relayed == Ret::kPossibly) return State::kPossibly;
  if (e.lost || (final && e.died)) return State::kLost;
  return State::kOpen;
}

void SoakLedger::proc_died(uint32_t target, uint32_t incarnation, absl::Time at) {
  absl::MutexLock lock(&mu_);
  if (target >= open_.size()) return;
  std::vector<uint64_t> open(open_[target].begin(), open_[target].end());
  open.insert(open.end(), open_via_[target].begin(), open_via_[target].end());
  for (uint64_t id : open) {
    Entry& e = entries_[id];
    // Anything open for this target may have died with it, whichever incarnation it was sent
    // to: a restarted echo has the same address (a singleton uid), so a payload sent while the
    // old one was dying can reach the new one, and a return can be held by the proc that died.
    (void)incarnation;
    if (e.died || !e.open) continue;
    e.died = true;
    dying_.emplace_back(id, at);
  }
}

void SoakLedger::expire(absl::Time now, absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  while (!dying_.empty() && dying_.front().second + grace <= now) {
    const uint64_t id = dying_.front().first;
    dying_.pop_front();
    Entry& e = entries_[id];
    if (!e.open) continue;
    resolve(id, e);
    e.lost = true;
  }
}

size_t SoakLedger::in_flight(uint32_t target) const {
  absl::MutexLock lock(&mu_);
  return target < open_.size() ? open_[target].size() : 0;
}

size_t SoakLedger::open() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& o : open_) n += o.size();
  return n;
}

SoakCounts SoakLedger::counts(bool final) const {
  absl::MutexLock lock(&mu_);
  SoakCounts c;
  c.sent = entries_.size();
  for (const Entry& e : entries_) {
    const uint16_t kind = e.relayed != Ret::kNone ? e.relayed_kind : e.own_kind;
    switch (state_of(e, final)) {
      case State::kOpen: ++(final ? c.uncounted : c.open); break;
      case State::kDelivered: ++c.delivered; break;
      case State::kReturned:
        ++c.returned;
        ++c.returned_by_kind[kinds_[e.relayed == Ret::kExact ? e.relayed_kind : e.own_kind]];
        break;
      case State::kPossibly:
        ++c.possibly_delivered;
        ++c.possibly_by_kind[kinds_[kind]];
        if (e.replies > 0) ++c.possibly_then_delivered;
        break;
      case State::kLost: ++c.lost_with_proc; break;
      case State::kContradicted: ++c.contradicted; break;
    }
  }
  c.duplicate_replies = duplicate_replies_;
  c.duplicate_returns = duplicate_returns_;
  c.first_duplicate = first_duplicate_;
  c.late = late_;
  c.unknown = unknown_;
  c.relayed_returns = relayed_returns_;
  return c;
}

}  // namespace postal::tools
