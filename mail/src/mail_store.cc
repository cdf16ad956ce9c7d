#include "postal/mail/mail_store.h"

#include <utility>

namespace postal::mail {

void MailStore::append_async(std::string_view id, Priority priority, std::string body,
                             AppendDone done, AppendAsync /*how*/) {
  std::move(done)(append(id, priority, std::move(body)));
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
