// mq9_session.h — one client connection of the mq9 bridge: the NATS protocol on its socket
// (mq9_session.cc) and the verbs it asks for (mq9_verbs.cc).
//
// Socket work runs on the bridge's I/O thread; verbs run on the session's strand of the verb
// pool, in the order the client sent them. `deliver` and `close` may be called from any thread
// (subscription callbacks run on the mailboxes' delivery threads).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "mq9_core.h"
#include "nats_parser.h"

namespace postal::mail::mq9 {

// A command copied off the read buffer, for the strand.
struct VerbCommand {
  NatsOp op = NatsOp::kNone;
  std::string subject, reply, queue, sid, headers, payload;
  uint64_t max_msgs = 0;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Mq9Bridge::Core& core, boost::asio::ip::tcp::socket socket, uint64_t id);
  ~Session();

  uint64_t id() const { return id_; }
  void start();  // I/O thread
  // MSG (or HMSG, for a client that announced headers) to subscription `sid`.
  void deliver(std::string_view subject, std::string_view sid, std::string_view reply,
               std::string_view headers, std::string_view payload);
  // -ERR '<error>' (when not empty), then the connection ends; idempotent.
  void close(std::string error);
  bool headers_enabled() const { return headers_.load(std::memory_order_relaxed); }

 private:
  struct Subscription;  // an mq9 subscription (mq9_verbs.cc)

  // I/O thread (mq9_session.cc).
  void read();
  void resume_or_pause();
  void handle(const NatsCommand& cmd);
  bool handle_connect(std::string_view json);
  void push(std::string bytes);
  bool slow_for_close();
  void flush();
  void arm_ping();
  void shut();

  // The strand (mq9_verbs.cc).
  void verb(VerbCommand cmd, size_t bytes);
  void verb_done(size_t bytes);  // any thread: a verb's bytes are released
  bool publish(VerbCommand& cmd, size_t bytes);  // true: it calls verb_done itself
  void subscribe(VerbCommand& cmd);
  void unsubscribe(const VerbCommand& cmd);
  void create(const VerbCommand& cmd);
  void list(const VerbCommand& cmd);
  void erase(const VerbCommand& cmd);
  void reply(std::string_view to, std::string json);
  void teardown();

  Mq9Bridge::Core& core_;
  // Counts the session in Core::live_sessions until every member below is gone: declared first,
  // it is destroyed last. The bridge's destructor destroys `io` once the count is 0, and the
  // socket and timers below must die before `io` does — a count dropped in ~Session's body let
  // the last owner (a publish's continuation on the store's thread) destroy them after it.
  struct LiveCount {
    Mq9Bridge::Core& core;
    ~LiveCount();
  } live_{core_};
  const uint64_t id_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::strand<boost::asio::thread_pool::executor_type> strand_;
  boost::asio::steady_timer connect_timer_, ping_timer_, close_timer_;
  NatsParser parser_;
  std::string read_buf_;

  // I/O thread only.
  bool connected_ = false;  // CONNECT accepted
  bool verbose_ = false;
  int pings_out_ = 0;
  std::string writing_;

  // Any thread.
  std::atomic<bool> headers_{false};
  std::atomic<size_t> verb_bytes_{0};  // of verbs posted and not done (publishes: until stored)
  std::atomic<bool> read_paused_{false};

  absl::Mutex out_mu_;
  std::string out_ ABSL_GUARDED_BY(out_mu_);
  bool flush_posted_ ABSL_GUARDED_BY(out_mu_) = false;
  bool closing_ ABSL_GUARDED_BY(out_mu_) = false;
  bool slow_ ABSL_GUARDED_BY(out_mu_) = false;
  bool slow_reported_ ABSL_GUARDED_BY(out_mu_) = false;
  bool shut_ ABSL_GUARDED_BY(out_mu_) = false;
  bool write_in_flight_ ABSL_GUARDED_BY(out_mu_) = false;

  // The strand only.
  absl::flat_hash_map<std::string, std::shared_ptr<Subscription>> mq9_subs_;
  absl::flat_hash_set<std::string> plain_sids_;
  bool torn_down_ = false;
};

}  // namespace postal::mail::mq9
