#include "postal/routing/proc_exit.h"

#include <sys/wait.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace postal::routing {

std::string ProcExit::to_string() const {
  std::string how;
  if (WIFEXITED(wait_status)) {
    how = absl::StrCat("exited with status ", WEXITSTATUS(wait_status));
  } else if (WIFSIGNALED(wait_status)) {
    how = absl::StrCat("was killed by signal ", WTERMSIG(wait_status), " (",
                       ::strsignal(WTERMSIG(wait_status)), ")");
  } else {
    how = "ended";
  }
  return absl::StrCat(name, " (pid ", pid, ") ", how);
}

}  // namespace postal::routing
