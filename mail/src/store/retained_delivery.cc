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

}  // namespace

void Sub::close() {
  absl::MutexLock lock(&mu);
  closed = true;
  if (running && runner != std::this_thread::get_id())
    mu.Await(absl::Condition(
        +[](Sub* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return !s->running; }, this));
}

void replay(Sub& sub, MailStore& store) {
  absl::StatusOr<std::vector<StoredMessage>> stored =
      store.read_all(sub.mailbox, sub.replay_through);
  if (!stored.ok()) return;  // removed meanwhile: its end task follows
  if (sub.deliver == DeliverPolicy::kLast && stored->size() > 1) {
    // The one most recently stored, whatever its priority.
    auto newest = std::max_element(
        stored->begin(), stored->end(),
        [](const StoredMessage& a, const StoredMessage& b) { return a.seq < b.seq; });
    StoredMessage keep = std::move(*newest);
    stored->clear();
    stored->push_back(std::move(keep));
  }
  for (StoredMessage& m : *stored) {
    {
      absl::MutexLock lock(&sub.mu);
      if (sub.closed) return;
    }
    sub.replayed.insert(m.seq);
    if (!fits(sub, m.body)) continue;
    sub.handler(RetainedMessage{.mailbox = sub.mailbox,
                                .seq = m.seq,
                                .priority = m.priority,
                                .stored_at = m.stored_at,
                                .body = std::move(m.body)});
    sub.delivered.fetch_add(1);
  }
}

void deliver(Sub& sub, const RetainedMessage& message) {
  // M-KIND-2: a live message the replay already delivered is not delivered twice. Under kNew
  // and kLast, what was stored up to the snapshot is the replay's alone to hand out (M-KIND-3).
  if (message.seq <= sub.replay_through &&
      (sub.deliver != DeliverPolicy::kAll || sub.replayed.erase(message.seq) > 0)) {
    return;
  }
  if (!fits(sub, message.body)) return;
  sub.handler(message);
  sub.delivered.fetch_add(1);
}

}  // namespace postal::mail::retained_internal
