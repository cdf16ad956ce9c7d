// store_file.h — M-STORE-1: a store file must be a regular file (or absent) before anything
// opens it for real.
#pragma once

#include <cstdint>
#include <filesystem>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace postal::mail::store {

// OK when `path` does not exist or is a regular file of at most `max_bytes` (0: any size).
// A symlink, FIFO, socket, device or directory is refused with `IoFailed` without blocking:
// the file is opened `O_RDONLY | O_NOFOLLOW | O_NONBLOCK` and checked with `fstat`, so a FIFO
// with no writer cannot hold the caller.
absl::Status check_store_file(const std::filesystem::path& path, uint64_t max_bytes = 0);

// Who uses a store file: every open store holds a shared `flock` on it for its lifetime; an
// offline tool (`postal mail import|export`) holds it exclusively, so it is the file's only user
// — never beside a MailboxHost that serves the file and caches its sequence numbers. flock
// locks are apart from SQLite's POSIX locks; the descriptor is closed only after the store's
// connections were (the owner declares it first).
class StoreLock {
 public:
  // Never waits: IoFailed when another process holds an incompatible lock.
  static absl::StatusOr<StoreLock> take(const std::filesystem::path& path, bool exclusive);
  StoreLock() = default;
  StoreLock(StoreLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  StoreLock& operator=(StoreLock&& other) noexcept;
  ~StoreLock();

 private:
  explicit StoreLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace postal::mail::store
