#include "resident_memory.h"

#include <unistd.h>

#include <cstdio>

#include "absl/status/status.h"

namespace postal::bench {

absl::StatusOr<size_t> resident_bytes() {
  long pages_total = 0;
  long pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return absl::UnavailableError("cannot open /proc/self/statm");
  const int got = std::fscanf(f, "%ld %ld", &pages_total, &pages_resident);
  std::fclose(f);
  if (got != 2) return absl::DataLossError("cannot parse /proc/self/statm");
  return static_cast<size_t>(pages_resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace postal::bench
