#include "settle_marks.h"

#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::store {

absl::Status settling_groups_exhausted(std::string_view mailbox, std::string_view group,
                                       size_t max_groups) {
  return BudgetExhaustedError(absl::StrCat(
      "queue group '", sv(group), "' cannot settle in mailbox '", sv(mailbox), "': ", max_groups,
      " queue groups already hold settlement marks there (StoreLimits::max_settling_groups); "
      "reuse a group name or raise the limit (M-RECV-4)"));
}

absl::Status SettleMarks::settle(std::string_view mailbox, std::string_view group,
                                 const std::vector<uint64_t>& seqs, size_t max_groups,
                                 const std::function<bool(uint64_t)>& held) {
  auto box = marks_.find(mailbox);
  const bool known = box != marks_.end() && box->second.contains(group);
  if (!known && box != marks_.end() && box->second.size() >= max_groups) {
    return settling_groups_exhausted(mailbox, group, max_groups);
  }
  std::vector<uint64_t> kept;
  for (uint64_t seq : seqs) {
    if (held(seq)) kept.push_back(seq);
  }
  if (kept.empty()) return absl::OkStatus();
  if (box == marks_.end()) box = marks_.emplace(std::string(mailbox), Groups{}).first;
  auto g = box->second.find(group);
  if (g == box->second.end())
    g = box->second.emplace(std::string(group), std::set<uint64_t>{}).first;
  g->second.insert(kept.begin(), kept.end());
  return absl::OkStatus();
}

std::vector<uint64_t> SettleMarks::settled(std::string_view mailbox, std::string_view group) const {
  auto box = marks_.find(mailbox);
  if (box == marks_.end()) return {};
  auto g = box->second.find(group);
  if (g == box->second.end()) return {};
  return {g->second.begin(), g->second.end()};
}

std::set<std::string, std::less<>> SettleMarks::groups(std::string_view mailbox) const {
  std::set<std::string, std::less<>> out;
  auto box = marks_.find(mailbox);
  if (box == marks_.end()) return out;
  for (const auto& [name, seqs] : box->second) out.insert(name);
  return out;
}

void SettleMarks::forget(std::string_view mailbox, uint64_t seq) {
  auto box = marks_.find(mailbox);
  if (box == marks_.end()) return;
  for (auto g = box->second.begin(); g != box->second.end();) {
    g->second.erase(seq);
    // A group whose last mark went no longer counts against max_groups.
    g = g->second.empty() ? box->second.erase(g) : std::next(g);
  }
  if (box->second.empty()) marks_.erase(box);
}

void SettleMarks::drop(std::string_view mailbox) {
  if (auto box = marks_.find(mailbox); box != marks_.end()) marks_.erase(box);
}

}  // namespace postal::mail::store
