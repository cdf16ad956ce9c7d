// caf_remote_bench: CAF 0.17 remote actors over TCP, the peer of postal's tcp scenarios.
//
//   caf_remote_bench --size BYTES --messages N [--rtt-messages N] [--threads 1] [--window 1024]
//
// The process forks: the child runs an actor system with the middleman and publishes a sink
// actor on 127.0.0.1 (port 0); the parent connects with `remote_actor` and drives it, so the
// messages cross a real TCP connection between two processes, as postal's do.
//
//   stream      the parent's driver actor sends `messages` (stream, total, body) messages with at
//               most `window` unacknowledged; the sink acknowledges every 256 and the last — the
//               same protocol as postal's Driver and Echo (routing/workload.h).
//   round_trip  one (ping, seq, body) in flight, answered with (pong, seq, body); latency per
//               round trip, measured by an event-based pinger actor.
//
// `--threads` is CAF's scheduler.max-threads on both sides (postal bench passes its proc worker
// count). Prints one JSON line (peer_common.h).
#include <algorithm>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "peer_common.h"

namespace {

using stream_atom = caf::atom_constant<caf::atom("stream")>;
using ack_atom = caf::atom_constant<caf::atom("ack")>;
using ping_atom = caf::atom_constant<caf::atom("ping")>;
using pong_atom = caf::atom_constant<caf::atom("pong")>;
using start_atom = caf::atom_constant<caf::atom("start")>;
using done_atom = caf::atom_constant<caf::atom("done")>;

// As postal's Echo and Driver (routing/workload.h): an ack every 256 payloads or 4 MiB of them,
// at most 32 MiB of payload unacknowledged.
constexpr uint64_t kAckEvery = 256;
constexpr uint64_t kAckEveryBytes = 4 << 20;
constexpr uint64_t kMaxWindowBytes = 32 << 20;
uint64_t ack_every(uint64_t size) {
  return std::clamp<uint64_t>(kAckEveryBytes / std::max<uint64_t>(size, 1), 1, kAckEvery);
}
constexpr auto kTimeout = std::chrono::seconds(120);

caf::actor_system_config make_config(size_t threads) {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", threads);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  cfg.load<caf::io::middleman>();
  return cfg;
}

struct sink_state {
  uint64_t received = 0;
};

caf::behavior sink(caf::stateful_actor<sink_state>* self) {
  return {
      [=](stream_atom, uint64_t total, const std::string& body) {
        uint64_t& r = self->state.received;
        ++r;
        if (r % ack_every(body.size()) == 0 || r == total) {
          self->send(caf::actor_cast<caf::actor>(self->current_sender()), ack_atom::value, r);
          if (r == total) r = 0;
        }
      },
      [=](ping_atom, uint64_t seq, const std::string& body) {
        return caf::make_message(pong_atom::value, seq, body);
      },
  };
}

struct driver_state {
  uint64_t sent = 0;
  uint64_t acked = 0;
};

caf::behavior stream_driver(caf::stateful_actor<driver_state>* self, caf::actor target,
                            uint64_t total, std::string body, uint64_t window, caf::actor notify) {
  auto top_up = [=] {
    auto& s = self->state;
    while (s.sent < total && s.sent - s.acked < window) {
      self->send(target, stream_atom::value, total, body);
      ++s.sent;
    }
  };
  return {
      [=](start_atom) { top_up(); },
      [=](ack_atom, uint64_t received) {
        self->state.acked = received;
        if (received == total) {
          self->send(notify, done_atom::value);
        } else {
          top_up();
        }
      },
  };
}

struct pinger_state {
  uint64_t done = 0;
  int64_t sent_ns = 0;
};

caf::behavior pinger(caf::stateful_actor<pinger_state>* self, caf::actor target, uint64_t total,
                     std::string body, std::shared_ptr<std::vector<int64_t>> rtt,
                     caf::actor notify) {
  auto ping = [=] {
    self->state.sent_ns = postal_peers::now_ns();
    self->send(target, ping_atom::value, self->state.done, body);
  };
  return {
      [=](start_atom) { ping(); },
      [=](pong_atom, uint64_t, const std::string&) {
        rtt->push_back(postal_peers::now_ns() - self->state.sent_ns);
        if (++self->state.done == total) {
          self->send(notify, done_atom::value);
        } else {
          ping();
        }
      },
  };
}

// The child: publishes a sink, reports its port on `port_fd`, runs until `quit_fd` closes.
[[noreturn]] void serve(size_t threads, int port_fd, int quit_fd) {
  {
    caf::actor_system_config cfg = make_config(threads);
    caf::actor_system sys{cfg};
    caf::actor s = sys.spawn(sink);
    caf::expected<uint16_t> port = sys.middleman().publish(s, 0, "127.0.0.1", true);
    uint16_t p = port ? *port : 0;
    if (::write(port_fd, &p, sizeof p) != sizeof p) _exit(1);
    ::close(port_fd);
    char c;
    while (::read(quit_fd, &c, 1) > 0) {
    }
    caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
  }
  _exit(0);
}

// Runs `behavior_fn`'s actor and waits for its done message; nanoseconds, or -1 on timeout.
template <class F, class... Ts>
int64_t run_until_done(caf::actor_system& sys, F behavior_fn, Ts&&... args) {
  caf::scoped_actor self{sys};
  caf::actor a =
      sys.spawn(behavior_fn, std::forward<Ts>(args)..., caf::actor_cast<caf::actor>(self));
  const int64_t start = postal_peers::now_ns();
  self->send(a, start_atom::value);
  int64_t elapsed = -1;
  self->receive([&](done_atom) { elapsed = postal_peers::now_ns() - start; },
                caf::after(kTimeout) >> [] {});
  self->send_exit(a, caf::exit_reason::user_shutdown);
  return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = postal_peers::parse_flags(argc, argv);
  const uint64_t size = postal_peers::flag_u64(flags, "size", 64);
  const uint64_t messages = postal_peers::flag_u64(flags, "messages", 100000);
  const uint64_t rtt_messages = postal_peers::flag_u64(flags, "rtt-messages", 10000);
  const size_t threads = std::max<uint64_t>(1, postal_peers::flag_u64(flags, "threads", 1));
  const uint64_t asked = postal_peers::flag_u64(flags, "window", 1024);
  const uint64_t window =
      std::clamp<uint64_t>(std::min<uint64_t>(asked, kMaxWindowBytes / std::max<uint64_t>(size, 1)),
                           2 * ack_every(size), std::max<uint64_t>(asked, 2 * ack_every(size)));
  if (messages == 0 || rtt_messages == 0) {
    postal_peers::fail("caf_remote", "--messages and --rtt-messages must be > 0");
  }

  int port_pipe[2], quit_pipe[2];
  if (::pipe(port_pipe) != 0 || ::pipe(quit_pipe) != 0) postal_peers::fail("caf_remote", "pipe");
  std::fflush(stdout);
  pid_t child = ::fork();
  if (child < 0) postal_peers::fail("caf_remote", "fork");
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the measuring parent
    ::close(port_pipe[0]);
    ::close(quit_pipe[1]);
    serve(threads, port_pipe[1], quit_pipe[0]);
  }
  ::close(port_pipe[1]);
  ::close(quit_pipe[0]);
  uint16_t port = 0;
  if (::read(port_pipe[0], &port, sizeof port) != sizeof port || port == 0) {
    postal_peers::fail("caf_remote", "the publishing child did not report a port");
  }

  std::string result;
  {
    caf::actor_system_config cfg = make_config(threads);
    caf::actor_system sys{cfg};
    caf::expected<caf::actor> remote = sys.middleman().remote_actor("127.0.0.1", port);
    if (!remote) {
      postal_peers::fail("caf_remote", "remote_actor: " + sys.render(remote.error()));
    }
    const std::string body(size, 'c');
    // Warm-up: the connection and both sides' proxies exist before the clocks start.
    auto warm = std::make_shared<std::vector<int64_t>>();
    run_until_done(sys, pinger, *remote, uint64_t{100}, body, warm);

    const int64_t stream_ns = run_until_done(sys, stream_driver, *remote, messages, body, window);
    auto rtt = std::make_shared<std::vector<int64_t>>();
    rtt->reserve(rtt_messages);
    const int64_t rtt_ns = run_until_done(sys, pinger, *remote, rtt_messages, body, rtt);
    if (stream_ns < 0 || rtt_ns < 0) {
      ::close(quit_pipe[1]);
      postal_peers::fail("caf_remote", "timed out waiting for the remote sink");
    }
    result =
        "{\"peer\": \"caf_remote\", \"transport\": \"tcp\", \"size\": " + std::to_string(size) +
        ", \"threads\": " + std::to_string(threads) +
        ", \"stream\": " + postal_peers::stream_json(messages, size, stream_ns) +
        ", \"round_trip\": " + postal_peers::round_trip_json(*rtt, rtt_ns) + "}";
  }
  ::close(quit_pipe[1]);
  int status = 0;
  ::waitpid(child, &status, 0);
  std::printf("%s\n", result.c_str());
  return 0;
}
