#include "queue_bounds.h"

#include <string>

namespace postal::routing::internal {

using runtime::DeliveryFailure;
using runtime::OverloadBound;

QueueBounds::Held* QueueBounds::entry(const runtime::ActorId& dest, bool make) {
  if (last_ != nullptr && last_dest_ == dest) return last_;
  Held* held = nullptr;
  if (make) {
    const size_t before = by_destination_.size();
    held = &by_destination_[dest];
    if (by_destination_.size() != before) last_ = nullptr;  // an insert may have moved entries
  } else {
    auto it = by_destination_.find(dest);
    if (it == by_destination_.end()) return nullptr;
    held = &it->second;
  }
  last_dest_ = dest;
  last_ = held;
  return held;
}

void QueueBounds::erase(const runtime::ActorId& dest) {
  by_destination_.erase(dest);
  last_ = nullptr;
}

std::optional<DeliveryFailure> QueueBounds::admit(runtime::MessageEnvelope& env, uint64_t bytes) {
  env.set_held_bytes(bytes);
  bytes = env.held_bytes();  // what release will free
  const runtime::ActorId& dest = env.dest().id.actor;
  absl::MutexLock lock(&mu_);
  Held& mine = *entry(dest, /*make=*/true);
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
    if (mine.messages == 0) erase(dest);
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
  release_locked(env);
}

void QueueBounds::release_locked(const runtime::MessageEnvelope& env) {
  const runtime::ActorId& dest = env.dest().id.actor;
  Held* held = entry(dest, /*make=*/false);
  if (held == nullptr) return;  // not admitted (failed before), or cleared
  Held& mine = *held;
  const uint64_t bytes = env.held_bytes();
  mine.messages -= 1;
  mine.bytes -= std::min(mine.bytes, bytes);
  total_.messages -= 1;
  total_.bytes -= std::min(total_.bytes, bytes);
  if (mine.messages == 0) erase(dest);  // the map holds only what is queued
}

void QueueBounds::clear() {
  absl::MutexLock lock(&mu_);
  by_destination_.clear();
  last_ = nullptr;
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
