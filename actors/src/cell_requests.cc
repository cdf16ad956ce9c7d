// ActorCell's event-based requests (R-ACT-10, pending_request.h). A reply port's sink forwards
// the reply — or a ReplyFailed for a bounced request — into the actor's own queue, so its
// continuation runs on the actor like a handler. The first outcome wins; the port is closed
// then, so a later reply gets PortGone.
//
// Cost per request (the Savina Banking `then` row has ~50,000 outstanding at once): every reply
// port of an incarnation shares one sink, and the deadlines are the cell's own min-heap, read and
// written on its runner only, with one proc timer armed for the earliest of them. Opening a
// request therefore takes no lock of its own besides the mailbox's port table and no proc timer;
// completing one touches no timer either (its heap entry goes stale and is skipped). When the
// armed timer fires it queues one deadline check (an envelope to the reserved port index
// kDeadlineCheck), which fails every request past its deadline with DeadlineExceeded, closes its
// port, and arms the timer for the next deadline.
//
// The sink reaches the cell through a pointer the cell clears (under the sink's lock) before it
// restarts or ends, so nothing is pushed into a cell that no longer expects it; a new incarnation
// gets a new sink.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "actor_cell.h"

namespace postal::actors::internal {

using runtime::EnvelopePtr;
using runtime::MessageEnvelope;

namespace {
// Never allocated (indexes count up from 0, R-PORT-1): the deadline check's port.
constexpr uint64_t kDeadlineCheck = ~uint64_t{0};

bool later(const std::pair<absl::Time, uint64_t>& a, const std::pair<absl::Time, uint64_t>& b) {
  return a > b;  // std::*_heap with it: a min-heap on (deadline, index)
}
}  // namespace

class ReplySink final : public runtime::PortSink {
 public:
  ReplySink(ActorCell* cell, runtime::ActorAddr owner) : cell_(cell), owner_(std::move(owner)) {}

  void deliver(EnvelopePtr env) override {
    absl::MutexLock lock(&mu_);
    if (cell_ != nullptr) cell_->deliver(std::move(env));
  }
  // A bounced request (Mailbox::complete_failed_request): its port is closed already.
  void fail_port(uint64_t index, const runtime::DeliveryFailure& failure) override {
    deliver_failed(index, absl::UnavailableError(failure.to_string()));
  }
  // The armed deadline passed: the cell checks its deadlines on its runner.
  void check_deadlines() {
    deliver_failed(kDeadlineCheck, absl::DeadlineExceededError("a reply's deadline passed"));
  }
  void detach() {
    absl::MutexLock lock(&mu_);
    cell_ = nullptr;
  }

 private:
  void deliver_failed(uint64_t index, const absl::Status& status) {
    runtime::PortAddr port = owner_.port(runtime::Port::ephemeral(index));
    deliver(MessageEnvelope::make(port.actor_addr(), port,
                                  wire::Any::make(ReplyFailed{static_cast<int>(status.code()),
                                                              std::string(status.message())}),
                                  1));
  }

  absl::Mutex mu_;
  ActorCell* cell_ ABSL_GUARDED_BY(mu_);
  const runtime::ActorAddr owner_;
};

runtime::PortAddr ActorCell::open_reply(uint64_t type_hash, runtime::DecodeFn decode,
                                        absl::Duration timeout, ReplyContinuation cont,
                                        uint64_t* index) {
  if (!requests_) requests_ = std::make_unique<Requests>();
  Requests& r = *requests_;
  if (!r.sink) r.sink = std::make_shared<ReplySink>(this, addr_);
  *index = mailbox_->open_port(type_hash, decode, r.sink, /*once=*/true);
  const absl::Time deadline = proc_.now() + timeout;
  r.replies.emplace(*index, PendingReply{std::move(cont), timeout});
  // Stale entries (answered requests) are dropped at the top or, past twice the pending ones,
  // by a rebuild: O(pending), amortized over the answers.
  if (r.deadlines.size() >= 2 * r.replies.size() + 64) {
    std::erase_if(r.deadlines, [&](const auto& d) { return !r.replies.contains(d.second); });
    std::make_heap(r.deadlines.begin(), r.deadlines.end(), later);
  }
  r.deadlines.emplace_back(deadline, *index);
  std::push_heap(r.deadlines.begin(), r.deadlines.end(), later);
  arm_deadline(deadline);
  return mailbox_->port_addr(runtime::Port::ephemeral(*index));
}

// One proc timer for the earliest deadline: re-armed only when a deadline goes ahead of it.
void ActorCell::arm_deadline(absl::Time deadline) {
  Requests& r = *requests_;  // made by the request whose deadline this is
  if (deadline >= r.armed_deadline) return;
  if (r.deadline_timer != 0) proc_.timers().cancel(r.deadline_timer);
  r.armed_deadline = deadline;
  std::weak_ptr<ReplySink> weak = r.sink;  // 16 bytes: std::function keeps it inline
  r.deadline_timer = proc_.timers().schedule(deadline, [weak] {
    if (std::shared_ptr<ReplySink> s = weak.lock()) s->check_deadlines();
  });
}

bool ActorCell::expire_replies() {
  if (!requests_) return true;
  Requests& r = *requests_;
  const absl::Time now = proc_.now();
  if (r.armed_deadline <= now) {  // the armed timer fired (a check of an earlier one may be late)
    proc_.timers().cancel(r.deadline_timer);
    r.deadline_timer = 0;
    r.armed_deadline = absl::InfiniteFuture();
  }
  while (!r.deadlines.empty()) {
    const auto [deadline, index] = r.deadlines.front();
    auto it = r.replies.find(index);
    if (it != r.replies.end() && deadline > now) {
      arm_deadline(deadline);
      return true;
    }
    std::pop_heap(r.deadlines.begin(), r.deadlines.end(), later);
    r.deadlines.pop_back();
    if (it == r.replies.end()) continue;  // answered: a stale entry
    PendingReply pending = std::move(it->second);
    r.replies.erase(it);
    mailbox_->close_port(index);  // a reply after the timeout gets PortGone
    absl::Status s = guarded([&] {
      return pending.cont(*this, nullptr,
                          absl::DeadlineExceededError(absl::StrCat(
                              "no reply within ", absl::FormatDuration(pending.timeout))));
    });
    if (!s.ok()) {
      current_ = nullptr;
      return on_failure(s.ToString());
    }
  }
  return true;
}

bool ActorCell::complete_reply(EnvelopePtr env) {
  const uint64_t index = env->dest().id.port.value();
  current_ = env.get();
  if (index == kDeadlineCheck) {
    if (!expire_replies()) return false;  // the slice ended: touch nothing
    current_ = nullptr;
    return true;
  }
  if (!requests_) {  // no request was ever made: nothing waits for it
    current_ = nullptr;
    return true;
  }
  Requests& r = *requests_;
  auto it = r.replies.find(index);
  if (it == r.replies.end()) {  // an outcome after the first: nothing waits for it
    current_ = nullptr;
    return true;
  }
  PendingReply pending = std::move(it->second);
  r.replies.erase(it);
  // A reply and a bounce both came through the once port, which closed it (R-MBX-5); its
  // deadline entry goes stale.
  absl::Status s = guarded([&] {
    if (const ReplyFailed* f = env->data().get<ReplyFailed>()) {
      return pending.cont(*this, nullptr,
                          absl::Status(static_cast<absl::StatusCode>(f->code), f->message));
    }
    return pending.cont(*this, &env->data(), absl::OkStatus());
  });
  current_ = nullptr;
  if (!s.ok()) return on_failure(s.ToString());
  return true;
}

void ActorCell::drop_replies() {
  if (!requests_) return;
  Requests& r = *requests_;  // emptied, not freed: a continuation running now still uses it
  if (r.deadline_timer != 0) proc_.timers().cancel(r.deadline_timer);
  r.deadline_timer = 0;
  r.armed_deadline = absl::InfiniteFuture();
  r.deadlines.clear();
  if (r.sink) r.sink->detach();
  r.sink.reset();  // the next incarnation's ports get a sink of their own
  for (auto& [index, pending] : r.replies) mailbox_->close_port(index);
  r.replies.clear();
}

}  // namespace postal::actors::internal
