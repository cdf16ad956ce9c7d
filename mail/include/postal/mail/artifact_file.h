// artifact_file.h — `read_artifact_file`: the one way the mail layer reads a host-state JSON
// artifact (M-STORE-1), e.g. a mailbox export (mailbox_export.h).
//
// The file is opened `O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC` and checked with `fstat`
// before a byte is read: a symlink, a FIFO (which would block a plain open or read until a writer
// came), a socket, a device or a directory is refused, and so is a regular file over the ceiling
// (`kMaxArtifactBytes`, 64 MiB, by its size — a sparse file costs nothing to refuse). A file
// that grows past the ceiling while it is read is refused too. Errors are `IoFailed` statuses
// that name the file and say what to do; nothing is read into the caller on failure.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace postal::mail {

// M-STORE-1: 64 MiB, 67,108,864 bytes.
inline constexpr uint64_t kMaxArtifactBytes = uint64_t{64} << 20;

// The whole content of `path`, which must be a regular file of at most `max_bytes`. `what`
// names the artifact in errors ("a mailbox export").
absl::StatusOr<std::string> read_artifact_file(const std::filesystem::path& path,
                                               std::string_view what,
                                               uint64_t max_bytes = kMaxArtifactBytes);

}  // namespace postal::mail
