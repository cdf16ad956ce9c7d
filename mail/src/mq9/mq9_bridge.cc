// mq9_bridge.cc — `Mq9Bridge`: the listener, the connection table and the threads. See
// mq9_bridge.h; a connection's work is in mq9_session.cc and mq9_verbs.cc.
#include "postal/mail/mq9_bridge.h"

#include <fcntl.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mq9_core.h"
#include "mq9_session.h"
#include "postal/mail/retained_mailboxes.h"
#include "postal/runtime/logger.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail {
namespace {

using boost::asio::ip::tcp;

std::string make_info_line(const Mq9BridgeOptions& o, uint16_t port) {
  absl::BitGen gen;
  nlohmann::json info = {
      {"server_id", absl::StrFormat("POSTALMQ9%016X", absl::Uniform<uint64_t>(gen))},
      {"server_name", "postal-mq9"},
      {"version", "2.9.0"},  // the NATS protocol level served (clients gate features on it)
      {"proto", 1},
      {"go", "none (postal mq9 bridge)"},
      {"host", o.host},
      {"port", port},
      {"headers", true},
      {"max_payload", o.max_payload},
      {"auth_required", !o.auth_token.empty()}};
  return absl::StrCat("INFO ", info.dump(), "\r\n");
}

}  // namespace

void Mq9Bridge::Core::accept() {
  acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == boost::asio::error::operation_aborted) return;
    if (ec) {
      // Out of fds (EMFILE) or a connection reset before it was taken: log, wait, go on.
      runtime::Logger::mail().warn(absl::StrCat("mq9 bridge: accept failed: ", ec.message(),
                                       "; retrying in 100 ms"));
      auto timer = std::make_shared<boost::asio::steady_timer>(io, std::chrono::milliseconds(100));
      timer->async_wait([this, timer](boost::system::error_code e) {
        if (!e) accept();
      });
      return;
    }
    std::shared_ptr<mq9::Session> session;
    {
      absl::MutexLock lock(&sessions_mu);
      if (stopping) return;
      if (sessions.size() < options.max_connections) {
        const uint64_t id = next_session_id++;
        session = std::make_shared<mq9::Session>(*this, std::move(socket), id);
        sessions.emplace(id, session);
        ++live_sessions;  // down in ~Session
      }
    }
    if (session) {
      counters.accepted.fetch_add(1, std::memory_order_relaxed);
      session->start();
    } else {
      counters.refused.fetch_add(1, std::memory_order_relaxed);
      runtime::Logger::mail().warn(absl::StrCat("mq9 bridge: refused a connection: ",
                                       options.max_connections, " are open (max_connections)"));
      boost::system::error_code ignored;
      socket.non_blocking(true, ignored);
      static constexpr std::string_view kRefusal = "-ERR 'maximum connections exceeded'\r\n";
      socket.write_some(boost::asio::buffer(kRefusal.data(), kRefusal.size()), ignored);
      socket.close(ignored);
    }
    accept();
  });
}

void Mq9Bridge::Core::forget(uint64_t session_id) {
  absl::MutexLock lock(&sessions_mu);
  sessions.erase(session_id);
}

absl::StatusOr<std::unique_ptr<Mq9Bridge>> Mq9Bridge::start(Mq9BridgeOptions options) {
  if (!options.mailboxes) return absl::InvalidArgumentError("Mq9Bridge: options.mailboxes is required");
  if (options.verb_threads == 0) options.verb_threads = 1;
  auto core = std::make_shared<Core>(std::move(options));
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(core->options.host, ec);
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat("Mq9Bridge: host \"", sv(core->options.host),
                                                   "\" is not an IP address: ", ec.message()));
  }
  tcp::endpoint endpoint(address, core->options.port);
  core->acceptor.open(endpoint.protocol(), ec);
  if (!ec) {
    const int fd = core->acceptor.native_handle();
    if (int flags = ::fcntl(fd, F_GETFD); flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    core->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  }
  if (!ec) core->acceptor.bind(endpoint, ec);
  if (!ec) core->acceptor.listen(boost::asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("Mq9Bridge: cannot listen on ",
                                               sv(core->options.host), ":", core->options.port,
                                               ": ", ec.message()));
  }
  core->info_line = make_info_line(core->options, core->acceptor.local_endpoint().port());
  core->accept();
  core->io_thread = std::thread([c = core.get()] { c->io.run(); });
  runtime::Logger::mail().info(absl::StrCat("mq9 bridge: serving nats://", sv(core->options.host), ":",
                                   core->acceptor.local_endpoint().port()));
  return std::unique_ptr<Mq9Bridge>(new Mq9Bridge(std::move(core)));
}

Mq9Bridge::Mq9Bridge(std::shared_ptr<Core> core) : core_(std::move(core)) {}

Mq9Bridge::~Mq9Bridge() {
  std::vector<std::shared_ptr<mq9::Session>> open;
  {
    absl::MutexLock lock(&core_->sessions_mu);
    core_->stopping = true;
    for (auto& [id, weak] : core_->sessions) {
      if (auto s = weak.lock()) open.push_back(std::move(s));
    }
  }
  boost::asio::post(core_->io, [c = core_.get()] {
    boost::system::error_code ignored;
    c->acceptor.close(ignored);
  });
  for (auto& s : open) s->close("Server Shutdown");
  open.clear();
  // Each session ends on the I/O thread (its socket: `forget`), then on its strand (its
  // subscriptions), and its object dies once no handler holds it (a publish waiting for the
  // store does); the I/O thread runs until then. A client that does not read is cut off by its
  // close timer (1 s).
  // The waits have no deadline on purpose: going on early would destroy `io` or the verb pool
  // under a session that still uses them. Each ends within about a second (the close timer) plus
  // the store's commit of publishes in flight.
  Core& c = *core_;
  auto wait_for = [&c](bool (*done)(Core*)) {
    c.sessions_mu.LockWhen(absl::Condition(done, &c));
    c.sessions_mu.Unlock();
  };
  wait_for([](Core* k) ABSL_NO_THREAD_SAFETY_ANALYSIS { return k->sessions.empty(); });
  c.verbs.join();
  // Asio's rule: a session's socket and timers must die before `io` does.
  wait_for([](Core* k) ABSL_NO_THREAD_SAFETY_ANALYSIS { return k->live_sessions == 0; });
  c.io_work.reset();
  c.io.stop();
  if (c.io_thread.joinable()) c.io_thread.join();
}

uint16_t Mq9Bridge::port() const {
  boost::system::error_code ec;
  return core_->acceptor.local_endpoint(ec).port();
}

std::string Mq9Bridge::url() const { return absl::StrCat("nats://", sv(core_->options.host), ":", port()); }

Mq9BridgeStats Mq9Bridge::stats() const {
  Mq9BridgeStats s;
  {
    absl::MutexLock lock(&core_->sessions_mu);
    s.connections = core_->sessions.size();
  }
  const auto& c = core_->counters;
  s.accepted = c.accepted.load();
  s.refused = c.refused.load();
  s.protocol_errors = c.protocol_errors.load();
  s.slow_consumers = c.slow_consumers.load();
  s.published = c.published.load();
  s.publish_failures = c.publish_failures.load();
  s.pushed = c.pushed.load();
  return s;
}

}  // namespace postal::mail
