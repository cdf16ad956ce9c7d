// settle_marks.h — `SettleMarks`: which messages each queue group of a mailbox settled
// (M-RECV-4), in memory: `MemMailStore`'s marks. Not thread-safe: the owner locks.
//
// A mark names (mailbox, group, seq). The owner drops marks with their messages (`forget`,
// `drop`), so they never outlive what they mark; `settle` refuses a group new to a mailbox
// once `max_groups` groups hold marks there.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace postal::mail::store {

class SettleMarks {
 public:
  // Marks each seq of `seqs` for which `held(seq)` is true. BudgetExhausted (nothing marked)
  // when `group` holds no mark in `mailbox` and `max_groups` groups already do — also for an
  // empty `seqs`, which only checks that the group may settle.
  absl::Status settle(std::string_view mailbox, std::string_view group,
                      const std::vector<uint64_t>& seqs, size_t max_groups,
                      const std::function<bool(uint64_t)>& held);
  std::vector<uint64_t> settled(std::string_view mailbox, std::string_view group) const;
  // The groups holding marks in `mailbox`.
  std::set<std::string, std::less<>> groups(std::string_view mailbox) const;
  // Drops every group's mark of `seq` in `mailbox`.
  void forget(std::string_view mailbox, uint64_t seq);
  void drop(std::string_view mailbox);

 private:
  using Groups = std::map<std::string, std::set<uint64_t>, std::less<>>;
  std::map<std::string, Groups, std::less<>> marks_;
};

// The error of a settle past `max_groups` (shared with the SQLite store).
absl::Status settling_groups_exhausted(std::string_view mailbox, std::string_view group,
                                       size_t max_groups);

}  // namespace postal::mail::store
