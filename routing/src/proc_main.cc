#include "postal/routing/proc_main.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "postal/routing/node.h"
#include "postal/routing/workload.h"
#include "postal/wire/absl_compat.h"
#include "ready_protocol.h"

namespace postal::routing {
namespace {

struct ProcFlags {
  std::string name;
  std::string listen;
  std::string location;
  int workers = 0;
  int ready_fd = 1;
  int delivery_timeout_ms = 0;  // 0: the channel default
};

// Parses `--flag=value` / `--flag value`; on error prints it and returns false.
bool parse_flags(int argc, char** argv, ProcFlags& out) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "proc") continue;  // `postal proc ...`
    std::string_view key = arg, value;
    if (auto eq = arg.find('='); eq != std::string_view::npos) {
      key = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      std::fprintf(stderr, "postal proc: %s needs a value\n", argv[i]);
      return false;
    }
    if (key == "--name") {
      out.name = value;
    } else if (key == "--listen") {
      out.listen = value;
    } else if (key == "--location") {
      out.location = value;
    } else if (key == "--workers" || key == internal::kReadyFdFlag ||
               key == "--delivery-timeout-ms") {
      int n = 0;
      if (!absl::SimpleAtoi(sv(value), &n) || n < 0) {
        std::fprintf(stderr, "postal proc: %.*s wants a non-negative number, got \"%.*s\"\n",
                     static_cast<int>(key.size()), key.data(), static_cast<int>(value.size()),
                     value.data());
        return false;
      }
      (key == "--workers"              ? out.workers
       : key == internal::kReadyFdFlag ? out.ready_fd
                                       : out.delivery_timeout_ms) = n;
    } else {
      std::fprintf(stderr,
                   "postal proc: unknown flag %.*s (known: --name, --listen, --location, "
                   "--workers, --ready-fd, --delivery-timeout-ms)\n",
                   static_cast<int>(key.size()), key.data());
      return false;
    }
  }
  if (out.name.empty() || out.listen.empty()) {
    std::fprintf(stderr, "postal proc: --name and --listen are required, e.g. "
                         "postal proc --name alpha --listen ipc:///tmp/alpha.sock\n");
    return false;
  }
  return true;
}

}  // namespace

int proc_main(int argc, char** argv) {
  ProcFlags flags;
  if (!parse_flags(argc, argv, flags)) return 2;
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // die with the host
  register_workload_actors();

  absl::StatusOr<runtime::Label> name = runtime::Label::parse(flags.name);
  absl::StatusOr<runtime::ChannelAddr> listen = runtime::ChannelAddr::parse(flags.listen);
  if (!name.ok() || !listen.ok()) {
    std::fprintf(stderr, "postal proc: %s\n",
                 std::string((!name.ok() ? name.status() : listen.status()).message()).c_str());
    return 2;
  }
  NodeOptions options;
  options.id = runtime::ProcId{runtime::Uid::singleton(*name)};
  options.listen = *listen;
  options.scheduler.workers = flags.workers;
  if (flags.delivery_timeout_ms > 0) {
    options.channel.delivery_timeout = absl::Milliseconds(flags.delivery_timeout_ms);
  }
  if (!flags.location.empty()) {
    absl::StatusOr<runtime::Location> location = runtime::Location::parse(flags.location);
    if (!location.ok()) {
      std::fprintf(stderr, "postal proc: --location: %s\n",
                   std::string(location.status().message()).c_str());
      return 2;
    }
    options.location = *location;
  }

  // Block the stop signals before any thread starts, so that only sigwait below sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  absl::StatusOr<std::unique_ptr<Node>> node = Node::start(std::move(options));
  if (!node.ok()) {
    std::fprintf(stderr, "postal proc %s: %s\n", flags.name.c_str(),
                 std::string(node.status().message()).c_str());
    return 1;
  }
  const std::string ready = internal::ready_line((*node)->proc().addr(), (*node)->listen_addr());
  if (::write(flags.ready_fd, ready.data(), ready.size()) < 0) return 1;
  if (flags.ready_fd != 1) ::close(flags.ready_fd);

  int sig = 0;
  sigwait(&stop, &sig);
  return 0;
}

}  // namespace postal::routing
