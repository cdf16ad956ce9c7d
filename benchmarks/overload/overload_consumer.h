// The consumer proc of the overload demonstration (overload_consumer.cc).
#pragma once

#include <cstdint>
#include <string>

#include "overload_messages.h"

namespace postal::overload {

struct ConsumerArgs {
  std::string listen;  // ipc:///… the consumer's node listens on
  uint64_t bound_messages = 100'000;
  uint64_t bound_bytes = 4 << 20;
  size_t per_destination = 1024;  // its channel's cap per destination (ChannelOptions)
};

// Runs the consumer proc until stdin closes; the process's exit code.
int run_consumer(const ConsumerArgs& args);

}  // namespace postal::overload
