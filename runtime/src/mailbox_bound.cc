#include "postal/runtime/mailbox_bound.h"

#include "postal/runtime/scheduler.h"

namespace postal::runtime {
namespace {

thread_local int no_block_depth = 0;

}  // namespace

std::string_view to_string(OverloadPolicy policy) {
  switch (policy) {
    case OverloadPolicy::kBlock:
      return "block";
    case OverloadPolicy::kFail:
      return "fail";
    case OverloadPolicy::kDropOldest:
      return "drop_oldest";
  }
  return "unknown";
}

NoBlockScope::NoBlockScope() { ++no_block_depth; }
NoBlockScope::~NoBlockScope() { --no_block_depth; }

bool may_block_here(const Scheduler& dest) {
  // A deterministic proc's step() runs handlers on the test's thread: nothing else would run
  // the consumer while that thread waits.
  return no_block_depth == 0 && !dest.manual();
}

}  // namespace postal::runtime
