// store_file.h — M-STORE-1: a store file must be a regular file (or absent) before anything
// opens it for real.
#pragma once

#include <cstdint>
#include <filesystem>

#include "absl/status/status.h"

namespace postal::mail::store {

// OK when `path` does not exist or is a regular file of at most `max_bytes` (0: any size).
// A symlink, FIFO, socket, device or directory is refused with `IoFailed` without blocking:
// the file is opened `O_RDONLY | O_NOFOLLOW | O_NONBLOCK` and checked with `fstat`, so a FIFO
// with no writer cannot hold the caller.
absl::Status check_store_file(const std::filesystem::path& path, uint64_t max_bytes = 0);

}  // namespace postal::mail::store
