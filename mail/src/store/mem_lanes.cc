#include "mem_lanes.h"

#include <algorithm>

namespace postal::mail::store {
namespace {

size_t index(Priority p) { return static_cast<size_t>(p); }

// The first message of `lane` with a sequence number above `seq`.
template <class Lane>
auto first_after(Lane& lane, uint64_t seq) {
  return std::upper_bound(lane.begin(), lane.end(), seq,
                          [](uint64_t s, const StoredMessage& m) { return s < m.seq; });
}

}  // namespace

void MemLanes::append(std::string_view mailbox, StoredMessage message) {
  auto it = lanes_.find(mailbox);
  if (it == lanes_.end()) it = lanes_.emplace(std::string(mailbox), std::array<Lane, 3>{}).first;
  it->second[index(message.priority)].push_back(std::move(message));
}

std::vector<StoredMessage> MemLanes::read(std::string_view mailbox, const LaneRange& range) const {
  std::vector<StoredMessage> out;
  auto it = lanes_.find(mailbox);
  if (it == lanes_.end()) return out;
  const Lane& lane = it->second[index(range.priority)];
  for (auto m = first_after(lane, range.after);
       m != lane.end() && m->seq <= range.through && out.size() < range.limit; ++m) {
    out.push_back(*m);
  }
  return out;
}

bool MemLanes::erase(std::string_view mailbox, uint64_t seq) {
  auto it = lanes_.find(mailbox);
  if (it == lanes_.end()) return false;
  for (Lane& lane : it->second) {
    auto m = first_after(lane, seq - 1);
    if (m != lane.end() && m->seq == seq) {
      lane.erase(m);
      return true;
    }
  }
  return false;
}

bool MemLanes::contains(std::string_view mailbox, uint64_t seq) const {
  auto it = lanes_.find(mailbox);
  if (it == lanes_.end() || seq == 0) return false;
  for (const Lane& lane : it->second) {
    auto m = first_after(lane, seq - 1);
    if (m != lane.end() && m->seq == seq) return true;
  }
  return false;
}

uint64_t MemLanes::consume_through(std::string_view mailbox, Priority priority, uint64_t seq,
                                   std::vector<uint64_t>* removed) {
  auto it = lanes_.find(mailbox);
  if (it == lanes_.end()) return 0;
  Lane& lane = it->second[index(priority)];
  const auto end = first_after(lane, seq);
  if (removed != nullptr) {
    for (auto m = lane.begin(); m != end; ++m) removed->push_back(m->seq);
  }
  const auto n = static_cast<uint64_t>(end - lane.begin());
  lane.erase(lane.begin(), end);
  return n;
}

uint64_t MemLanes::count(std::string_view mailbox) const {
  auto it = lanes_.find(mailbox);
  if (it == lanes_.end()) return 0;
  uint64_t n = 0;
  for (const Lane& lane : it->second) n += lane.size();
  return n;
}

void MemLanes::drop(std::string_view mailbox) {
  auto it = lanes_.find(mailbox);
  if (it != lanes_.end()) lanes_.erase(it);
}

}  // namespace postal::mail::store
