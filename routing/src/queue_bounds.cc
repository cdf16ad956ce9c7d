#include "queue_bounds.h"

#include <string>

namespace postal::routing::internal {

using runtime::DeliveryFailure;
using runtime::OverloadBound;

std::optional<DeliveryFailure> QueueBounds::admit(runtime::MessageEnvelope& env, uint64_t bytes) {
  env.set_held_bytes(bytes);
  bytes = env.held_bytes();  // what release will free
  const runtime::ActorId& dest = env.dest().id.actor;
  absl::MutexLock lock(&mu_);
  Held& mine = by_destination_[dest];
  std::optional<DeliveryFailure> full;
  auto refuse = [&](OverloadBound bound, uint64_t len, uint64_t max) {
    full = DeliveryFailure::overloaded(env.next_hop().to_string(), bound, len, max,
                                       "the channel's queue is full");
  };
  if (mine.messages >= limits_.max_destination_messages) {
    refuse(OverloadBound::kDestinationMessages, mine.messages, limits_.max_destination_messages);
  } else if (mine.bytes + bytes > limits_.max_destination_bytes) {
    refuse(OverloadBound::kDestinationBytes, mine.bytes, limits_.max_destination_bytes);
  } else if (total_.messages >= limits_.max_messages) {
    refuse(OverloadBound::kChannelMessages, total_.messages, limits_.max_messages);
  } else if (total_.bytes + bytes > limits_.max_bytes) {
    refuse(OverloadBound::kChannelBytes, total_.bytes, limits_.max_bytes);
  }
  if (full) {
    if (mine.messages == 0) by_destination_.erase(dest);
    return full;
  }
  ++mine.messages;
  mine.bytes += bytes;
  ++total_.messages;
  total_.bytes += bytes;
  return std::nullopt;
}

void QueueBounds::release(const runtime::MessageEnvelope& env) {
  absl::MutexLock lock(&mu_);
  auto it = by_destination_.find(env.dest().id.actor);
  if (it == by_destination_.end()) return;  // not admitted (failed before), or cleared
  Held& mine = it->second;
  const uint64_t bytes = env.held_bytes();
  mine.messages -= 1;
  mine.bytes -= std::min(mine.bytes, bytes);
  total_.messages -= 1;
  total_.bytes -= std::min(total_.bytes, bytes);
  if (mine.messages == 0) by_destination_.erase(it);  // the map holds only what is queued
}

void QueueBounds::clear() {
  absl::MutexLock lock(&mu_);
  by_destination_.clear();
  total_ = Held{};
}

QueueBounds::Held QueueBounds::total() const {
  absl::MutexLock lock(&mu_);
  return total_;
}

QueueBounds::Held QueueBounds::for_destination(const runtime::ActorId& dest) const {
  absl::MutexLock lock(&mu_);
  auto it = by_destination_.find(dest);
  return it == by_destination_.end() ? Held{} : it->second;
}

}  // namespace postal::routing::internal
