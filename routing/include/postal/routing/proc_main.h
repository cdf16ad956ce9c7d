// proc_main: the bootstrap entry point of a proc launched by a host agent.
//
// The `postal` binary runs it for `postal proc ...`; a user's binary that links postal and
// registers its own actor types (POSTAL_ACTOR) runs it from main:
//
//   int main(int argc, char** argv) { return postal::routing::proc_main(argc, argv); }
//
// Flags (all `--flag=value` or `--flag value`):
//   --name NAME        the proc's name (a label; its id is the singleton NAME)      required
//   --listen ADDR      the channel address to serve                                 required
//   --location LOC     how others reach it (when behind a gateway); default: bound address
//   --workers N        worker threads; default: one per core
//   --ready-fd FD      where to write the ready line; default 1 (stdout)
//   --delivery-timeout-ms N   R-CHAN-2's delivery timeout for its channels; default 30 000
//   --log-level SPEC   log levels, POSTAL_LOG's syntax (runtime/logger.h); default: POSTAL_LOG
//   --parent-pid PID   the launching host; exit 1 at once if it is no longer our parent
//   --help             print the usage and exit 0
//
// Once serving, it writes one line `POSTAL-READY <proc address> <bound listen address>` to the
// ready fd and runs until SIGINT or SIGTERM, or until its parent dies (Linux: PR_SET_PDEATHSIG),
// so a host's children never outlive it. Bad flags log what is wrong and exit 2.
#pragma once

namespace postal::routing {

int proc_main(int argc, char** argv);

}  // namespace postal::routing
