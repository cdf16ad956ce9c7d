// The ipc/tcp ChannelClient: serialize once, sequence, batch, retransmit until acked
// (R-CHAN-1…4; channel_client.h has the contract, stream_client.h the threading, docs/wire-v1.md the
// protocol).
#include "stream_client.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <utility>

#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

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
constexpr size_t kMaxWriteBuffers = 1024;

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

}  // namespace

StreamClientCore::StreamClientCore(IoThread& io, ChannelAddr addr, std::vector<Endpoint> endpoints,
                                   ReturnHandle& returns, ChannelOptions options)
    : io_(io),
      addr_text_(addr.to_string()),
      addr_(std::move(addr)),
      endpoints_(std::move(endpoints)),
      returns_(returns),
      options_(options),
      max_frame_(std::min<uint64_t>(options.max_frame_bytes, std::numeric_limits<uint32_t>::max())),
      session_(random_session()),
      socket_(io.context()),
      reconnect_timer_(io.context()),
      deadline_timer_(io.context()),
      dial_timer_(io.context()),
      decoder_(options.max_frame_bytes),
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
    self->link_ = Link::kHandshaking;
    self->send_hello();
    self->read(self->gen_);
  });
}

void StreamClientCore::start_in_background() {
  boost::asio::post(io_.context(), [self = shared_from_this()] { self->resolve_then_connect(); });
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
        if (self->closed()) return;
        if (ec || results.empty()) {
          return self->dial_failed(absl::StrCat("cannot resolve ", sv(self->addr_.host()), ": ",
                                                ec ? os_error(ec) : "no address"));
        }
        for (const auto& entry : results) self->endpoints_.emplace_back(entry.endpoint());
        self->connect_async();
      });
}

void StreamClientCore::fail_dial_queue_full(EnvelopePtr env, ReturnHandle& ret, size_t queued,
                                            size_t bytes) {
  std::string target = env->next_hop().to_string();
  MessageEnvelope::undeliverable(
      std::move(env),
      DeliveryFailure::transport_failure(
          std::move(target), TransportReason::kDialFailed,
          absl::StrCat(addr_text_, ": still dialing and its queue is full (", queued,
                       " envelopes, ", bytes, " bytes; bounds max_dial_queue ",
                       options_.max_dial_queue, ", max_dial_queue_bytes ",
                       options_.max_dial_queue_bytes, ")")),
      ret);
}

void StreamClientCore::post(EnvelopePtr env, ReturnHandle& ret) {
  if (closed_.load(std::memory_order_acquire)) return fail_closed(std::move(env), ret);
  absl::StatusOr<std::string> frame = encode_data_frame(*env);
  if (!frame.ok()) {  // cereal's exceptions become ProtocolMismatch at the wire boundary
    std::string target = env->next_hop().to_string();
    MessageEnvelope::undeliverable(std::move(env),
                                   DeliveryFailure::invalid_reference(
                                       std::move(target), runtime::InvalidReason::kProtocolMismatch,
                                       std::string(frame.status().message())),
                                   ret);
    return;
  }
  const uint64_t len = frame->size() - kLengthPrefixBytes;
  if (len > max_frame_) {  // R-CHAN-3: this envelope fails alone; the channel carries on
    std::string target = env->next_hop().to_string();
    MessageEnvelope::undeliverable(
        std::move(env), DeliveryFailure::oversized_frame(std::move(target), len, max_frame_), ret);
    return;
  }
  bool kick = false;
  size_t full_queue = 0, full_bytes = 0;
  {
    absl::MutexLock lock(&mu_);
    if (dialing_.load(std::memory_order_relaxed) && !closed_.load(std::memory_order_relaxed)) {
      // R-FLOW-3: what waits for a dial is bounded.
      if (pending_.size() >= options_.max_dial_queue ||
          dial_queue_bytes_ + frame->size() > options_.max_dial_queue_bytes) {
        full_queue = pending_.size();
        full_bytes = dial_queue_bytes_;
      } else {
        dial_queue_bytes_ += frame->size();
      }
    }
    if (full_queue == 0 && full_bytes == 0 && !closed_.load(std::memory_order_relaxed)) {
      const uint64_t seq = next_seq_++;
      set_data_seq(*frame, seq);
      pending_.push_back(Pending{seq, absl::Now(), std::move(env), *std::move(frame)});
      kick = !kick_scheduled_;
      kick_scheduled_ = true;
    }
  }
  if (env && (full_queue != 0 || full_bytes != 0)) {
    return fail_dial_queue_full(std::move(env), ret, full_queue, full_bytes);
  }
  if (env) return fail_closed(std::move(env), ret);  // closed while we were encoding
  if (kick) boost::asio::post(io_.context(), [self = shared_from_this()] { self->on_kick(); });
}

void StreamClientCore::close(absl::Status why) {
  run_in_io_thread(io_, [this, &why] {
    close_channel(TransportReason::kChannelClosed, std::move(why), /*rejected=*/false);
  });
}

absl::Status StreamClientCore::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

size_t StreamClientCore::unacked() const {
  absl::MutexLock lock(&mu_);
  return closed_.load(std::memory_order_relaxed) ? 0 : next_seq_ - acked_;
}

void StreamClientCore::fail_closed(EnvelopePtr env, ReturnHandle& ret) {
  absl::Status why;
  TransportReason reason;
  {
    absl::MutexLock lock(&mu_);
    why = status_;
    reason = closed_reason_;
  }
  std::string target = env->next_hop().to_string();
  MessageEnvelope::undeliverable(
      std::move(env),
      DeliveryFailure::transport_failure(
          std::move(target), reason,
          absl::StrCat("channel ", addr_text_, " is closed: ", why.message())),
      ret);
}

void StreamClientCore::on_kick() {
  {
    absl::MutexLock lock(&mu_);
    kick_scheduled_ = false;
  }
  if (closed()) return;
  if (link_ == Link::kDown && !reconnect_scheduled_) connect_async();  // lazy reconnect
  arm_deadline();
  maybe_write();
}

void StreamClientCore::connect_async() {
  if (writing_) {  // the old connection's aborted write has not completed yet
    reconnect_wanted_ = true;
    return;
  }
  link_ = Link::kConnecting;
  const uint64_t gen = ++gen_;
  boost::system::error_code ignored;
  socket_.close(ignored);
  dial_timer_.expires_after(to_chrono(std::min(options_.dial_timeout, options_.delivery_timeout)));
  dial_timer_.async_wait([self = shared_from_this(), gen](const boost::system::error_code& ec) {
    if (!ec) self->on_dial_timeout(gen);
  });
  boost::asio::async_connect(
      socket_, endpoints_.begin(), endpoints_.end(),
      [self = shared_from_this(), gen](const boost::system::error_code& ec, auto) {
        self->on_connected(gen, ec);
      });
}

void StreamClientCore::on_connected(uint64_t gen, const boost::system::error_code& ec) {
  if (gen != gen_ || closed()) return;
  if (ec) {
    last_error_ = absl::StrCat("connect: ", os_error(ec));
    if (dialing_.load(std::memory_order_relaxed)) return dial_failed(os_error(ec));
    link_ = Link::kDown;
    schedule_reconnect();
    return;
  }
  set_cloexec(socket_.native_handle());  // after the fact; spawns close every fd anyway
  tune(socket_, addr_);
  connected();
  link_ = Link::kHandshaking;
  send_hello();
  read(gen);
}

void StreamClientCore::send_hello() {
  hello_.clear();
  {
    absl::MutexLock lock(&mu_);
    trim_locked();
    // Nothing written is unacked, so the server holds nothing of this session that matters:
    // present a new session. A server that restarted would reject the old one (R-CHAN-1).
    if (acked_ > 0 && acked_ >= written_) new_session_locked();
    hello_first_unacked_ = acked_;
    append_hello(hello_, HelloFrame{kWireVersion, session_, acked_});
  }
  writing_ = true;
  writing_data_ = false;
  boost::asio::async_write(
      socket_, boost::asio::buffer(hello_),
      [self = shared_from_this(), gen = gen_](const boost::system::error_code& ec, size_t n) {
        self->on_written(gen, ec, n);
      });
}

void StreamClientCore::read(uint64_t gen) {
  socket_.async_read_some(
      boost::asio::buffer(read_buf_),
      [self = shared_from_this(), gen](const boost::system::error_code& ec, size_t n) {
        self->on_read(gen, ec, n);
      });
}

void StreamClientCore::on_read(uint64_t gen, const boost::system::error_code& ec, size_t n) {
  if (gen != gen_ || closed()) return;
  if (ec) {
    return link_failed(
        gen, ec == boost::asio::error::eof ? "the server closed the connection" : os_error(ec));
  }
  decoder_.feed(std::string_view(read_buf_.data(), n));
  if (n == read_buf_.size() && read_buf_.size() < kReadChunk) {
    read_buf_.resize(read_buf_.size() * 2);
  }
  for (;;) {
    absl::StatusOr<std::optional<Frame>> frame = decoder_.next();
    if (!frame.ok()) {
      if (absl::IsFailedPrecondition(frame.status())) {  // a WELCOME of another version
        return close_channel(TransportReason::kChannelClosed,
                             absl::FailedPreconditionError(absl::StrCat(
                                 "channel ", addr_text_, ": ", frame.status().message())),
                             /*rejected=*/true);
      }
      return link_failed(gen, absl::StrCat("protocol error: ", frame.status().message()));
    }
    if (!frame->has_value()) break;
    handle(gen, std::move(**frame));
    if (gen != gen_ || closed()) return;
  }
  read(gen);
}

void StreamClientCore::handle(uint64_t gen, Frame frame) {
  if (auto* welcome = std::get_if<WelcomeFrame>(&frame)) return on_welcome(gen, *welcome);
  if (auto* ack = std::get_if<AckFrame>(&frame)) return on_ack(gen, *ack);
  if (auto* reject = std::get_if<RejectFrame>(&frame)) return on_reject(gen, *reject);
  link_failed(gen, absl::StrCat("protocol error: unexpected ", sv(to_string(kind_of(frame))),
                                " from the server"));
}

void StreamClientCore::on_welcome(uint64_t gen, const WelcomeFrame& welcome) {
  if (link_ != Link::kHandshaking) return link_failed(gen, "protocol error: a second WELCOME");
  size_t retransmit = 0;
  uint64_t session = 0;
  std::string mismatch;
  {
    absl::MutexLock lock(&mu_);
    session = session_;
    if (welcome.next_expected_seq < acked_ || welcome.next_expected_seq > next_seq_) {
      mismatch = absl::StrCat("the server expects seq ", welcome.next_expected_seq,
                              " but this session has acked ", acked_, " and sent ", next_seq_);
    } else {
      acked_ = welcome.next_expected_seq;  // R-CHAN-2: frames below it were enqueued there
      written_ = std::max(written_, acked_);
      next_to_send_ = acked_;  // everything else is retransmitted
      retransmit = next_seq_ - acked_;
      trim_locked();
    }
  }
  if (!mismatch.empty()) {
    return close_channel(
        TransportReason::kChannelClosed,
        absl::FailedPreconditionError(absl::StrCat("channel ", addr_text_, ": ", mismatch)),
        /*rejected=*/true);
  }
  link_ = Link::kUp;
  dial_timer_.cancel();
  backoff_ = options_.reconnect_initial;
  if (outage_) {
    log().info(absl::StrCat("channel ", addr_text_, ": reconnected (session ", session, " at seq ",
                          welcome.next_expected_seq, "); sending ", retransmit,
                          " unacked envelopes"));
    outage_ = false;
  }
  arm_deadline();
  maybe_write();
}

void StreamClientCore::on_ack(uint64_t gen, const AckFrame& ack) {
  if (link_ != Link::kUp) return link_failed(gen, "protocol error: ACK before WELCOME");
  std::string error;
  {
    absl::MutexLock lock(&mu_);
    if (ack.next_expected > next_to_send_) {
      error = absl::StrCat("protocol error: ACK ", ack.next_expected,
                           " beyond the last frame sent (", next_to_send_, ")");
    } else {
      acked_ = std::max(acked_, ack.next_expected);
      written_ = std::max(written_, acked_);  // the ACK may overtake the write's completion
      trim_locked();
    }
  }
  if (!error.empty()) return link_failed(gen, std::move(error));
  arm_deadline();
}

void StreamClientCore::on_reject(uint64_t gen, const RejectFrame& reject) {
  if (link_ != Link::kHandshaking) return link_failed(gen, "protocol error: REJECT after WELCOME");
  std::string why = absl::StrCat("channel ", addr_text_,
                                 ": the server rejected the session: ", reject.reason);
  if (reject.version != kWireVersion || hello_first_unacked_ == 0) {
    // Another wire version, or a server that turns away even a session it cannot know: a new
    // session would fare no better.
    return close_channel(TransportReason::kChannelClosed,
                         absl::FailedPreconditionError(std::move(why)), /*rejected=*/true);
  }
  // The server lost (or disagrees about) this session. Frames written to it and not acked may
  // or may not have been enqueued before it went away: return them (at most once). The rest
  // never left this process: they continue, in order, on a new session.
  std::vector<EnvelopePtr> returned;
  uint64_t old_session = 0;
  uint64_t resumed = 0;
  {
    absl::MutexLock lock(&mu_);
    old_session = session_;
    for (Pending& p : pending_) {
      if (p.seq >= written_) break;
      if (p.seq >= acked_ && p.env) returned.push_back(std::move(p.env));
    }
    acked_ = written_;
    // Only the HELLO can be in flight in kHandshaking (a new connection waits for the old
    // connection's write), so the frames may be dropped and renumbered.
    new_session_locked();
    resumed = next_seq_;
  }
  log().warn(absl::StrCat(why, "; returning ", returned.size(),
                        " written but unacked envelopes, resuming ", resumed,
                        " on a new session (was ", old_session, ")"));
  last_error_ = why;
  boost::system::error_code ignored;
  socket_.close(ignored);
  ++gen_;
  link_ = Link::kDown;
  decoder_ = FrameDecoder(options_.max_frame_bytes);
  backoff_ = options_.reconnect_initial;  // the server is up: it just answered
  const std::string detail = absl::StrCat(
      why, " (the envelope was written to the old session and not acked: it may or may not have "
           "been delivered)");
  for (EnvelopePtr& env : returned) {
    std::string target = env->next_hop().to_string();
    MessageEnvelope::undeliverable(
        std::move(env),
        DeliveryFailure::transport_failure(std::move(target), TransportReason::kChannelClosed,
                                           detail),
        returns_);
  }
  if (closed()) return;
  bool pending = false;
  {
    absl::MutexLock lock(&mu_);
    pending = next_seq_ != acked_;
  }
  if (pending) connect_async();  // else the next post connects
}

void StreamClientCore::maybe_write() {
  if (link_ != Link::kUp || writing_ || closed()) return;
  write_bufs_.clear();
  {
    absl::MutexLock lock(&mu_);
    trim_locked();
    if (pending_.empty()) return;
    size_t index = next_to_send_ - pending_.front().seq;
    size_t bytes = 0;
    while (
        index < pending_.size() && write_bufs_.size() < kMaxWriteBuffers &&
        (write_bufs_.empty() || bytes + pending_[index].frame.size() <= options_.max_batch_bytes)) {
      const std::string& frame = pending_[index].frame;
      write_bufs_.emplace_back(frame.data(), frame.size());
      bytes += frame.size();
      ++index;
    }
    write_first_seq_ = next_to_send_;
    next_to_send_ += write_bufs_.size();
  }
  if (write_bufs_.empty()) return;
  writing_ = true;
  writing_data_ = true;
  boost::asio::async_write(
      socket_, write_bufs_,
      [self = shared_from_this(), gen = gen_](const boost::system::error_code& ec, size_t n) {
        self->on_written(gen, ec, n);
      });
}

void StreamClientCore::on_written(uint64_t gen, const boost::system::error_code& ec,
                                  size_t bytes) {
  writing_ = false;
  {
    absl::MutexLock lock(&mu_);
    if (writing_data_) {  // a frame written completely may have reached the server; a cut one not
      uint64_t seq = write_first_seq_;
      for (const boost::asio::const_buffer& b : write_bufs_) {
        if (bytes < b.size()) break;
        bytes -= b.size();
        ++seq;
      }
      written_ = std::max(written_, seq);
      writing_data_ = false;
    }
    if (closed_.load(std::memory_order_relaxed)) pending_.clear();
    trim_locked();
  }
  if (closed()) return;
  if (reconnect_wanted_) {
    reconnect_wanted_ = false;
    schedule_reconnect();
    return;
  }
  if (gen != gen_) return;
  if (ec) return link_failed(gen, os_error(ec));
  maybe_write();
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
    if (unacked() > 0) {
      log().warn(absl::StrCat("channel ", addr_text_, ": connection lost (", why, "); reconnecting"));
    }
    outage_ = true;
  }
  last_error_ = std::move(why);
  boost::system::error_code ignored;
  socket_.close(ignored);
  ++gen_;
  link_ = Link::kDown;
  decoder_ = FrameDecoder(options_.max_frame_bytes);
  {
    absl::MutexLock lock(&mu_);
    next_to_send_ = acked_;
  }
  if (writing_) {
    reconnect_wanted_ = true;
  } else {
    schedule_reconnect();
  }
}

void StreamClientCore::schedule_reconnect() {
  if (closed() || reconnect_scheduled_ || link_ != Link::kDown) return;
  {
    absl::MutexLock lock(&mu_);
    if (next_seq_ == acked_) return;  // nothing pending: reconnect on the next post
  }
  reconnect_scheduled_ = true;
  reconnect_timer_.expires_after(to_chrono(backoff_));
  backoff_ = std::min(backoff_ * 2, options_.reconnect_max);
  reconnect_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    self->reconnect_scheduled_ = false;
    if (ec || self->closed() || self->link_ != Link::kDown) return;
    self->connect_async();
  });
}

void StreamClientCore::arm_deadline() {
  if (deadline_armed_ || closed()) return;
  absl::Time due;
  {
    absl::MutexLock lock(&mu_);
    const Pending* oldest = oldest_unacked_locked();
    if (oldest == nullptr) return;
    due = oldest->posted + options_.delivery_timeout;
  }
  deadline_armed_ = true;
  deadline_timer_.expires_after(to_chrono(due - absl::Now()));
  deadline_timer_.async_wait(
      [self = shared_from_this()](const boost::system::error_code& ec) { self->on_deadline(ec); });
}

void StreamClientCore::on_deadline(const boost::system::error_code& ec) {
  deadline_armed_ = false;
  if (ec || closed()) return;
  std::optional<uint64_t> expired;
  {
    absl::MutexLock lock(&mu_);
    const Pending* oldest = oldest_unacked_locked();
    if (oldest == nullptr) return;
    if (absl::Now() - oldest->posted >= options_.delivery_timeout) expired = oldest->seq;
  }
  if (!expired) return arm_deadline();
  close_channel(TransportReason::kAckTimedOut,
                absl::DeadlineExceededError(absl::StrCat(
                    "channel ", addr_text_, ": no ack for seq ", *expired, " within ",
                    absl::FormatDuration(options_.delivery_timeout),
                    last_error_.empty() ? "" : absl::StrCat(" (last error: ", last_error_, ")"))),
                /*rejected=*/false);
}

void StreamClientCore::close_channel(TransportReason reason, absl::Status why, bool rejected) {
  std::vector<EnvelopePtr> returned;
  {
    absl::MutexLock lock(&mu_);
    if (closed_.load(std::memory_order_relaxed)) return;
    closed_.store(true, std::memory_order_release);
    rejected_.store(rejected, std::memory_order_release);
    status_ = why;
    if (reason == TransportReason::kDialFailed) closed_reason_ = reason;
    for (Pending& p : pending_) {
      if (p.seq >= acked_ && p.env) returned.push_back(std::move(p.env));
    }
    if (!writing_) pending_.clear();
  }
  boost::system::error_code ignored;
  socket_.close(ignored);
  reconnect_timer_.cancel();
  deadline_timer_.cancel();
  dial_timer_.cancel();
  if (resolver_) resolver_->cancel();
  link_ = Link::kDown;
  ++gen_;
  if (!absl::IsCancelled(why) || !returned.empty()) {
    log().warn(
        absl::StrCat(why.message(), "; channel closed, returning ", returned.size(), " envelopes"));
  }
  const std::string detail(why.message());
  for (EnvelopePtr& env : returned) {
    std::string target = env->next_hop().to_string();
    MessageEnvelope::undeliverable(
        std::move(env), DeliveryFailure::transport_failure(std::move(target), reason, detail),
        returns_);
  }
}

void StreamClientCore::trim_locked() {
  if (writing_) return;  // the write in flight points into these frames
  while (!pending_.empty() && pending_.front().seq < acked_) pending_.pop_front();
}

void StreamClientCore::new_session_locked() {
  const uint64_t base = acked_;  // == written_: every frame from here on is unwritten
  while (!pending_.empty() && pending_.front().seq < base) pending_.pop_front();
  for (Pending& p : pending_) {
    p.seq -= base;
    set_data_seq(p.frame, p.seq);
  }
  next_seq_ -= base;
  acked_ = 0;
  written_ = 0;
  next_to_send_ = 0;
  session_ = random_session(session_);
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
