// The ready protocol between a host and the procs it launches (routing internal).
//
// A host starts a child with `--ready-fd N` (kReadyFdFlag), the write end of a pipe at fd N
// (kChildReadyFd). Once serving, the child (proc_main) writes exactly one line to that fd:
//
//   POSTAL-READY <proc address> <bound listen address>\n
//
// and closes it. The host reads that line within its ready timeout; end of file before a line
// means the child exited before it was ready. This file is the one definition of both sides: the
// writer (proc_main.cc) formats with `ready_line`, the reader (host.cc) uses `read_ready_line`
// and `parse_ready_line`.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "postal/runtime/address.h"
#include "postal/runtime/location.h"

namespace postal::routing::internal {

// The flag that tells a proc where to write its ready line (default: 1, stdout).
inline constexpr std::string_view kReadyFdFlag = "--ready-fd";
// The fd at which a host hands its children the pipe for the ready line.
inline constexpr int kChildReadyFd = 3;
// R-SEC-1: the flag (and, when it is absent, the environment variable) naming the fd a proc
// reads the topology secret from, and the fd at which a host hands its children that pipe
// (docs/security.md). The secret never appears in argv or the environment itself.
inline constexpr std::string_view kSecretFdFlag = "--secret-fd";
inline constexpr const char* kSecretFdEnv = "POSTAL_SECRET_FD";
inline constexpr int kChildSecretFd = 4;
// The first word of the ready line.
inline constexpr std::string_view kReadyWord = "POSTAL-READY";

// What a ready line reports.
struct ReadyReport {
  runtime::ProcAddr addr;       // how the proc is reached
  runtime::ChannelAddr listen;  // where it serves (tcp port 0 resolved)
};

// The ready line a proc writes, newline included.
std::string ready_line(const runtime::ProcAddr& addr, const runtime::ChannelAddr& listen);

// Reads from `fd` until one whole line (returned without its newline) or `deadline`.
// DeadlineExceeded: "did not report ready in time"; Unavailable: the writer closed first (it
// exited) or a read failed; Cancelled: `cancel_fd` (when >= 0) became readable first — the host
// was asked to stop (a signal) while it waited.
absl::StatusOr<std::string> read_ready_line(int fd, absl::Time deadline, int cancel_fd = -1);

// Parses a line read by read_ready_line. InvalidArgument when it is not a ready line.
absl::StatusOr<ReadyReport> parse_ready_line(std::string_view line);

}  // namespace postal::routing::internal
