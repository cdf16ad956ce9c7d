// StreamClientCore's session half (stream_client.h has the threading, docs/wire.md the protocol):
// the server's answers (WELCOME, ACK, REJECT, GOODBYE), resuming on a new session, sequencing and
// encoding envelopes as DATA frames (§6.1), and the non-blocking gathered writes (§13). Every
// function here runs holding io_mu_.
#include "stream_client.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "postal/wire/absl_compat.h"

namespace postal::routing::internal {

using runtime::DeliveryFailure;
using runtime::EnvelopePtr;
using runtime::MessageEnvelope;
using runtime::TransportReason;

namespace {

// iovecs per sendmsg (the platform's IOV_MAX is 1024).
constexpr size_t kMaxIov = 1024;
// Payloads up to this size are copied into their frame; larger ones are written from the
// envelope as a slice (§6.7).
constexpr size_t kInlinePayload = 512;

}  // namespace

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

}  // namespace postal::routing::internal
