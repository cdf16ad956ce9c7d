// mq9_core.h — what the mq9 bridge's connections share (internal; mq9_bridge.h is the API).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "plain_routes.h"
#include "postal/mail/mq9_bridge.h"

namespace postal::mail {

// Members are declared so they are destroyed in a safe order: a session still held by a handler
// queued on `io` dies when `io` does, and its destructor needs `sessions_mu` and its strand's pool.
struct Mq9Bridge::Core {
  explicit Core(Mq9BridgeOptions o) : options(std::move(o)), verbs(options.verb_threads) {}

  Mq9BridgeOptions options;

  absl::Mutex sessions_mu;
  absl::flat_hash_map<uint64_t, std::weak_ptr<mq9::Session>> sessions ABSL_GUARDED_BY(sessions_mu);
  uint64_t next_session_id ABSL_GUARDED_BY(sessions_mu) = 1;
  size_t live_sessions ABSL_GUARDED_BY(sessions_mu) = 0;  // Session objects not destroyed yet
  bool stopping ABSL_GUARDED_BY(sessions_mu) = false;

  mq9::PlainRoutes routes;
  std::string info_line;  // "INFO {...}\r\n", sent on accept
  struct Counters {
    std::atomic<uint64_t> accepted{0}, refused{0}, protocol_errors{0}, slow_consumers{0},
        published{0}, publish_failures{0}, pushed{0};
  } counters;

  boost::asio::thread_pool verbs;  // the mq9 verbs, one strand per connection
  boost::asio::io_context io;
  // Keeps `io.run()` going while the listener is closed and sessions end (the destructor's waits).
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> io_work{io.get_executor()};
  boost::asio::ip::tcp::acceptor acceptor{io};
  std::thread io_thread;

  void accept();
  void forget(uint64_t session_id);
};

}  // namespace postal::mail
