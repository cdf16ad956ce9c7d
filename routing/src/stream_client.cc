// The ipc/tcp ChannelClient: serialize once, sequence, encode, batch, retransmit until acked
// (R-CHAN-1…4; channel_client.h has the contract, stream_client.h the threading, docs/wire.md
// the protocol). This file: posting, the connection's life (connect, HELLO, reads, failures,
// reconnects, timers, close) and the ChannelClient around the core; stream_client_session.cc:
// the session (handshake answers, acks, sequencing, encoding, writes).
#include "stream_client.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <limits>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "channel_auth.h"
#include "postal/routing/channel_key.h"
#include "postal/wire/absl_compat.h"
#include "tls_policy.h"
#include "transports.h"

namespace postal::routing::internal {

using runtime::ChannelAddr;
using runtime::DeliveryFailure;
using runtime::EnvelopePtr;
using runtime::MessageEnvelope;
using runtime::ReturnHandle;
using runtime::TransportReason;

namespace {

// R-FLOW-4: the receive buffer starts small (a client mostly reads ACKs) and doubles when a
// read fills it, up to kReadChunk.
constexpr size_t kFirstReadChunk = 4 << 10;
constexpr size_t kReadChunk = 64 << 10;

std::chrono::nanoseconds to_chrono(absl::Duration d) {
  return std::chrono::nanoseconds(std::max<int64_t>(0, absl::ToInt64Nanoseconds(d)));
}

}  // namespace

uint64_t random_session(uint64_t old) {
  absl::BitGen gen;
  for (;;) {
    const uint64_t s = absl::Uniform<uint64_t>(gen, 1, std::numeric_limits<uint64_t>::max());
    if (s != old) return s;
  }
}

StreamClientCore::StreamClientCore(IoThread& io, ChannelAddr addr, std::vector<Endpoint> endpoints,
                                   ReturnHandle& returns, ChannelOptions options, std::string label)
    : io_(io),
      addr_text_(label.empty() ? addr.to_string() : std::move(label)),
      addr_(std::move(addr)),
      endpoints_(std::move(endpoints)),
      returns_(returns),
      options_(options),
      max_frame_(std::clamp<uint64_t>(options.max_frame_bytes, 4096,
                                      std::numeric_limits<uint32_t>::max())),
      bounds_({options.max_queue, options.max_queue_bytes, options.max_queue_per_destination,
               options.max_queue_per_destination_bytes}),
      session_(random_session()),
      socket_(io.context()),
      reconnect_timer_(io.context()),
      deadline_timer_(io.context()),
      dial_timer_(io.context()),
      read_buf_(kFirstReadChunk),
      backoff_(options.reconnect_initial),
      heartbeat_timer_(io.context()) {
  if (options_.key == nullptr) auth::note_unauthenticated("channel client");
}

absl::Status StreamClientCore::connect_first() {
  absl::Status s =
      dialer_ ? attach_dialed() : connect_blocking(socket_, endpoints_, options_.delivery_timeout);
  if (!s.ok()) return absl::UnavailableError(absl::StrCat("dial ", addr_text_, ": ", s.message()));
  tune(socket_, addr_);
  if (wide_send_buffer_) widen_send_buffer(socket_, addr_);
  connected();
  if (log().enabled(runtime::LogLevel::kDebug)) {
    log().debug(absl::StrCat("channel ", addr_text_, ": connected (session ", session_, ")"));
  }
  return absl::OkStatus();
}

void StreamClientCore::start() {
  boost::asio::post(io_.context(), [self = shared_from_this()] {
    absl::MutexLock lock(&self->io_mu_);
    boost::system::error_code ignored;
    self->socket_.non_blocking(true, ignored);
    self->link_ = Link::kHandshaking;
    self->begin_handshake();
    if (self->link_ == Link::kHandshaking) self->read(self->gen_);
  });
}

void StreamClientCore::start_in_background() {
  boost::asio::post(io_.context(), [self = shared_from_this()] {
    absl::MutexLock lock(&self->io_mu_);
    self->resolve_then_connect();
  });
}

void StreamClientCore::resolve_then_connect() {
  if (closed()) return;
  if (dialer_ || !endpoints_.empty()) return connect_async();
  // A tcp host name: asio resolves on its own thread, so neither this thread nor a poster waits.
  resolver_ = std::make_unique<boost::asio::ip::tcp::resolver>(io_.context());
  resolver_->async_resolve(
      std::string(addr_.host()), std::to_string(addr_.port()),
      boost::asio::ip::resolver_base::numeric_service,
      [self = shared_from_this()](const boost::system::error_code& ec,
                                  const boost::asio::ip::tcp::resolver::results_type& results) {
        absl::MutexLock lock(&self->io_mu_);
        if (self->closed()) return;
        if (ec || results.empty()) {
          return self->dial_failed(absl::StrCat("cannot resolve ", sv(self->addr_.host()), ": ",
                                                ec ? os_error(ec) : "no address"));
        }
        for (const auto& entry : results) self->endpoints_.emplace_back(entry.endpoint());
        self->connect_async();
      });
}

void StreamClientCore::fail_now(EnvelopePtr env, ReturnHandle& ret, DeliveryFailure f) {
  MessageEnvelope::undeliverable(std::move(env), std::move(f), ret);
}

void StreamClientCore::post(EnvelopePtr env, ReturnHandle& ret) {
  if (closed()) return fail_closed(std::move(env), ret);
  // R-ENV-4: the payload is serialized once, here, on the posting thread (§13 rule 41) —
  // unless it is still streaming through this gateway (§9.7): then only its size is known.
  size_t size = 0;
  if (const std::shared_ptr<wire::ByteStream>& stream = env->data().stream()) {
    size = static_cast<size_t>(stream->size());
  } else {
    absl::StatusOr<wire::PayloadBytes*> payload = env->data().serialized();
    if (!payload.ok()) {  // cereal's exceptions become ProtocolMismatch at the wire boundary
      std::string target = target_of(*env);
      return fail_now(std::move(env), ret,
                      DeliveryFailure::invalid_reference(std::move(target),
                                                         runtime::InvalidReason::kProtocolMismatch,
                                                         std::string(payload.status().message())));
    }
    size = (*payload)->size();
    // Held as its bytes only from here (wire.md §6.7): what a retransmission or a return needs,
    // so an envelope kept until its ack does not hold its payload twice, and the typed value's
    // memory is reused at once. A payload that will travel in chunks becomes one run for that
    // (§9.10); a gathered one that will not keeps its value (flattening it would copy).
    if (size > options_.chunk_bytes || !(*payload)->gathered()) env->data().keep_bytes_only();
  }
  // R-CHAN-3: a payload over max_message_bytes fails alone, now (§9.1); the exact sizes are
  // checked when it is encoded, against the server's limits.
  if (size > options_.max_message_bytes) {
    std::string target = target_of(*env);
    return fail_now(
        std::move(env), ret,
        DeliveryFailure::oversized_frame(std::move(target), size, options_.max_message_bytes));
  }
  bool kick = false, defer = false, now = false;
  size_t full_queue = 0, full_bytes = 0;
  std::optional<DeliveryFailure> overloaded;  // R-FLOW-2
  {
    absl::MutexLock lock(&mu_);
    if (!closed_.load(std::memory_order_relaxed)) {
      // R-FLOW-3: what waits for a dial is bounded.
      if (dialing_.load(std::memory_order_relaxed) &&
          (queued_.size() >= options_.max_dial_queue ||
           dial_queue_bytes_ + size > options_.max_dial_queue_bytes)) {
        full_queue = queued_.size();
        full_bytes = dial_queue_bytes_;
      } else if ((overloaded = bounds_.admit(*env, size))) {
        // R-FLOW-2: past a queue bound (in total or for this destination) the post fails now.
      } else {
        if (dialing_.load(std::memory_order_relaxed)) dial_queue_bytes_ += size;
        queued_.push_back(Queued{std::move(env), size});
        outstanding_.fetch_add(1, std::memory_order_relaxed);
        if (!kick_scheduled_ && !flush_deferred_) {
          if (runtime::can_defer_flush()) {
            flush_deferred_ = true;
            defer = true;
          } else if (outstanding_.load(std::memory_order_relaxed) == 1 &&
                     !io_.context().get_executor().running_in_this_thread()) {
            // A Client's thread, a store's writer, a timer posting onto an idle channel (nothing
            // else unacked): write on it now (§13 rule 41), no wake-up of the I/O thread unless
            // the write cannot finish here. Behind other traffic the I/O thread batches.
            flush_deferred_ = true;
            now = true;
          } else {
            kick_scheduled_ = true;
            kick = true;
          }
        }
      }
    }
  }
  if (env && overloaded) return fail_now(std::move(env), ret, *std::move(overloaded));  // R-FLOW-2
  if (env && (full_queue != 0 || full_bytes != 0)) {
    std::string target = target_of(*env);
    return fail_now(
        std::move(env), ret,
        DeliveryFailure::transport_failure(
            std::move(target), TransportReason::kDialFailed,
            absl::StrCat(addr_text_, ": still dialing and its queue is full (", full_queue,
                         " envelopes, ", full_bytes, " bytes; bounds max_dial_queue ",
                         options_.max_dial_queue, ", max_dial_queue_bytes ",
                         options_.max_dial_queue_bytes, ")")));
  }
  if (env) return fail_closed(std::move(env), ret);  // closed while we were serializing
  if (defer) runtime::defer_flush(shared_from_this());
  if (now) flush();
  if (kick) boost::asio::post(io_.context(), [self = shared_from_this()] { self->on_kick(); });
}

void StreamClientCore::flush() {
  {
    absl::MutexLock lock(&mu_);
    flush_deferred_ = false;
    if (queued_.empty() || kick_scheduled_) return;
  }
  // §13: write on this worker when the link is up and the I/O thread is not using its state;
  // what cannot be finished here (the socket is full, a failure, no link) goes to the I/O thread.
  if (up_.load(std::memory_order_acquire) && io_mu_.TryLock()) {
    bool done = false;
    if (link_ == Link::kUp && !closed() && !waiting_writable_) {
      arm_deadline();
      sequence();
      done = write_inline();
    }
    io_mu_.Unlock();
    if (done) return;
  }
  kick();
}

void StreamClientCore::kick() {
  {
    absl::MutexLock lock(&mu_);
    if (kick_scheduled_) return;
    kick_scheduled_ = true;
  }
  boost::asio::post(io_.context(), [self = shared_from_this()] { self->on_kick(); });
}

void StreamClientCore::close(absl::Status why) {
  run_in_io_thread(io_, [this, &why] {
    absl::MutexLock lock(&io_mu_);
    close_channel(TransportReason::kChannelClosed, std::move(why), /*rejected=*/false);
  });
}

absl::Status StreamClientCore::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void StreamClientCore::fail_closed(EnvelopePtr env, ReturnHandle& ret) {
  absl::Status why;
  TransportReason reason;
  int err = 0;
  {
    absl::MutexLock lock(&mu_);
    why = status_;
    reason = closed_reason_;
    err = closed_errno_;
  }
  std::string target = target_of(*env);
  DeliveryFailure f = DeliveryFailure::transport_failure(
      std::move(target), reason,
      absl::StrCat("channel ", addr_text_, " is closed: ", why.message()));
  f.os_errno = err;
  fail_now(std::move(env), ret, std::move(f));
}

void StreamClientCore::on_kick() {
  absl::MutexLock io_lock(&io_mu_);
  {
    absl::MutexLock lock(&mu_);
    kick_scheduled_ = false;
  }
  if (closed()) return;
  if (link_ == Link::kDown && !reconnect_scheduled_) connect_async();  // lazy reconnect
  arm_deadline();
  sequence();
  flush_writes();
}

void StreamClientCore::connect_async() {
  link_ = Link::kConnecting;
  up_.store(false, std::memory_order_release);
  const uint64_t gen = ++gen_;
  boost::system::error_code ignored;
  socket_.close(ignored);
  sink_.reset();
  waiting_writable_ = false;
  tls_.reset();
  dial_timer_.expires_after(to_chrono(std::min(options_.dial_timeout, options_.delivery_timeout)));
  dial_timer_.async_wait([self = shared_from_this(), gen](const boost::system::error_code& ec) {
    if (ec) return;
    absl::MutexLock lock(&self->io_mu_);
    self->on_dial_timeout(gen);
  });
  if (dialer_) {  // never blocks: a refusal comes later, as the end of the stream
    absl::Status s = attach_dialed();
    boost::asio::post(io_.context(), [self = shared_from_this(), gen, s = std::move(s)] {
      absl::MutexLock lock(&self->io_mu_);
      if (gen != self->gen_ || self->closed()) return;
      if (!s.ok()) return self->connect_failed(std::string(s.message()), 0);
      self->on_connected(gen, {});
    });
    return;
  }
  boost::asio::async_connect(
      socket_, endpoints_.begin(), endpoints_.end(),
      [self = shared_from_this(), gen](const boost::system::error_code& ec, auto) {
        absl::MutexLock lock(&self->io_mu_);
        self->on_connected(gen, ec);
      });
}

void StreamClientCore::on_connected(uint64_t gen, const boost::system::error_code& ec) {
  if (gen != gen_ || closed()) return;
  if (ec) return connect_failed(os_error(ec), errno_of(ec));
  set_cloexec(socket_.native_handle());  // after the fact; spawns close every fd anyway
  tune(socket_, addr_);
  if (wide_send_buffer_) widen_send_buffer(socket_, addr_);
  boost::system::error_code ignored;
  socket_.non_blocking(true, ignored);
  if (!dialer_) connected();  // a dialer's connection is made before anyone answered: at WELCOME
  link_ = Link::kHandshaking;
  begin_handshake();
  if (gen == gen_ && !closed()) read(gen);
}

void StreamClientCore::connect_failed(std::string why, int err) {
  last_error_ = absl::StrCat("connect: ", why);
  last_errno_ = err;
  if (dialing_.load(std::memory_order_relaxed)) return dial_failed(std::move(why));
  link_ = Link::kDown;
  schedule_reconnect();
}

absl::Status StreamClientCore::attach_dialed() {
  absl::StatusOr<SinkLink> link = dialer_();
  if (!link.ok()) return link.status();
  boost::system::error_code ec;
  socket_.assign(boost::asio::generic::stream_protocol(AF_UNIX, SOCK_STREAM), link->fd, ec);
  if (ec) {
    ::close(link->fd);
    return absl::UnavailableError(os_error(ec));
  }
  sink_ = std::move(link->sink);
  return absl::OkStatus();
}

void StreamClientCore::send_hello() {
  splitter_ = v2::FrameSplitter(v2::kHandshakeFrameLimit);
  // §4.2: resume when something written is outstanding; otherwise present a new session, so a
  // server that lost its sessions has nothing to reject.
  // A transfer registered there (its DATA acked) resumes the session too (§9.5), and so do
  // destinations it paused (§10.1 rule 58: the pauses are the session's).
  hello_resuming_ =
      written_ > acked_ || !paused_.empty() ||
      std::any_of(transfers_.begin(), transfers_.end(),
                  [&](const std::unique_ptr<Transfer>& t) { return t->seq < acked_; });
  if (!hello_resuming_ && session_presented_) new_session();
  session_presented_ = true;
  v2::Hello hello;
  hello.resuming = hello_resuming_;
  hello.client_session = session_;
  hello.first_unacked_seq = hello_resuming_ ? acked_ : 0;
  hello.features = offered_features();  // §15: heartbeat (R-FLOW-4)
  hello.max_frame_bytes = static_cast<uint32_t>(max_frame_);
  hello.ack_interval_ms = static_cast<uint32_t>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(options_.delivery_timeout / 4), 10, 60'000));
  // R-SEC-1: with a key, always auth_mode 1 and a fresh nonce; never a fallback to 0.
  if (options_.key != nullptr) {
    hello.auth_mode = 1;
    hello.client_nonce = auth::random_nonce();
  }
  challenged_ = false;
  control_.clear();
  control_sent_ = 0;
  v2::append(control_, hello);
  hello_body_.assign(control_, v2::kPrefixBytes, std::string::npos);
  flush_writes();
}

void StreamClientCore::read(uint64_t gen) {
  socket_.async_read_some(
      boost::asio::buffer(read_buf_),
      [self = shared_from_this(), gen](const boost::system::error_code& ec, size_t n) {
        absl::MutexLock lock(&self->io_mu_);
        self->on_read(gen, ec, n);
      });
}

void StreamClientCore::on_read(uint64_t gen, const boost::system::error_code& ec, size_t n) {
  if (gen != gen_ || closed()) return;
  if (ec) {
    last_errno_ = errno_of(ec);
    std::string why =
        ec == boost::asio::error::eof ? "the server closed the connection" : os_error(ec);
    if (const int e = sink_ != nullptr ? sink_->ended_by() : 0; e != 0) {  // a dialer's refusal
      last_errno_ = e;
      why = os_error(e);
    }
    if (tls_ != nullptr && !tls_->done()) {  // R-SEC-1: say what to check
      why += " during the TLS handshake (does the server run with tls off, or without TLS?)";
    }
    return link_failed(gen, std::move(why));
  }
  read_since_tick_ = true;  // §10.2: any byte proves the peer alive
  if (tls_ == nullptr) {
    splitter_.feed(std::string_view(read_buf_.data(), n));
  } else if (!on_tls_read(gen, std::string_view(read_buf_.data(), n))) {
    return;  // R-SEC-1: the connection ended (a TLS failure)
  }
  if (n == read_buf_.size() && read_buf_.size() < kReadChunk) {
    read_buf_.resize(read_buf_.size() * 2);
  }
  for (;;) {
    absl::StatusOr<std::optional<v2::RawFrame>> frame = splitter_.next();
    if (!frame.ok()) {
      return link_failed(gen, absl::StrCat("protocol error: ", frame.status().message()));
    }
    if (!frame->has_value()) break;
    handle(gen, (*frame)->kind, (*frame)->body);
    if (gen != gen_ || closed()) return;
  }
  read(gen);
}

void StreamClientCore::on_dial_timeout(uint64_t gen) {
  if (gen != gen_ || closed() || link_ == Link::kUp || link_ == Link::kDown) return;
  link_failed(
      gen,
      absl::StrCat(link_ == Link::kConnecting ? "connect" : "handshake", " took longer than ",
                   absl::FormatDuration(std::min(options_.dial_timeout, options_.delivery_timeout)),
                   " (dial_timeout)"));
}

void StreamClientCore::connected() {
  // The peer answered a connect: from now on a lost connection reconnects (R-CHAN-2) instead of
  // failing the dial, and the dial queue's bound is lifted.
  if (dialing_.exchange(false, std::memory_order_acq_rel)) {
    absl::MutexLock lock(&mu_);
    dial_queue_bytes_ = 0;
  }
}

void StreamClientCore::dial_failed(std::string why) {
  close_channel(TransportReason::kDialFailed,
                absl::UnavailableError(absl::StrCat("dial ", addr_text_, ": ", why)),
                /*rejected=*/false);
}

void StreamClientCore::link_failed(uint64_t gen, std::string why) {
  if (gen != gen_ || link_ == Link::kDown || closed()) return;
  if (dialing_.load(std::memory_order_relaxed)) return dial_failed(std::move(why));
  if (!outage_) {
    // A peer that went away with nothing of ours pending is routine (it stopped); say so only
    // when envelopes are waiting on it.
    if (anything_pending()) {
      log().warn(
          absl::StrCat("channel ", addr_text_, ": connection lost (", why, "); reconnecting"));
    }
    outage_ = true;
  }
  drop_connection(std::move(why));
  schedule_reconnect();
}

void StreamClientCore::drop_connection(std::string why) {
  last_error_ = std::move(why);
  boost::system::error_code ignored;
  socket_.close(ignored);
  sink_.reset();
  ++gen_;
  link_ = Link::kDown;
  up_.store(false, std::memory_order_release);
  next_to_send_ = acked_;
  send_offset_ = 0;
  cut_half_.reset();
  control_.clear();
  control_sent_ = 0;
  heartbeat_out_.clear();
  waiting_writable_ = false;
  tls_.reset();  // R-SEC-1: a TLS session lives and dies with its connection
}

void StreamClientCore::schedule_reconnect() {
  if (closed() || reconnect_scheduled_ || link_ != Link::kDown) return;
  if (!anything_pending()) return;  // reconnect on the next post
  reconnect_scheduled_ = true;
  reconnect_timer_.expires_after(to_chrono(backoff_));
  backoff_ = std::min(backoff_ * 2, options_.reconnect_max);
  reconnect_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    absl::MutexLock lock(&self->io_mu_);
    self->reconnect_scheduled_ = false;
    if (ec || self->closed() || self->link_ != Link::kDown) return;
    self->connect_async();
  });
}

bool StreamClientCore::waiting_on_upstream() const {
  if (transfers_.empty() || link_ != Link::kUp || acked_ != next_seq_) return false;
  for (const std::unique_ptr<Transfer>& t : transfers_) {
    if (!t->stream || t->received != t->sent || t->ending) return false;
  }
  return true;
}

bool StreamClientCore::anything_pending() const {
  return outstanding_.load(std::memory_order_acquire) > 0;
}

void StreamClientCore::arm_deadline() {
  if (closed() || !anything_pending()) return;
  if (idle_) {  // work arrived with nothing pending: the timer starts now
    progress_at_ = absl::Now();
    idle_ = false;
  }
  if (deadline_armed_) return;
  deadline_armed_ = true;
  deadline_timer_.expires_after(to_chrono(progress_at_ + options_.delivery_timeout - absl::Now()));
  deadline_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    absl::MutexLock lock(&self->io_mu_);
    self->on_deadline(ec);
  });
}

void StreamClientCore::on_deadline(const boost::system::error_code& ec) {
  deadline_armed_ = false;
  if (ec || closed()) return;
  expire_paused();  // §10.1: held past delivery_timeout for a destination still full
  if (!anything_pending()) {
    idle_ = true;
    return;
  }
  if (absl::Now() - progress_at_ < options_.delivery_timeout) return arm_deadline();
  if (waiting_on_upstream() || waiting_on_credit()) {  // §9.11, §10.1: no ack is due
    progress_at_ = absl::Now();
    return arm_deadline();
  }
  close_channel(TransportReason::kAckTimedOut,
                absl::DeadlineExceededError(absl::StrCat(
                    "channel ", addr_text_, ": no ack for seq ", acked_, " within ",
                    absl::FormatDuration(options_.delivery_timeout),
                    last_error_.empty() ? "" : absl::StrCat(" (last error: ", last_error_, ")"))),
                /*rejected=*/false);
}

void StreamClientCore::close_channel(TransportReason reason, absl::Status why, bool rejected,
                                     bool server_final) {
  std::vector<Queued> queued;
  {
    absl::MutexLock lock(&mu_);
    if (closed_.load(std::memory_order_relaxed)) return;
    closed_.store(true, std::memory_order_release);
    rejected_.store(rejected, std::memory_order_release);
    status_ = why;
    if (reason == TransportReason::kDialFailed) {
      closed_reason_ = reason;
      closed_errno_ = last_errno_;
    }
    queued.swap(queued_);
  }
  std::vector<EnvelopePtr> returned;
  // R-CHAN-2: the first `maybe` of them were written (or their transfer registered) and never
  // acked — they may have been delivered; the rest never left this process.
  for (Pending& p : pending_) {
    if (p.seq >= acked_ && p.env && p.seq < written_) returned.push_back(std::move(p.env));
  }
  for (std::unique_ptr<Transfer>& t : transfers_) {
    if (t->env) returned.push_back(std::move(t->env));
  }
  const size_t maybe = server_final ? 0 : returned.size();
  for (Pending& p : pending_) {
    if (p.seq >= acked_ && p.env) returned.push_back(std::move(p.env));
  }
  for (EnvelopePtr& env : held_) returned.push_back(std::move(env));
  for (EnvelopePtr& env : take_paused()) returned.push_back(std::move(env));
  for (Queued& q : queued) returned.push_back(std::move(q.env));
  pending_.clear();
  transfers_.clear();
  held_.clear();
  cut_half_.reset();
  outstanding_.store(0, std::memory_order_release);
  bounds_.clear();  // R-FLOW-2
  // §11: a closing client says so when it can do it cleanly (no DATA frame cut in half).
  if (link_ == Link::kUp && send_offset_ == 0 && !cut_half_ && control_sent_ == 0 &&
      !waiting_writable_ && absl::IsCancelled(why)) {
    std::string goodbye;
    v2::append(goodbye, v2::Goodbye{static_cast<uint16_t>(v2::GoodbyeCode::kClientClosing),
                                    next_seq_,
                                    {},
                                    "the client closed the channel"});
    send_now(goodbye);
  }
  boost::system::error_code ignored;
  socket_.close(ignored);
  sink_.reset();
  tls_.reset();
  reconnect_timer_.cancel();
  deadline_timer_.cancel();
  dial_timer_.cancel();
  heartbeat_timer_.cancel();
  if (resolver_) resolver_->cancel();
  link_ = Link::kDown;
  up_.store(false, std::memory_order_release);
  ++gen_;
  // A close that returns nothing and is no refusal (a server's GOODBYE, a dial to a proc that
  // is gone) is routine: it is worth an info line, not a warning.
  if (!returned.empty() || absl::IsFailedPrecondition(why)) {
    log().warn(
        absl::StrCat(why.message(), "; channel closed, returning ", returned.size(), " envelopes"));
  } else if (!absl::IsCancelled(why)) {
    log().info(absl::StrCat(why.message(), "; channel closed, nothing pending"));
  }
  const std::string detail(why.message());
  // R-FAIL-1: the OS error behind a dial or a timeout travels as a field, not only as text.
  const int err = reason == TransportReason::kChannelClosed ? 0 : last_errno_;
  for (size_t i = 0; i < returned.size(); ++i) {
    std::string target = target_of(*returned[i]);
    DeliveryFailure f = DeliveryFailure::transport_failure(std::move(target), reason, detail);
    f.os_errno = err;
    f.maybe_delivered = i < maybe;
    MessageEnvelope::undeliverable(std::move(returned[i]), std::move(f), returns_);
  }
}

namespace {

class StreamChannelClient final : public ChannelClient {
 public:
  StreamChannelClient(ChannelAddr addr, std::shared_ptr<StreamClientCore> core)
      : ChannelClient(std::move(addr)), core_(std::move(core)) {}
  ~StreamChannelClient() override { close(); }

  void post_unchecked(EnvelopePtr env, ReturnHandle& ret) override {
    core_->post(std::move(env), ret);
  }
  bool closed() const override { return core_->closed(); }
  bool rejected() const override { return core_->rejected(); }
  absl::Status status() const override { return core_->status(); }
  size_t unacked() const override { return core_->unacked(); }
  Liveness liveness() const override { return core_->liveness(); }
  Credit credit() const override { return core_->credit(); }
  void close() override {
    if (core_->closed()) return;
    core_->close(absl::CancelledError(
        absl::StrCat("channel ", core_->addr_text(), ": the client was closed")));
  }

 private:
  std::shared_ptr<StreamClientCore> core_;  // shared with the I/O thread's pending handlers
};

}  // namespace

absl::StatusOr<std::unique_ptr<ChannelClient>> dial_stream(IoThread& io, ChannelAddr addr,
                                                           ReturnHandle& returns,
                                                           ChannelOptions options,
                                                           bool in_background, std::string label,
                                                           SinkDialer dialer) {
  std::vector<Endpoint> endpoints;
  // A background dial of a tcp host name resolves on the I/O thread; a numeric host, an ipc
  // path and a foreground dial resolve here (without DNS for the first two).
  boost::system::error_code not_numeric;
  const bool resolve_later =
      in_background && addr.transport() == ChannelAddr::Transport::kTcp &&
      (boost::asio::ip::make_address(std::string(addr.host()), not_numeric), not_numeric);
  if (!resolve_later && !dialer) {
    absl::StatusOr<std::vector<Endpoint>> resolved = endpoints_of(addr, /*passive=*/false);
    if (!resolved.ok()) {
      return absl::UnavailableError(
          absl::StrCat("dial ", addr.to_string(), ": ", resolved.status().message()));
    }
    endpoints = *std::move(resolved);
  }
  // R-SEC-1: the TLS context, or the error of a mode that cannot work (tls on without a key).
  absl::StatusOr<std::shared_ptr<const TlsContext>> tls =
      tls_context_for(options, addr, TlsContext::Role::kClient);
  if (!tls.ok()) return tls.status();
  auto core = std::make_shared<StreamClientCore>(io, addr, std::move(endpoints), returns, options,
                                                 std::move(label));
  core->set_tls(*std::move(tls));
  if (dialer) core->set_dialer(std::move(dialer));
  if (in_background) {
    core->start_in_background();
  } else {
    if (absl::Status s = core->connect_first(); !s.ok()) return s;
    core->start();
  }
  return std::unique_ptr<ChannelClient>(new StreamChannelClient(std::move(addr), std::move(core)));
}

}  // namespace postal::routing::internal
