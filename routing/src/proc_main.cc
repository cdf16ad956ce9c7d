#include "postal/routing/proc_main.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "postal/routing/channel_key.h"
#include "postal/routing/node.h"
#include "postal/routing/workload.h"
#include "postal/runtime/logger.h"
#include "postal/wire/absl_compat.h"
#include "ready_protocol.h"

namespace postal::routing {
namespace {

constexpr std::string_view kUsage =
    "usage: postal proc --name NAME --listen ADDR [--location LOC] [--workers N]\n"
    "                   [--ready-fd FD] [--secret-fd FD] [--delivery-timeout-ms N]\n"
    "                   [--log-level SPEC] [--heartbeat-ms INTERVAL,TIMEOUT] [--parent-pid PID]\n"
    "                   [--nats-tls-ca FILE [--nats-tls-cert FILE --nats-tls-key FILE]]\n"
    "                   [--tls auto|on|off]\n"
    "Runs one proc (hosts launch it; see docs/topologies.md). Writes `POSTAL-READY <proc address>\n"
    "<listen address>` to the ready fd once serving; runs until SIGINT/SIGTERM or its parent "
    "dies.\n"
    "--log-level takes POSTAL_LOG's syntax, e.g. info,postal.routing=debug.\n"
    "--heartbeat-ms sets the channels' heartbeats, e.g. 1000,5000 (the default); 0,0 turns them "
    "off.\n"
    "--secret-fd (or POSTAL_SECRET_FD) names an fd holding the topology secret: the proc reads it\n"
    "to the end, closes it, and authenticates every channel with it (docs/security.md).\n"
    "--nats-tls-ca makes every nats:// channel talk TLS to its NATS server, trusting only server\n"
    "certificates signed by that CA; --nats-tls-cert/--nats-tls-key add a client certificate.\n"
    "--tls sets TLS 1.3 on tcp:// channels (keyed from the secret): auto (the default) off\n"
    "loopback, on for every tcp channel, off never (docs/security.md).\n";

const runtime::Logger& log() { return runtime::Logger::routing(); }

// Why the flags did not parse (exit 2), or that --help was asked (exit 0).
enum class ParseResult { kOk, kUsageError, kHelp };

struct ProcFlags {
  std::string name;
  std::string listen;
  std::string location;
  int workers = 0;
  int ready_fd = 1;
  int secret_fd = -1;           // R-SEC-1: -1: POSTAL_SECRET_FD, else no secret
  int delivery_timeout_ms = 0;  // 0: the channel default
  int parent_pid = 0;           // 0: not checked
  std::string log_level;        // empty: POSTAL_LOG or the default
  NatsTls nats_tls;             // files; empty: plain TCP to NATS
  TlsMode tls = TlsMode::kAuto;  // R-SEC-1: TLS on tcp channels
  // R-FLOW-4: heartbeat_interval and heartbeat_timeout in ms; -1: the channel default.
  int heartbeat_interval_ms = -1;
  int heartbeat_timeout_ms = -1;
};

// Parses `--flag=value` / `--flag value`; logs what is wrong.
ParseResult parse_flags(int argc, char** argv, ProcFlags& out) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "proc" && i == 1) continue;  // `postal proc ...`
    if (arg == "--help" || arg == "-h") return ParseResult::kHelp;
    std::string_view key = arg, value;
    if (auto eq = arg.find('='); eq != std::string_view::npos) {
      key = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      log().error(absl::StrCat("postal proc: ", sv(arg), " needs a value; see postal proc --help"));
      return ParseResult::kUsageError;
    }
    if (key == "--name") {
      out.name = value;
    } else if (key == "--listen") {
      out.listen = value;
    } else if (key == "--location") {
      out.location = value;
    } else if (key == "--log-level") {
      out.log_level = value;
    } else if (key == "--tls") {
      absl::StatusOr<TlsMode> mode = parse_tls_mode(value);
      if (!mode.ok()) {
        log().error(absl::StrCat("postal proc: --tls: ", mode.status().message()));
        return ParseResult::kUsageError;
      }
      out.tls = *mode;
    } else if (key == "--nats-tls-ca") {
      out.nats_tls.ca_file = value;
    } else if (key == "--nats-tls-cert") {
      out.nats_tls.cert_file = value;
    } else if (key == "--nats-tls-key") {
      out.nats_tls.key_file = value;
    } else if (key == "--workers" || key == internal::kReadyFdFlag ||
               key == internal::kSecretFdFlag || key == "--delivery-timeout-ms" ||
               key == "--parent-pid") {
      int n = 0;
      if (!absl::SimpleAtoi(sv(value), &n) || n < 0) {
        log().error(absl::StrCat("postal proc: ", sv(key), " wants a non-negative number, got \"",
                                 sv(value), "\""));
        return ParseResult::kUsageError;
      }
      (key == "--workers"               ? out.workers
       : key == internal::kReadyFdFlag  ? out.ready_fd
       : key == internal::kSecretFdFlag ? out.secret_fd
       : key == "--parent-pid"          ? out.parent_pid
                                        : out.delivery_timeout_ms) = n;
    } else if (key == "--heartbeat-ms") {  // R-FLOW-4: INTERVAL,TIMEOUT
      const size_t comma = value.find(',');
      if (comma == std::string_view::npos ||
          !absl::SimpleAtoi(sv(value.substr(0, comma)), &out.heartbeat_interval_ms) ||
          !absl::SimpleAtoi(sv(value.substr(comma + 1)), &out.heartbeat_timeout_ms) ||
          out.heartbeat_interval_ms < 0 || out.heartbeat_timeout_ms < 0) {
        log().error(
            absl::StrCat("postal proc: --heartbeat-ms wants INTERVAL,TIMEOUT in ms, e.g. "
                         "1000,5000, got \"",
                         sv(value), "\""));
        return ParseResult::kUsageError;
      }
    } else {
      log().error(
          absl::StrCat("postal proc: unknown flag ", sv(key),
                       " (known: --name, --listen, --location, --workers, --ready-fd, "
                       "--secret-fd, --delivery-timeout-ms, --log-level, --heartbeat-ms, "
                       "--parent-pid, --nats-tls-ca, --nats-tls-cert, --nats-tls-key, --tls, "
                       "--help)"));
      return ParseResult::kUsageError;
    }
  }
  if (!out.nats_tls.enabled() &&
      !(out.nats_tls.cert_file.empty() && out.nats_tls.key_file.empty())) {
    log().error(
        "postal proc: --nats-tls-cert and --nats-tls-key need --nats-tls-ca (the CA that "
        "signed the NATS server's certificate)");
    return ParseResult::kUsageError;
  }
  if (out.nats_tls.cert_file.empty() != out.nats_tls.key_file.empty()) {
    log().error(
        "postal proc: a NATS client certificate needs both --nats-tls-cert and "
        "--nats-tls-key");
    return ParseResult::kUsageError;
  }
  if (out.name.empty() || out.listen.empty()) {
    log().error(
        "postal proc: --name and --listen are required, e.g. "
        "postal proc --name alpha --listen ipc:///tmp/alpha.sock");
    return ParseResult::kUsageError;
  }
  return ParseResult::kOk;
}

// R-SEC-1: the channel key from the secret fd (the flag, else POSTAL_SECRET_FD); no fd: none.
absl::StatusOr<std::shared_ptr<const ChannelKey>> key_from(int secret_fd) {
  if (secret_fd < 0) {
    const char* env = std::getenv(internal::kSecretFdEnv);
    if (env == nullptr || *env == '\0') return nullptr;
    if (!absl::SimpleAtoi(env, &secret_fd) || secret_fd < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(internal::kSecretFdEnv, " wants an fd number, got \"", env, "\""));
    }
  }
  absl::StatusOr<std::string> secret = ChannelKey::read_secret_fd(secret_fd);
  if (!secret.ok()) return secret.status();
  absl::StatusOr<std::shared_ptr<const ChannelKey>> key = ChannelKey::derive(*secret);
  ChannelKey::wipe(*secret);
  return key;
}

}  // namespace

int proc_main(int argc, char** argv) {
  ProcFlags flags;
  switch (parse_flags(argc, argv, flags)) {
    case ParseResult::kOk:
      break;
    case ParseResult::kHelp:
      // proc_main is a program's main: its usage goes to stdout like any command's --help.
      std::fwrite(kUsage.data(), 1, kUsage.size(), stdout);
      return 0;
    case ParseResult::kUsageError:
      return 2;
  }
  if (!flags.log_level.empty()) {
    if (absl::Status s = runtime::configure_logging(flags.log_level); !s.ok()) {
      log().error(absl::StrCat("postal proc: --log-level: ", s.message()));
      return 2;
    }
  }
  // Die with the host. The kernel signals only a death after this call, so a host that died
  // since it launched us (we were reparented) is checked by hand.
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (flags.parent_pid > 0 && ::getppid() != flags.parent_pid) {
    log().error(absl::StrCat("postal proc ", flags.name, ": the host (pid ", flags.parent_pid,
                             ") is gone; not starting"));
    return 1;
  }
  register_workload_actors();

  absl::StatusOr<runtime::Label> name = runtime::Label::parse(flags.name);
  absl::StatusOr<runtime::ChannelAddr> listen = runtime::ChannelAddr::parse(flags.listen);
  if (!name.ok() || !listen.ok()) {
    log().error(
        absl::StrCat("postal proc: ", (!name.ok() ? name.status() : listen.status()).message()));
    return 2;
  }
  NodeOptions options;
  options.id = runtime::ProcId{runtime::Uid::singleton(*name)};
  options.listen = *listen;
  options.scheduler.workers = flags.workers;
  if (flags.delivery_timeout_ms > 0) {
    options.channel.delivery_timeout = absl::Milliseconds(flags.delivery_timeout_ms);
  }
  if (flags.heartbeat_interval_ms >= 0) {
    options.channel.heartbeat_interval = absl::Milliseconds(flags.heartbeat_interval_ms);
    options.channel.heartbeat_timeout = absl::Milliseconds(flags.heartbeat_timeout_ms);
  }
  absl::StatusOr<std::shared_ptr<const ChannelKey>> key = key_from(flags.secret_fd);
  if (!key.ok()) {
    log().error(absl::StrCat("postal proc: the topology secret: ", key.status().message()));
    return 2;
  }
  options.channel.key = *std::move(key);
  options.channel.nats_tls = flags.nats_tls;
  options.channel.tls = flags.tls;
  if (!flags.location.empty()) {
    absl::StatusOr<runtime::Location> location = runtime::Location::parse(flags.location);
    if (!location.ok()) {
      log().error(absl::StrCat("postal proc: --location: ", location.status().message()));
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
    log().error(absl::StrCat("postal proc ", flags.name, ": ", node.status().message()));
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
