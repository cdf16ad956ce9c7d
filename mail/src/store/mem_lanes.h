// mem_lanes.h — `MemLanes`: append-ordered lanes per (mailbox, priority) in memory.
//
// The message storage of `MemMailStore`, and of `SqliteMailStore` for the messages it does not
// make durable (M-PRIO-2). Sequence numbers must be appended in increasing order per lane, so a
// lane is sorted and ranges are found by binary search. Not thread-safe: the owner locks.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "postal/mail/mail_store.h"

namespace postal::mail::store {

class MemLanes {
 public:
  void append(std::string_view mailbox, StoredMessage message);
  std::vector<StoredMessage> read(std::string_view mailbox, const LaneRange& range) const;
  bool erase(std::string_view mailbox, uint64_t seq);
  bool contains(std::string_view mailbox, uint64_t seq) const;
  // Removes the lane's prefix through `seq`; how many. `removed` (optional) gets their seqs.
  uint64_t consume_through(std::string_view mailbox, Priority priority, uint64_t seq,
                           std::vector<uint64_t>* removed = nullptr);
  uint64_t count(std::string_view mailbox) const;
  void drop(std::string_view mailbox);

 private:
  using Lane = std::deque<StoredMessage>;
  std::map<std::string, std::array<Lane, 3>, std::less<>> lanes_;
};

}  // namespace postal::mail::store
