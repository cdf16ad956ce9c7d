// The strand side of RetainedMailboxes: replay, live delivery with de-duplication against the
// replay, the byte re-check, ending and closing a subscription.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "postal/runtime/logger.h"
#include "retained_core.h"

namespace postal::mail::retained_internal {
namespace {

// M-BOX-6: receive re-checks the byte bound; a message failing it stays in the store untouched.
bool fits(const Sub& sub, const std::string& body) {
  if (sub.max_message_bytes == 0 || body.size() <= sub.max_message_bytes) return true;
  runtime::Logger::mail().warn(absl::StrCat(
      "retained mailbox '", sub.mailbox, "': a stored message of ", body.size(),
      " bytes exceeds maxMessageBytes ", sub.max_message_bytes, "; not delivered, left stored"));
  return false;
}

RetainedMessage to_retained(const Sub& sub, StoredMessage m) {
  return RetainedMessage{.mailbox = sub.mailbox,
                         .seq = m.seq,
                         .priority = m.priority,
                         .stored_at = m.stored_at,
                         .body = std::move(m.body)};
}

// Hands `message` to a group member's handler and records what settles it (M-RECV-4).
void deliver_in_group(Sub& sub, const RetainedMessage& message) {
  const Disposition outcome = sub.handler(message);
  sub.delivered.fetch_add(1);
  if (outcome == Disposition::kUnhandled) return;  // the group's next lifetime gets it again
  GroupLedger& ledger = *sub.ledger;
  if (absl::Status s = ledger.store->settle(sub.mailbox, ledger.name, {message.seq}); !s.ok()) {
    // Unsettled, it comes back when the group forms anew: at least once, never lost.
    runtime::Logger::mail().warn(absl::StrCat("retained mailbox '", sub.mailbox,
                                              "': queue group '", ledger.name,
                                              "' could not settle message ", message.seq, ": ",
                                              s.ToString()));
  }
}

}  // namespace

bool GroupLedger::claim(uint64_t seq) {
  if (seq > replay_through) return true;  // live: routed to exactly one member
  absl::MutexLock lock(&mu);
  return taken.insert(seq).second;
}

bool GroupLedger::replay_done() {
  absl::MutexLock lock(&mu);
  return replayed;
}

void GroupLedger::finish_replay() {
  absl::MutexLock lock(&mu);
  replayed = true;
}

void Sub::close() {
  absl::MutexLock lock(&mu);
  closed = true;
  if (running && runner != std::this_thread::get_id())
    mu.Await(absl::Condition(
        +[](Sub* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return !s->running; }, this));
}

// DeliverPolicy::kLast: only the one most recently stored, whatever its priority.
void keep_newest(std::vector<StoredMessage>& stored) {
  if (stored.size() <= 1) return;
  auto newest = std::max_element(
      stored.begin(), stored.end(),
      [](const StoredMessage& a, const StoredMessage& b) { return a.seq < b.seq; });
  StoredMessage keep = std::move(*newest);
  stored.clear();
  stored.push_back(std::move(keep));
}

void replay(Sub& sub, MailStore& store) {
  absl::StatusOr<std::vector<StoredMessage>> stored =
      store.read_all(sub.mailbox, sub.replay_through);
  if (!stored.ok()) return;  // removed meanwhile: its end task follows
  if (sub.deliver == DeliverPolicy::kLast) keep_newest(*stored);
  for (StoredMessage& m : *stored) {
    {
      absl::MutexLock lock(&sub.mu);
      if (sub.closed) return;
    }
    sub.replayed.insert(m.seq);
    if (!fits(sub, m.body)) continue;
    (void)sub.handler(to_retained(sub, std::move(m)));  // plain: the store keeps it regardless
    sub.delivered.fetch_add(1);
  }
}

// A named group's replay: what is stored up to the group's snapshot, skipping what a member of
// this lifetime had (settled before or handed out since), so a member taking over the replay of
// one that left delivers only the rest.
void replay_group(Sub& sub) {
  GroupLedger& ledger = *sub.ledger;
  absl::StatusOr<std::vector<StoredMessage>> stored =
      ledger.store->read_all(sub.mailbox, ledger.replay_through);
  if (!stored.ok()) return;  // removed meanwhile: its end task follows
  if (ledger.deliver == DeliverPolicy::kLast) keep_newest(*stored);
  for (StoredMessage& m : *stored) {
    {
      absl::MutexLock lock(&sub.mu);
      if (sub.closed) return;  // unfinished: another member takes over (Core::remove_sub)
    }
    if (!fits(sub, m.body) || !ledger.claim(m.seq)) continue;
    deliver_in_group(sub, to_retained(sub, std::move(m)));
  }
  ledger.finish_replay();
}

void deliver(Sub& sub, const RetainedMessage& message) {
  if (sub.ledger != nullptr) {
    // Up to the snapshot only the replay hands out under kNew and kLast (M-KIND-3); under kAll
    // the first member of this lifetime to have it delivers it.
    if (message.seq <= sub.ledger->replay_through &&
        sub.ledger->deliver != DeliverPolicy::kAll) {
      return;
    }
    if (!fits(sub, message.body) || !sub.ledger->claim(message.seq)) return;
    return deliver_in_group(sub, message);
  }
  // M-KIND-2: a live message the replay already delivered is not delivered twice. Under kNew
  // and kLast, what was stored up to the snapshot is the replay's alone to hand out (M-KIND-3).
  if (message.seq <= sub.replay_through &&
      (sub.deliver != DeliverPolicy::kAll || sub.replayed.erase(message.seq) > 0)) {
    return;
  }
  if (!fits(sub, message.body)) return;
  (void)sub.handler(message);
  sub.delivered.fetch_add(1);
}

}  // namespace postal::mail::retained_internal
