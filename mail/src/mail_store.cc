#include "postal/mail/mail_store.h"

#include <utility>

namespace postal::mail {

std::string_view to_string(Priority priority) {
  switch (priority) {
    case Priority::kCritical:
      return "critical";
    case Priority::kUrgent:
      return "urgent";
    case Priority::kNormal:
      break;
  }
  return "normal";
}

std::optional<Priority> parse_priority(std::string_view text) {
  for (Priority p : kPrioritiesHighFirst) {
    if (text == to_string(p)) return p;
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<StoredMessage>> MailStore::read_all(std::string_view id,
                                                               uint64_t through) {
  std::vector<StoredMessage> all;
  for (Priority p : kPrioritiesHighFirst) {
    LaneRange range{.priority = p, .after = 0, .through = through};
    while (true) {
      absl::StatusOr<std::vector<StoredMessage>> page = read(id, range);
      if (!page.ok()) return page.status();
      if (page->empty()) break;
      range.after = page->back().seq;
      for (StoredMessage& m : *page) all.push_back(std::move(m));
    }
  }
  return all;
}

}  // namespace postal::mail
