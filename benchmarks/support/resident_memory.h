// resident_memory: this process's resident set size, as /proc/self/statm reports it (Linux).
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"

namespace postal::bench {

// Resident bytes now; an error naming /proc/self/statm when it cannot be read or parsed.
absl::StatusOr<size_t> resident_bytes();

}  // namespace postal::bench
