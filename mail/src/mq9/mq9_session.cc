// mq9_session.cc — a bridge connection's socket side: INFO, CONNECT and authentication, the
// parser, PING/PONG, the bounded write buffer and the connection's end. See mq9_session.h.
#include "mq9_session.h"

#include <fcntl.h>

#include <chrono>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "postal/runtime/logger.h"
#include "postal/wire/absl_compat.h"

namespace postal::mail::mq9 {
namespace {

using boost::asio::ip::tcp;

constexpr size_t kFirstReadBytes = 4096;  // grows to kMaxReadBytes only while reads fill it
constexpr size_t kMaxReadBytes = 64 << 10;

std::chrono::nanoseconds chrono(absl::Duration d) { return absl::ToChronoNanoseconds(d); }

// Constant time in the token's length: a wrong token's prefix tells nothing.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

}  // namespace

Session::Session(Mq9Bridge::Core& core, tcp::socket socket, uint64_t id)
    : core_(core),
      id_(id),
      socket_(std::move(socket)),
      strand_(boost::asio::make_strand(core.verbs.get_executor())),
      connect_timer_(core.io),
      ping_timer_(core.io),
      close_timer_(core.io),
      parser_(NatsParserLimits{core.options.max_control_line, core.options.max_payload}) {}

Session::LiveCount::~LiveCount() {  // counted up by Core::accept
  absl::MutexLock lock(&core.sessions_mu);
  --core.live_sessions;
}

Session::~Session() = default;

void Session::start() {
  const int fd = socket_.native_handle();
  if (int flags = ::fcntl(fd, F_GETFD); flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  boost::system::error_code ec;
  socket_.set_option(tcp::no_delay(true), ec);
  push(core_.info_line);
  connect_timer_.expires_after(chrono(core_.options.connect_timeout));
  connect_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->connected_) return;
    self->core_.counters.refused.fetch_add(1, std::memory_order_relaxed);
    self->close(self->core_.options.auth_token.empty() ? "Connect Timeout"
                                                       : "Authentication Timeout");
  });
  read_buf_.resize(kFirstReadBytes);
  read();
}

void Session::read() {
  socket_.async_read_some(
      boost::asio::buffer(read_buf_),
      [self = shared_from_this()](boost::system::error_code ec, size_t n) {
        if (ec) {
          self->close("");
          return;
        }
        const bool filled = n == self->read_buf_.size();
        self->parser_.feed(std::string_view(self->read_buf_.data(), n));
        for (;;) {
          {
            absl::MutexLock lock(&self->out_mu_);
            if (self->closing_) return;
          }
          NatsCommand cmd = self->parser_.next();
          if (cmd.op == NatsOp::kNone) break;
          self->handle(cmd);
        }
        if (self->parser_.failed()) {
          self->core_.counters.protocol_errors.fetch_add(1, std::memory_order_relaxed);
          runtime::Logger::mail().debug(absl::StrCat("mq9 bridge: connection ", self->id_, " closed: ",
                                            self->parser_.error()));
          self->close(self->parser_.error());
          return;
        }
        if (filled && self->read_buf_.size() < kMaxReadBytes) {
          self->read_buf_.resize(self->read_buf_.size() * 2);
        }
        self->resume_or_pause();
      });
}

void Session::resume_or_pause() {
  // Verbs not done yet hold their bytes: past the bound, stop reading (TCP pushes back on the
  // client) until the strand has worked them down to half.
  const size_t limit = core_.options.max_pending_bytes;
  if (verb_bytes_.load(std::memory_order_acquire) <= limit) {
    read();
    return;
  }
  read_paused_.store(true, std::memory_order_release);
  if (verb_bytes_.load(std::memory_order_acquire) <= limit / 2 &&
      read_paused_.exchange(false, std::memory_order_acq_rel)) {
    read();
  }
}

void Session::verb_done(size_t bytes) {
  const size_t left = verb_bytes_.fetch_sub(bytes, std::memory_order_acq_rel) - bytes;
  if (left <= core_.options.max_pending_bytes / 2 &&
      read_paused_.exchange(false, std::memory_order_acq_rel)) {
    boost::asio::post(core_.io, [self = shared_from_this()] {
      {
        absl::MutexLock lock(&self->out_mu_);
        if (self->closing_) return;
      }
      self->read();
    });
  }
}

void Session::handle(const NatsCommand& cmd) {
  if (cmd.op == NatsOp::kConnect) {
    if (!handle_connect(cmd.payload)) return;
  } else if (!connected_ && !core_.options.auth_token.empty()) {
    core_.counters.refused.fetch_add(1, std::memory_order_relaxed);
    close("Authorization Violation");
    return;
  } else if (cmd.op == NatsOp::kPing) {
    // Answered from the strand, behind the verbs sent before it: a client's flush (PING, wait
    // for PONG) then means what it means with nats-server, that they were processed.
    // Counted like a verb, so a PING flood behind a slow verb pauses reading too.
    constexpr size_t kPingBytes = 64;
    verb_bytes_.fetch_add(kPingBytes, std::memory_order_acq_rel);
    boost::asio::post(strand_, [self = shared_from_this()] {
      self->push("PONG\r\n");
      self->verb_done(kPingBytes);
    });
    return;
  } else if (cmd.op == NatsOp::kPong) {
    pings_out_ = 0;
    return;
  } else {
    VerbCommand v{cmd.op,
                  std::string(cmd.subject),
                  std::string(cmd.reply),
                  std::string(cmd.queue),
                  std::string(cmd.sid),
                  std::string(cmd.headers),
                  std::string(cmd.payload),
                  cmd.max_msgs};
    const size_t bytes = v.subject.size() + v.payload.size() + v.headers.size() + 64;
    verb_bytes_.fetch_add(bytes, std::memory_order_acq_rel);
    boost::asio::post(strand_, [self = shared_from_this(), v = std::move(v), bytes]() mutable {
      self->verb(std::move(v), bytes);
    });
  }
  if (verbose_) push("+OK\r\n");
}

bool Session::handle_connect(std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (!j.is_object()) {
    core_.counters.protocol_errors.fetch_add(1, std::memory_order_relaxed);
    close("Parser Error: CONNECT needs a JSON object");
    return false;
  }
  if (!core_.options.auth_token.empty()) {
    auto it = j.find("auth_token");
    if (it == j.end() || !it->is_string() ||
        !same_secret(it->get<std::string>(), core_.options.auth_token)) {
      core_.counters.refused.fetch_add(1, std::memory_order_relaxed);
      runtime::Logger::mail().info(absl::StrCat("mq9 bridge: connection ", id_,
                                       " refused: wrong or missing auth_token"));
      close("Authorization Violation");
      return false;
    }
  }
  verbose_ = j.value("verbose", false);
  headers_.store(j.value("headers", false), std::memory_order_relaxed);
  if (!connected_) {
    connected_ = true;
    connect_timer_.cancel();
    arm_ping();
  }
  return true;
}

void Session::arm_ping() {
  ping_timer_.expires_after(chrono(core_.options.ping_interval));
  ping_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec) return;
    if (self->pings_out_ >= self->core_.options.max_pings_out) {
      self->close("Stale Connection");
      return;
    }
    ++self->pings_out_;
    self->push("PING\r\n");
    self->arm_ping();
  });
}

void Session::deliver(std::string_view subject, std::string_view sid, std::string_view reply,
                      std::string_view headers, std::string_view payload) {
  std::string frame;
  frame.reserve(subject.size() + sid.size() + reply.size() + headers.size() + payload.size() + 48);
  const bool with_headers = !headers.empty() && headers_enabled();
  frame.append(with_headers ? "HMSG " : "MSG ").append(subject).append(" ").append(sid);
  if (!reply.empty()) frame.append(" ").append(reply);
  if (with_headers) {
    absl::StrAppend(&frame, " ", headers.size(), " ", headers.size() + payload.size(), "\r\n");
    frame.append(headers);
  } else {
    absl::StrAppend(&frame, " ", payload.size(), "\r\n");
  }
  frame.append(payload).append("\r\n");
  push(std::move(frame));
}

void Session::push(std::string bytes) {
  bool post = false;
  {
    absl::MutexLock lock(&out_mu_);
    if (closing_) return;
    out_.append(bytes);
    if (out_.size() > core_.options.max_pending_bytes) {
      // Not read by the client: cut it off alone, as nats-server does; nothing else waits.
      slow_ = true;
    } else if (!flush_posted_) {
      flush_posted_ = post = true;
    }
  }
  if (slow_for_close()) {
    core_.counters.slow_consumers.fetch_add(1, std::memory_order_relaxed);
    runtime::Logger::mail().warn(absl::StrCat("mq9 bridge: connection ", id_, " cut off: over ",
                                     core_.options.max_pending_bytes,
                                     " bytes waiting to be written (a slow consumer)"));
    close("Slow Consumer");
    return;
  }
  if (post) boost::asio::post(core_.io, [self = shared_from_this()] { self->flush(); });
}

bool Session::slow_for_close() {  // true once: the caller counts, logs and closes
  absl::MutexLock lock(&out_mu_);
  if (!slow_ || slow_reported_) return false;
  slow_reported_ = true;
  out_.clear();
  return true;
}

void Session::close(std::string error) {
  {
    absl::MutexLock lock(&out_mu_);
    if (closing_) return;
    closing_ = true;
    if (!error.empty()) absl::StrAppend(&out_, "-ERR '", error, "'\r\n");
  }
  boost::asio::post(core_.io, [self = shared_from_this()] {
    // A client that does not read gets a second to take the -ERR, then the socket closes.
    self->close_timer_.expires_after(std::chrono::seconds(1));
    self->close_timer_.async_wait([self](boost::system::error_code ec) {
      if (!ec) self->shut();
    });
    self->flush();
  });
}

void Session::flush() {
  bool done_closing = false, start_write = false;
  {
    absl::MutexLock lock(&out_mu_);
    flush_posted_ = false;
    if (write_in_flight_ || shut_) return;
    if (out_.empty()) {
      done_closing = closing_;
    } else {
      writing_.swap(out_);
      out_.clear();
      write_in_flight_ = start_write = true;
    }
  }
  if (done_closing) {
    shut();
    return;
  }
  if (!start_write) return;
  boost::asio::async_write(socket_, boost::asio::buffer(writing_),
                           [self = shared_from_this()](boost::system::error_code ec, size_t) {
                             {
                               absl::MutexLock lock(&self->out_mu_);
                               self->write_in_flight_ = false;
                             }
                             self->writing_.clear();
                             if (ec) {
                               self->close("");
                               self->shut();
                               return;
                             }
                             self->flush();
                           });
}

void Session::shut() {
  {
    absl::MutexLock lock(&out_mu_);
    if (shut_) return;
    shut_ = closing_ = true;
    out_.clear();
  }
  boost::system::error_code ec;
  connect_timer_.cancel();
  ping_timer_.cancel();
  close_timer_.cancel();
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  // Teardown is queued before the session leaves the table: the bridge's destructor, once the
  // table is empty, joins the verb pool, which then still runs it.
  boost::asio::post(strand_, [self = shared_from_this()] { self->teardown(); });
  core_.forget(id_);
}

}  // namespace postal::mail::mq9
