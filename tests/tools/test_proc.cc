// test_proc: a user's proc binary for the CLI tests — it links postal and runs proc_main, like
// the binaries docs/topologies.md describes. With `--hang-before-ready` among its arguments (a
// topology's `args`), it prints its pid and waits forever without serving: a proc stuck while
// starting, whose host must still honor a Ctrl-C.
#include <unistd.h>

#include <cstdio>
#include <string_view>

#include "postal/routing/proc_main.h"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) != "--hang-before-ready") continue;
    std::printf("test_proc %d: hanging before ready\n", static_cast<int>(::getpid()));
    std::fflush(stdout);
    for (;;) ::pause();
  }
  return postal::routing::proc_main(argc, argv);
}
