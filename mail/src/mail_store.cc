#include "postal/mail/mail_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

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

absl::StatusOr<std::vector<StoredMessage>> MailStore::read_unsettled(std::string_view id,
                                                                     std::string_view group,
                                                                     uint64_t through) {
  absl::StatusOr<std::vector<uint64_t>> marks = settled(id, group);
  if (!marks.ok()) return marks.status();
  absl::StatusOr<std::vector<StoredMessage>> all = read_all(id, through);
  if (!all.ok() || marks->empty()) return all;
  std::erase_if(*all, [&](const StoredMessage& m) {
    return std::binary_search(marks->begin(), marks->end(), m.seq);
  });
  return all;
}

absl::Status check_queue_group(std::string_view group) {
  if (group.empty() || group.size() > kMaxQueueGroupBytes ||
      group.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "queue group name of ", group.size(), " bytes is invalid; a queue group is named by 1 to ",
        kMaxQueueGroupBytes, " bytes without NUL"));
  }
  return absl::OkStatus();
}

}  // namespace postal::mail
