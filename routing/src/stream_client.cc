// The ipc/tcp ChannelClient: serialize once, sequence, encode, batch, retransmit until acked
// (R-CHAN-1…4; channel_client.h has the contract, stream_client.h the threading, docs/wire.md
// the protocol).
#include "stream_client.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <limits>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "postal/wire/absl_compat.h"
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
// iovecs per sendmsg (the platform's IOV_MAX is 1024).
constexpr size_t kMaxIov = 1024;
// Payloads up to this size are copied into their frame; larger ones are written from the
// envelope as a slice (§6.7).
constexpr size_t kInlinePayload = 512;

std::chrono::nanoseconds to_chrono(absl::Duration d) {
  return std::chrono::nanoseconds(std::max<int64_t>(0, absl::ToInt64Nanoseconds(d)));
}

// A random non-zero client_session, different from `old`.
uint64_t random_session(uint64_t old = 0) {
  absl::BitGen gen;
  for (;;) {
    const uint64_t s = absl::Uniform<uint64_t>(gen, 1, std::numeric_limits<uint64_t>::max());
    if (s != old) return s;
  }
}

std::string target_of(const MessageEnvelope& env) { return env.next_hop().to_string(); }

// The errno of an OS error code; 0 for asio's own errors (end of stream, …).
int errno_of(const boost::system::error_code& ec) {
  return ec.category() == boost::system::system_category() ? ec.value() : 0;
}

}  // namespace

StreamClientCore::StreamClientCore(IoThread& io, ChannelAddr addr, std::vector<Endpoint> endpoints,
                                   ReturnHandle& returns, ChannelOptions options)
    : io_(io),
      addr_text_(addr.to_string()),
      addr_(std::move(addr)),
      endpoints_(std::move(endpoints)),
      returns_(returns),
      options_(options),
      max_frame_(std::clamp<uint64_t>(options.max_frame_bytes, 4096,
                                      std::numeric_limits<uint32_t>::max())),
      session_(random_session()),
      socket_(io.context()),
      reconnect_timer_(io.context()),
      deadline_timer_(io.context()),
      dial_timer_(io.context()),
      read_buf_(kFirstReadChunk),
      backoff_(options.reconnect_initial) {}

absl::Status StreamClientCore::connect_first() {
  absl::Status s = connect_blocking(socket_, endpoints_, options_.delivery_timeout);
  if (!s.ok()) return absl::UnavailableError(absl::StrCat("dial ", addr_text_, ": ", s.message()));
  tune(socket_, addr_);
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
    self->send_hello();
    self->read(self->gen_);
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
  if (!endpoints_.empty()) return connect_async();
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
  // R-ENV-4: the payload is serialized once, here, on the posting thread (§13 rule 41).
  absl::StatusOr<std::string_view> payload = env->data().bytes();
  if (!payload.ok()) {  // cereal's exceptions become ProtocolMismatch at the wire boundary
    std::string target = target_of(*env);
    return fail_now(std::move(env), ret,
                    DeliveryFailure::invalid_reference(std::move(target),
                                                       runtime::InvalidReason::kProtocolMismatch,
                                                       std::string(payload.status().message())));
  }
  // R-CHAN-3: an envelope whose smallest possible frame is over the limit fails alone, now; the
  // exact size is checked when it is encoded.
  const uint64_t least = 1 + v2::kFixedBytes + payload->size();
  if (least > max_frame_) {
    std::string target = target_of(*env);
    return fail_now(std::move(env), ret,
                    DeliveryFailure::oversized_frame(std::move(target), least, max_frame_));
  }
  bool kick = false, defer = false;
  size_t full_queue = 0, full_bytes = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!closed_.load(std::memory_order_relaxed)) {
      // R-FLOW-3: what waits for a dial is bounded.
      if (dialing_.load(std::memory_order_relaxed) &&
          (queued_.size() >= options_.max_dial_queue ||
           dial_queue_bytes_ + payload->size() > options_.max_dial_queue_bytes)) {
        full_queue = queued_.size();
        full_bytes = dial_queue_bytes_;
      } else {
        if (dialing_.load(std::memory_order_relaxed)) dial_queue_bytes_ += payload->size();
        queued_.push_back(Queued{std::move(env), payload->size()});
        outstanding_.fetch_add(1, std::memory_order_relaxed);
        if (!kick_scheduled_ && !flush_deferred_) {
          if (runtime::can_defer_flush()) {
            flush_deferred_ = true;
            defer = true;
          } else {
            kick_scheduled_ = true;
            kick = true;
          }
        }
      }
    }
  }
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
      std::move(target), reason, absl::StrCat("channel ", addr_text_, " is closed: ", why.message()));
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
  waiting_writable_ = false;
  dial_timer_.expires_after(to_chrono(std::min(options_.dial_timeout, options_.delivery_timeout)));
  dial_timer_.async_wait([self = shared_from_this(), gen](const boost::system::error_code& ec) {
    if (ec) return;
    absl::MutexLock lock(&self->io_mu_);
    self->on_dial_timeout(gen);
  });
  boost::asio::async_connect(
      socket_, endpoints_.begin(), endpoints_.end(),
      [self = shared_from_this(), gen](const boost::system::error_code& ec, auto) {
        absl::MutexLock lock(&self->io_mu_);
        self->on_connected(gen, ec);
      });
}

void StreamClientCore::on_connected(uint64_t gen, const boost::system::error_code& ec) {
  if (gen != gen_ || closed()) return;
  if (ec) {
    last_error_ = absl::StrCat("connect: ", os_error(ec));
    last_errno_ = errno_of(ec);
    if (dialing_.load(std::memory_order_relaxed)) return dial_failed(os_error(ec));
    link_ = Link::kDown;
    schedule_reconnect();
    return;
  }
  set_cloexec(socket_.native_handle());  // after the fact; spawns close every fd anyway
  tune(socket_, addr_);
  boost::system::error_code ignored;
  socket_.non_blocking(true, ignored);
  connected();
  link_ = Link::kHandshaking;
  send_hello();
  read(gen);
}

void StreamClientCore::send_hello() {
  splitter_ = v2::FrameSplitter(v2::kHandshakeFrameLimit);
  // §4.2: resume when something written is outstanding; otherwise present a new session, so a
  // server that lost its sessions has nothing to reject.
  hello_resuming_ = written_ > acked_;
  if (!hello_resuming_ && session_presented_) new_session();
  session_presented_ = true;
  v2::Hello hello;
  hello.resuming = hello_resuming_;
  hello.client_session = session_;
  hello.first_unacked_seq = hello_resuming_ ? acked_ : 0;
  hello.max_frame_bytes = static_cast<uint32_t>(max_frame_);
  hello.ack_interval_ms = static_cast<uint32_t>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(options_.delivery_timeout / 4), 10, 60'000));
  control_.clear();
  control_sent_ = 0;
  v2::append(control_, hello);
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
    return link_failed(
        gen, ec == boost::asio::error::eof ? "the server closed the connection" : os_error(ec));
  }
  splitter_.feed(std::string_view(read_buf_.data(), n));
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

void StreamClientCore::handle(uint64_t gen, v2::Kind kind, std::string_view body) {
  auto stream_error = [&](const absl::Status& s) {
    link_failed(gen, absl::StrCat("protocol error: ", s.message()));
  };
  switch (kind) {
    case v2::Kind::kWelcome: {
      absl::StatusOr<v2::Welcome> w = v2::decode_welcome(body);
      return w.ok() ? on_welcome(gen, *w) : stream_error(w.status());
    }
    case v2::Kind::kAck: {
      absl::StatusOr<v2::Ack> a = v2::decode_ack(body);
      return a.ok() ? on_ack(gen, *a) : stream_error(a.status());
    }
    case v2::Kind::kReject: {
      absl::StatusOr<v2::Reject> r = v2::decode_reject(body);
      return r.ok() ? on_reject(gen, *r) : stream_error(r.status());
    }
    case v2::Kind::kGoodbye: {
      absl::StatusOr<v2::Goodbye> g = v2::decode_goodbye(body);
      return g.ok() ? on_goodbye(gen, *g) : stream_error(g.status());
    }
    default:
      return link_failed(gen, absl::StrCat("protocol error: unexpected frame kind ",
                                           static_cast<int>(kind), " from the server"));
  }
}

void StreamClientCore::on_welcome(uint64_t gen, const v2::Welcome& welcome) {
  if (link_ != Link::kHandshaking) return link_failed(gen, "protocol error: a second WELCOME");
  std::string mismatch;
  if (!hello_resuming_) {
    if (welcome.next_expected != 0) {
      mismatch = absl::StrCat("the server expects seq ", welcome.next_expected,
                              " of a session this client just started");
    }
  } else if (welcome.next_expected < acked_ || welcome.next_expected > written_) {
    mismatch = absl::StrCat("the server expects seq ", welcome.next_expected,
                            " but this session has acked ", acked_, " and written ", written_);
  } else if (welcome.max_frame_bytes != limits_.max_frame_bytes ||
             welcome.dict_max_entries != limits_.dict_max_entries ||
             welcome.dict_max_bytes != limits_.dict_max_bytes) {
    mismatch = "the server changed the session's limits (§4.3 rule 4)";
  }
  if (!mismatch.empty()) {
    return close_channel(
        TransportReason::kChannelClosed,
        absl::FailedPreconditionError(absl::StrCat("channel ", addr_text_, ": ", mismatch)),
        /*rejected=*/true);
  }
  const size_t before = pending_.size();
  if (!hello_resuming_) {
    // A new session: its dictionary starts empty with the bounds the server announced, and
    // what is pending (never written) is encoded afresh from seq 0.
    limits_ = welcome;
    encoder_.emplace(v2::DictLimits{welcome.dict_max_entries, welcome.dict_max_bytes});
    std::deque<Pending> old;
    old.swap(pending_);
    next_seq_ = acked_ = written_ = next_to_send_ = 0;
    for (Pending& p : old) encode(p.env);
  } else {
    outstanding_.fetch_sub(welcome.next_expected - acked_, std::memory_order_acq_rel);
    acked_ = welcome.next_expected;  // R-CHAN-2: frames below it were enqueued there
    trim();
  }
  next_to_send_ = acked_;  // everything else is (re)sent
  send_offset_ = 0;
  link_ = Link::kUp;
  up_.store(true, std::memory_order_release);
  splitter_.set_limit(static_cast<uint32_t>(max_frame_));
  dial_timer_.cancel();
  backoff_ = options_.reconnect_initial;
  if (outage_) {
    log().info(absl::StrCat("channel ", addr_text_, ": reconnected (session ", session_,
                            hello_resuming_ ? " resumed at seq " : " new, seq ", acked_,
                            "); sending ", before, " pending envelopes"));
    outage_ = false;
  }
  sequence();
  arm_deadline();
  flush_writes();
}

void StreamClientCore::on_ack(uint64_t gen, const v2::Ack& ack) {
  if (link_ != Link::kUp) return link_failed(gen, "protocol error: ACK before WELCOME");
  if (ack.next_expected > written_) {
    return link_failed(gen, absl::StrCat("protocol error: ACK ", ack.next_expected,
                                         " beyond the last frame written (", written_, ")"));
  }
  if (ack.next_expected > acked_) {
    outstanding_.fetch_sub(ack.next_expected - acked_, std::memory_order_acq_rel);
    acked_ = ack.next_expected;
    trim();
  }
  progress_at_ = absl::Now();  // §12 rule 40: every ACK restarts the delivery timer
  if (!anything_pending()) idle_ = true;
}

void StreamClientCore::on_reject(uint64_t gen, const v2::Reject& reject) {
  if (link_ != Link::kHandshaking) return link_failed(gen, "protocol error: REJECT after WELCOME");
  std::string why = absl::StrCat("channel ", addr_text_,
                                 ": the server rejected the session: ", reject.text);
  const uint16_t code = reject.code.value_or(0);
  if (reject.code && hello_resuming_ &&
      (code == static_cast<uint16_t>(v2::RejectCode::kSessionUnknown) ||
       code == static_cast<uint16_t>(v2::RejectCode::kSessionOutOfSync))) {
    return resume_on_new_session(why);
  }
  if (reject.code && (code == static_cast<uint16_t>(v2::RejectCode::kBusy) ||
                      code == static_cast<uint16_t>(v2::RejectCode::kShuttingDown))) {
    return link_failed(gen, why);
  }
  // Another wire version (the frozen layout), or a reason a new session would not fix.
  close_channel(TransportReason::kChannelClosed, absl::FailedPreconditionError(std::move(why)),
                /*rejected=*/true);
}

void StreamClientCore::on_goodbye(uint64_t gen, const v2::Goodbye& goodbye) {
  if (link_ != Link::kUp) return link_failed(gen, "protocol error: GOODBYE before WELCOME");
  if (goodbye.next_expected <= written_ && goodbye.next_expected > acked_) {
    outstanding_.fetch_sub(goodbye.next_expected - acked_, std::memory_order_acq_rel);
    acked_ = goodbye.next_expected;
    trim();
  }
  const std::string why =
      absl::StrCat("channel ", addr_text_, ": the server said goodbye: ", goodbye.text);
  if (goodbye.code == static_cast<uint16_t>(v2::GoodbyeCode::kIdle)) return link_failed(gen, why);
  if (goodbye.code == static_cast<uint16_t>(v2::GoodbyeCode::kProtocolError)) {
    return resume_on_new_session(why);
  }
  // server_stopping (and unknown codes): it processes nothing more of this session.
  close_channel(TransportReason::kChannelClosed,
                absl::UnavailableError(absl::StrCat(why, " (the server stopped)")),
                /*rejected=*/false);
}

void StreamClientCore::resume_on_new_session(const std::string& why) {
  // Frames written to the old session and not acked may or may not have been enqueued before it
  // went away: return them (at most once). The rest never left this process: they continue, in
  // order, on a new session.
  std::vector<EnvelopePtr> returned;
  while (!pending_.empty() && pending_.front().seq < written_) {
    if (pending_.front().seq >= acked_) returned.push_back(std::move(pending_.front().env));
    pending_.pop_front();
  }
  outstanding_.fetch_sub(returned.size(), std::memory_order_acq_rel);
  acked_ = written_;
  const uint64_t old_session = session_;
  new_session();
  log().warn(absl::StrCat(why, "; returning ", returned.size(),
                          " written but unacked envelopes, resuming ", pending_.size(),
                          " on a new session (was ", old_session, ")"));
  drop_connection(why);
  backoff_ = options_.reconnect_initial;  // the server is up: it just answered
  const std::string detail = absl::StrCat(
      why, " (the envelope was written to the old session and not acked: it may or may not have "
           "been delivered)");
  for (EnvelopePtr& env : returned) {
    std::string target = target_of(*env);
    MessageEnvelope::undeliverable(
        std::move(env),
        DeliveryFailure::transport_failure(std::move(target), TransportReason::kChannelClosed,
                                           detail),
        returns_);
  }
  if (closed()) return;
  if (anything_pending()) connect_async();  // else the next post connects
}

void StreamClientCore::sequence() {
  if (link_ != Link::kUp || closed()) return;
  {
    absl::MutexLock lock(&mu_);
    if (queued_.empty()) return;
    taking_.swap(queued_);
  }
  for (Queued& q : taking_) encode(q.env);
  taking_.clear();
}

bool StreamClientCore::encode(EnvelopePtr& env) {
  std::string_view payload = *env->data().bytes();  // serialized and cached by post
  Pending p{next_seq_, nullptr, std::string(), std::string_view(), payload.size() > kInlinePayload};
  p.frame.reserve(v2::kPrefixBytes + 96 + (p.sliced ? 0 : payload.size()));
  p.frame.resize(v2::kPrefixBytes);
  const uint64_t max_body = std::min<uint64_t>(max_frame_, limits_.max_frame_bytes) - 1;
  absl::Status s = encoder_->encode(p.seq, *env, p.frame, max_body, !p.sliced);
  if (!s.ok()) {  // this envelope fails alone; the session carries on (R-CHAN-3)
    outstanding_.fetch_sub(1, std::memory_order_acq_rel);
    std::string target = target_of(*env);
    DeliveryFailure f =
        absl::IsOutOfRange(s)
            ? DeliveryFailure::oversized_frame(std::move(target), encoder_->last_body_bytes() + 1,
                                               max_body + 1)
            : DeliveryFailure::invalid_reference(std::move(target),
                                                 runtime::InvalidReason::kProtocolMismatch,
                                                 std::string(s.message()));
    MessageEnvelope::undeliverable(std::move(env), std::move(f), returns_);
    return false;
  }
  const uint32_t length = static_cast<uint32_t>(p.frame.size() - v2::kPrefixBytes + 1 +
                                                (p.sliced ? payload.size() : 0));
  std::memcpy(p.frame.data(), &length, sizeof(length));
  p.frame[4] = static_cast<char>(v2::Kind::kData);
  if (p.sliced) p.payload = payload;
  p.env = std::move(env);
  pending_.push_back(std::move(p));
  ++next_seq_;
  return true;
}

void StreamClientCore::flush_writes() {
  if (closed() || waiting_writable_) return;
  int err = 0;
  switch (write_some(err)) {
    case Written::kAll: return;
    case Written::kFull: return wait_writable();
    case Written::kFailed:
      last_errno_ = err;
      return link_failed(gen_, os_error(err));
  }
}

bool StreamClientCore::write_inline() {
  int err = 0;
  return write_some(err) == Written::kAll;
}

StreamClientCore::Written StreamClientCore::write_some(int& err) {
  if (link_ != Link::kHandshaking && link_ != Link::kUp) return Written::kAll;
  const int fd = socket_.native_handle();
  iovec iov[kMaxIov];
  for (;;) {
    size_t count = 0, bytes = 0;
    if (control_sent_ < control_.size()) {
      iov[count++] = iovec{control_.data() + control_sent_, control_.size() - control_sent_};
      bytes += control_.size() - control_sent_;
    }
    if (link_ == Link::kUp && !pending_.empty()) {
      size_t offset = send_offset_;
      for (size_t i = next_to_send_ - pending_.front().seq;
           i < pending_.size() && count + 2 <= kMaxIov && bytes < options_.max_batch_bytes; ++i) {
        const Pending& p = pending_[i];
        if (offset < p.frame.size()) {
          iov[count++] = iovec{const_cast<char*>(p.frame.data()) + offset, p.frame.size() - offset};
          bytes += p.frame.size() - offset;
          offset = 0;
        } else {
          offset -= p.frame.size();
        }
        if (!p.payload.empty()) {
          iov[count++] = iovec{const_cast<char*>(p.payload.data()) + offset,
                               p.payload.size() - offset};
          bytes += p.payload.size() - offset;
        }
        offset = 0;
      }
    }
    if (count == 0) return Written::kAll;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Written::kFull;
      err = errno;
      return Written::kFailed;
    }
    advance(static_cast<size_t>(n));
    if (static_cast<size_t>(n) < bytes) return Written::kFull;  // the socket buffer is full
  }
}

void StreamClientCore::advance(size_t n) {
  if (control_sent_ < control_.size()) {
    const size_t take = std::min(n, control_.size() - control_sent_);
    control_sent_ += take;
    n -= take;
    if (control_sent_ == control_.size()) {
      control_.clear();
      control_sent_ = 0;
    }
  }
  while (n > 0) {
    const Pending& p = pending_[next_to_send_ - pending_.front().seq];
    const size_t left = p.frame.size() + p.payload.size() - send_offset_;
    if (n < left) {
      send_offset_ += n;
      return;
    }
    n -= left;
    send_offset_ = 0;
    ++next_to_send_;
    written_ = std::max(written_, next_to_send_);  // complete: the server may have it
  }
}

void StreamClientCore::wait_writable() {
  waiting_writable_ = true;
  socket_.async_wait(Socket::wait_write, [self = shared_from_this(), gen = gen_](
                                             const boost::system::error_code& ec) {
    absl::MutexLock lock(&self->io_mu_);
    if (gen != self->gen_ || self->closed()) return;
    self->waiting_writable_ = false;
    if (ec) {
      self->last_errno_ = errno_of(ec);
      return self->link_failed(gen, os_error(ec));
    }
    self->flush_writes();
  });
}

void StreamClientCore::on_dial_timeout(uint64_t gen) {
  if (gen != gen_ || closed() || link_ == Link::kUp || link_ == Link::kDown) return;
  link_failed(gen, absl::StrCat(link_ == Link::kConnecting ? "connect" : "handshake",
                                " took longer than ",
                                absl::FormatDuration(std::min(options_.dial_timeout,
                                                              options_.delivery_timeout)),
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
      log().warn(absl::StrCat("channel ", addr_text_, ": connection lost (", why, "); reconnecting"));
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
  ++gen_;
  link_ = Link::kDown;
  up_.store(false, std::memory_order_release);
  next_to_send_ = acked_;
  send_offset_ = 0;
  control_.clear();
  control_sent_ = 0;
  waiting_writable_ = false;
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
  if (!anything_pending()) {
    idle_ = true;
    return;
  }
  if (absl::Now() - progress_at_ < options_.delivery_timeout) return arm_deadline();
  close_channel(TransportReason::kAckTimedOut,
                absl::DeadlineExceededError(absl::StrCat(
                    "channel ", addr_text_, ": no ack for seq ", acked_, " within ",
                    absl::FormatDuration(options_.delivery_timeout),
                    last_error_.empty() ? "" : absl::StrCat(" (last error: ", last_error_, ")"))),
                /*rejected=*/false);
}

void StreamClientCore::close_channel(TransportReason reason, absl::Status why, bool rejected) {
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
  for (Pending& p : pending_) {
    if (p.seq >= acked_ && p.env) returned.push_back(std::move(p.env));
  }
  for (Queued& q : queued) returned.push_back(std::move(q.env));
  pending_.clear();
  outstanding_.store(0, std::memory_order_release);
  // §11: a closing client says so when it can do it cleanly (no DATA frame cut in half).
  if (link_ == Link::kUp && send_offset_ == 0 && control_sent_ == 0 && !waiting_writable_ &&
      absl::IsCancelled(why)) {
    std::string goodbye;
    v2::append(goodbye, v2::Goodbye{static_cast<uint16_t>(v2::GoodbyeCode::kClientClosing),
                                    next_seq_, {}, "the client closed the channel"});
    [[maybe_unused]] const ssize_t n =
        ::send(socket_.native_handle(), goodbye.data(), goodbye.size(), MSG_NOSIGNAL);
  }
  boost::system::error_code ignored;
  socket_.close(ignored);
  reconnect_timer_.cancel();
  deadline_timer_.cancel();
  dial_timer_.cancel();
  if (resolver_) resolver_->cancel();
  link_ = Link::kDown;
  up_.store(false, std::memory_order_release);
  ++gen_;
  if (!absl::IsCancelled(why) || !returned.empty()) {
    log().warn(
        absl::StrCat(why.message(), "; channel closed, returning ", returned.size(), " envelopes"));
  }
  const std::string detail(why.message());
  // R-FAIL-1: the OS error behind a dial or a timeout travels as a field, not only as text.
  const int err = reason == TransportReason::kChannelClosed ? 0 : last_errno_;
  for (EnvelopePtr& env : returned) {
    std::string target = target_of(*env);
    DeliveryFailure f = DeliveryFailure::transport_failure(std::move(target), reason, detail);
    f.os_errno = err;
    MessageEnvelope::undeliverable(std::move(env), std::move(f), returns_);
  }
}

void StreamClientCore::trim() {
  while (!pending_.empty() && pending_.front().seq < acked_) pending_.pop_front();
}

void StreamClientCore::new_session() {
  // Everything pending is unwritten (the caller returned or dropped the rest): it is encoded
  // again, from seq 0, when the new session's WELCOME announces its dictionary bounds.
  session_ = random_session(session_);
  session_presented_ = false;
  encoder_.reset();
  acked_ = written_ = next_to_send_ = 0;
  next_seq_ = pending_.size();
  uint64_t seq = 0;
  for (Pending& p : pending_) p.seq = seq++;
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
  void close() override {
    if (core_->closed()) return;
    core_->close(absl::CancelledError(
        absl::StrCat("channel ", addr().to_string(), ": the client was closed")));
  }

 private:
  std::shared_ptr<StreamClientCore> core_;  // shared with the I/O thread's pending handlers
};

}  // namespace

absl::StatusOr<std::unique_ptr<ChannelClient>> dial_stream(IoThread& io, ChannelAddr addr,
                                                           ReturnHandle& returns,
                                                           ChannelOptions options,
                                                           bool in_background) {
  std::vector<Endpoint> endpoints;
  // A background dial of a tcp host name resolves on the I/O thread; a numeric host, an ipc
  // path and a foreground dial resolve here (without DNS for the first two).
  boost::system::error_code not_numeric;
  const bool resolve_later = in_background &&
                             addr.transport() == ChannelAddr::Transport::kTcp &&
                             (boost::asio::ip::make_address(std::string(addr.host()), not_numeric),
                              not_numeric);
  if (!resolve_later) {
    absl::StatusOr<std::vector<Endpoint>> resolved = endpoints_of(addr, /*passive=*/false);
    if (!resolved.ok()) {
      return absl::UnavailableError(
          absl::StrCat("dial ", addr.to_string(), ": ", resolved.status().message()));
    }
    endpoints = *std::move(resolved);
  }
  auto core = std::make_shared<StreamClientCore>(io, addr, std::move(endpoints), returns, options);
  if (in_background) {
    core->start_in_background();
  } else {
    if (absl::Status s = core->connect_first(); !s.ok()) return s;
    core->start();
  }
  return std::unique_ptr<ChannelClient>(new StreamChannelClient(std::move(addr), std::move(core)));
}

}  // namespace postal::routing::internal
