#include "ready_protocol.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "postal/wire/absl_compat.h"

namespace postal::routing::internal {

std::string ready_line(const runtime::ProcAddr& addr, const runtime::ChannelAddr& listen) {
  return absl::StrCat(sv(kReadyWord), " ", addr.to_string(), " ", listen.to_string(), "\n");
}

absl::StatusOr<std::string> read_ready_line(int fd, absl::Time deadline, int cancel_fd) {
  std::string line;
  char buf[512];
  for (;;) {
    if (auto nl = line.find('\n'); nl != std::string::npos) return line.substr(0, nl);
    int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return absl::DeadlineExceededError("did not report ready in time");
    pollfd p[2] = {{fd, POLLIN, 0}, {cancel_fd, POLLIN, 0}};
    int n = ::poll(p, cancel_fd >= 0 ? 2 : 1, static_cast<int>(ms));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) continue;
    if (cancel_fd >= 0 && (p[1].revents & POLLIN)) {
      return absl::CancelledError("was still starting when the host was asked to stop");
    }
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got == 0) return absl::UnavailableError("exited before it reported ready");
    if (got < 0 && errno != EINTR) return absl::UnavailableError(std::strerror(errno));
    if (got > 0) line.append(buf, static_cast<size_t>(got));
  }
}

absl::StatusOr<ReadyReport> parse_ready_line(std::string_view line) {
  std::vector<std::string> words = absl::StrSplit(sv(line), ' ');
  if (words.size() != 3 || words[0] != kReadyWord) {
    return absl::InvalidArgumentError("not a ready line");
  }
  absl::StatusOr<runtime::ProcAddr> addr = runtime::ProcAddr::parse(words[1]);
  if (!addr.ok()) return addr.status();
  absl::StatusOr<runtime::ChannelAddr> listen = runtime::ChannelAddr::parse(words[2]);
  if (!listen.ok()) return listen.status();
  return ReadyReport{*std::move(addr), *std::move(listen)};
}

}  // namespace postal::routing::internal
