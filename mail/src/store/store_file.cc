#include "store_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"

namespace postal::mail::store {
namespace {

std::string_view kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

}  // namespace

absl::Status check_store_file(const std::filesystem::path& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::OkStatus();
    if (errno == ELOOP) {
      return IoFailedError(absl::StrCat("store file '", path.string(),
                                        "' is a symlink; refused (M-STORE-1). Point the store "
                                        "at the real file"));
    }
    return IoFailedError(
        absl::StrCat("store file '", path.string(), "' cannot be opened: ", std::strerror(errno)));
  }
  struct stat st {};
  const int rc = ::fstat(fd, &st);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) {
    return IoFailedError(
        absl::StrCat("store file '", path.string(), "': fstat failed: ", std::strerror(saved)));
  }
  if (!S_ISREG(st.st_mode)) {
    return IoFailedError(absl::StrCat("store file '", path.string(), "' is ",
                                      std::string(kind_of(st.st_mode)),
                                      "; refused (M-STORE-1). A store must be a regular file"));
  }
  if (max_bytes != 0 && static_cast<uint64_t>(st.st_size) > max_bytes) {
    return IoFailedError(absl::StrCat("file '", path.string(), "' holds ", st.st_size,
                                      " bytes, over the limit of ", max_bytes,
                                      "; refused (M-STORE-1)"));
  }
  return absl::OkStatus();
}

}  // namespace postal::mail::store
