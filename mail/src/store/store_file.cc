#include "store_file.h"

#include <fcntl.h>
#include <sys/file.h>
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

absl::StatusOr<StoreLock> StoreLock::take(const std::filesystem::path& path, bool exclusive) {
  // Creates the file when absent (check_store_file passed: it is regular or absent); an empty
  // file is an empty SQLite database.
  const int fd =
      ::open(path.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    return IoFailedError(
        absl::StrCat("store file '", path.string(), "' cannot be opened: ", std::strerror(errno)));
  }
  StoreLock lock(fd);
  if (::flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) return lock;
  if (errno != EWOULDBLOCK) {
    return IoFailedError(
        absl::StrCat("store file '", path.string(), "': flock failed: ", std::strerror(errno)));
  }
  if (exclusive) {
    return IoFailedError(absl::StrCat(
        "store file '", path.string(),
        "' is open in another process (a MailboxHost serving it?); stop that process first — an "
        "offline import or export must be the store's only user. Nothing was changed"));
  }
  return IoFailedError(absl::StrCat("store file '", path.string(),
                                    "' is held by an import or export right now; open it again "
                                    "once that has finished. Nothing was changed"));
}

StoreLock& StoreLock::operator=(StoreLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

StoreLock::~StoreLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace postal::mail::store
