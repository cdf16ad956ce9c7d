#include "soak_ledger.h"

#include "postal/routing/return_kinds.h"

namespace postal::tools {

uint64_t SoakLedger::sent(uint32_t target, uint32_t incarnation) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = entries_.size();
  Entry e;
  e.target = static_cast<uint16_t>(target);
  e.incarnation = incarnation;
  entries_.push_back(e);
  if (open_.size() <= target) open_.resize(target + 1);
  open_[target].insert(id);
  return id;
}

void SoakLedger::close(uint64_t id, Entry& e, State s) {
  if (e.state == State::kOpen) open_[e.target].erase(id);
  e.state = s;
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
  switch (e.state) {
    case State::kOpen: close(id, e, State::kDelivered); break;
    case State::kReturned: e.state = State::kContradicted; break;  // "not delivered" lied
    case State::kPossibly: break;                                  // it was, after all
    case State::kLost:
      ++late_;
      e.state = State::kDelivered;
      break;
    case State::kDelivered:
    case State::kContradicted: break;
  }
}

void SoakLedger::returned(uint64_t id, const runtime::DeliveryFailure& root) {
  absl::MutexLock lock(&mu_);
  if (id >= entries_.size()) {
    ++unknown_;
    return;
  }
  Entry& e = entries_[id];
  if (e.returns < 255) ++e.returns;
  if (e.returns > 1) {  // one envelope, two failures
    ++duplicate_returns_;
    return;
  }
  e.possibly = routing::possibly_delivered(root);
  e.kind = kind_index(routing::return_kind(root));
  const State returned = e.possibly ? State::kPossibly : State::kReturned;
  switch (e.state) {
    case State::kOpen: close(id, e, returned); break;
    case State::kDelivered: e.state = e.possibly ? State::kPossibly : State::kContradicted; break;
    case State::kLost:
      ++late_;
      e.state = returned;
      break;
    case State::kReturned:
    case State::kPossibly:
    case State::kContradicted: break;
  }
}

void SoakLedger::proc_died(uint32_t target, uint32_t incarnation, absl::Time at) {
  absl::MutexLock lock(&mu_);
  if (target >= open_.size()) return;
  for (uint64_t id : open_[target]) {
    Entry& e = entries_[id];
    // Anything open for this target may have died with it, whichever incarnation it was sent
    // to: a restarted echo has the same address (a singleton uid), so a payload sent while the
    // old one was dying can reach the new one, and a return can be held by the proc that died.
    (void)incarnation;
    if (e.died) continue;
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
    if (e.state == State::kOpen) close(id, e, State::kLost);
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
    switch (e.state) {
      case State::kOpen:
        if (!final) {
          ++c.open;
        } else if (e.died) {
          ++c.lost_with_proc;
        } else {
          ++c.uncounted;
        }
        break;
      case State::kDelivered: ++c.delivered; break;
      case State::kReturned:
        ++c.returned;
        ++c.returned_by_kind[kinds_[e.kind]];
        break;
      case State::kPossibly:
        ++c.possibly_delivered;
        ++c.possibly_by_kind[kinds_[e.kind]];
        if (e.replies > 0) ++c.possibly_then_delivered;
        break;
      case State::kLost: ++c.lost_with_proc; break;
      case State::kContradicted: ++c.contradicted; break;
    }
  }
  c.duplicate_replies = duplicate_replies_;
  c.duplicate_returns = duplicate_returns_;
  c.late = late_;
  c.unknown = unknown_;
  return c;
}

}  // namespace postal::tools
