// StreamClientCore's session half (stream_client.h has the threading, docs/wire.md the protocol):
// the server's answers (WELCOME, ACK, REJECT, GOODBYE), resuming on a new session, and
// sequencing and encoding envelopes as DATA frames (§6.1); the writes are in
// stream_client_write.cc. Every function here runs holding io_mu_.
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "channel_auth.h"
#include "postal/routing/channel_key.h"
#include "postal/wire/absl_compat.h"
#include "stream_client.h"

namespace postal::routing::internal {

using runtime::DeliveryFailure;
using runtime::EnvelopePtr;
using runtime::MessageEnvelope;
using runtime::TransportReason;

namespace {

// Payloads up to this size are copied into their frame; larger ones are written from the
// envelope as a slice (§6.7).
constexpr size_t kInlinePayload = 512;
// The first payload this large widens an ipc channel's send buffer, for this connection and
// every later one (widen_send_buffer, socket_util.h); channels of small payloads keep the default.
constexpr size_t kWidenSendBufferAt = 64 << 10;

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
    case v2::Kind::kChallenge:
      return on_challenge(gen, body);
    case v2::Kind::kReject: {
      absl::StatusOr<v2::Reject> r = v2::decode_reject(body);
      return r.ok() ? on_reject(gen, *r) : stream_error(r.status());
    }
    case v2::Kind::kGoodbye: {
      absl::StatusOr<v2::Goodbye> g = v2::decode_goodbye(body);
      return g.ok() ? on_goodbye(gen, *g) : stream_error(g.status());
    }
    case v2::Kind::kPing:
    case v2::Kind::kPong:
      return on_heartbeat_frame(gen, kind, body);
    case v2::Kind::kCancel:
      return on_cancel(gen, body);
    case v2::Kind::kCredit:
      return on_credit(gen, body);
    default:
      return link_failed(gen, absl::StrCat("protocol error: unexpected frame kind ",
                                           static_cast<int>(kind), " from the server"));
  }
}

void StreamClientCore::on_cancel(uint64_t gen, std::string_view body) {
  if (link_ != Link::kUp) return link_failed(gen, "protocol error: CANCEL before WELCOME");
  absl::StatusOr<v2::TransferEnd> cancel = v2::decode_transfer_end(body);
  if (!cancel.ok()) {
    return link_failed(gen, absl::StrCat("protocol error: CANCEL: ", cancel.status().message()));
  }
  // An unknown transfer is ignored: the CANCEL may cross its completion or this side's ABORT.
  for (const std::unique_ptr<Transfer>& t : transfers_) {
    if (t->seq != cancel->seq || t->ending) continue;
    t->ending = true;
    t->cancel = *std::move(cancel);
    break;
  }
  flush_writes();
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
             welcome.dict_max_bytes != limits_.dict_max_bytes ||
             welcome.features != limits_.features) {
    mismatch = "the server changed the session's limits or features (§4.3 rule 4)";
  }
  if (mismatch.empty() && (welcome.features & ~offered_features()) != 0) {  // §15 rule 52
    mismatch = absl::StrCat("the server enabled features ", welcome.features,
                            " this client did not offer (", offered_features(), ")");
  }
  if (!mismatch.empty()) {
    return close_channel(
        TransportReason::kChannelClosed,
        absl::FailedPreconditionError(absl::StrCat("channel ", addr_text_, ": ", mismatch)),
        /*rejected=*/true);
  }
  const size_t before = pending_.size();
  // §10.1: pauses belong to the session. A new one starts with every destination open, and
  // what paused ones held goes after everything sequenced before; a resumed one keeps them (the
  // server repeats them, and the opens it could not send, right after its WELCOME).
  std::vector<EnvelopePtr> unpaused;
  if (!hello_resuming_) unpaused = take_paused();
  if (!hello_resuming_) {
    // A new session: its dictionary starts empty with the bounds the server announced, and
    // what is pending (never written) is encoded afresh from seq 0, held ones after it.
    limits_ = welcome;
    encoder_.emplace(v2::DictLimits{welcome.dict_max_entries, welcome.dict_max_bytes});
    std::deque<Pending> old;
    old.swap(pending_);
    std::deque<EnvelopePtr> held;
    held.swap(held_);
    transfers_.clear();
    cut_half_.reset();
    next_seq_ = acked_ = written_ = next_to_send_ = 0;
    for (Pending& p : old) admit(std::move(p.env));
    for (EnvelopePtr& env : held) admit(std::move(env));
  } else {
    acked_ = welcome.next_expected;  // R-CHAN-2: frames below it were enqueued there
    trim();
    // §9.5 rule 28: listed transfers resume at what the server holds; unlisted ones below
    // next_expected are complete; the others start over after their DATA frame.
    cut_half_.reset();
    std::vector<Transfer*> complete;
    for (const std::unique_ptr<Transfer>& t : transfers_) {
      t->sent = t->received = 0;
      if (t->seq >= welcome.next_expected) continue;
      auto listed = std::find_if(welcome.transfers.begin(), welcome.transfers.end(),
                                 [&](const v2::TransferProgress& p) { return p.seq == t->seq; });
      if (listed != welcome.transfers.end() && listed->received == ~uint64_t{0}) {
        t->ending = true;  // cancelled there (§9.5): an ABORT is due
        continue;
      }
      if (listed == welcome.transfers.end() || listed->received >= t->size) {
        complete.push_back(t.get());
      } else {
        t->sent = t->received = listed->received;
      }
    }
    for (Transfer* t : complete) finish_transfer(t);
  }
  for (EnvelopePtr& env : unpaused) admit(std::move(env));
  next_to_send_ = acked_;  // everything else is (re)sent
  send_offset_ = 0;
  link_ = Link::kUp;
  if (dialer_) connected();  // a dialer's connection counts once the server answered
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
  arm_heartbeat();
  flush_writes();
}

void StreamClientCore::on_ack(uint64_t gen, const v2::Ack& ack) {
  if (link_ != Link::kUp) return link_failed(gen, "protocol error: ACK before WELCOME");
  if (ack.next_expected > written_) {
    return link_failed(gen, absl::StrCat("protocol error: ACK ", ack.next_expected,
                                         " beyond the last frame written (", written_, ")"));
  }
  if (ack.next_expected > acked_) {
    acked_ = ack.next_expected;
    trim();
  }
  bool window_moved = false;
  for (const v2::TransferProgress& p : ack.transfers) {  // §9.4
    auto it = std::find_if(transfers_.begin(), transfers_.end(),
                           [&](const std::unique_ptr<Transfer>& t) { return t->seq == p.seq; });
    if (it == transfers_.end() || p.seq >= acked_ || p.received > (*it)->sent) {
      return link_failed(gen, absl::StrCat("protocol error: ACK of transfer ", p.seq, " at ",
                                           p.received, " beyond what was sent"));
    }
    Transfer* t = it->get();
    if (p.received <= t->received) continue;
    t->received = p.received;
    window_moved = true;
    if (t->stream) t->stream->release(t->received);  // §9.7: the gateway may take more
    if (t->received == t->size) finish_transfer(t);
  }
  progress_at_ = absl::Now();  // §12 rule 40: every ACK restarts the delivery timer
  if (!anything_pending()) idle_ = true;
  // The window opened: more chunks (or released envelopes); or an ABORT still waits.
  if (window_moved || ending_transfers()) flush_writes();
}

// ---- R-SEC-1: authentication (docs/wire.md §4.5) ----

void StreamClientCore::on_challenge(uint64_t gen, std::string_view body) {
  if (link_ != Link::kHandshaking || challenged_ || options_.key == nullptr) {
    return link_failed(gen,
                       absl::StrCat("protocol error: an unexpected CHALLENGE",
                                    options_.key == nullptr ? " (this client has no key)" : ""));
  }
  absl::StatusOr<v2::Challenge> challenge = v2::decode_challenge(body);
  if (!challenge.ok()) {
    return link_failed(gen, absl::StrCat("protocol error: ", challenge.status().message()));
  }
  // Mutual: the server proves the key first; a server that cannot gets no AUTH, and the
  // channel closes for good (another topology's server, or someone posing as one).
  // X (wire.md §4.5): over TLS the proofs are bound to this TLS session.
  const auth::Mac expected =
      auth::server_mac(*options_.key, hello_body_, challenge->server_nonce, tls_exporter_);
  if (!auth::equal(challenge->server_mac, expected)) {
    return close_channel(
        TransportReason::kChannelClosed,
        absl::FailedPreconditionError(absl::StrCat(
            "channel ", addr_text_,
            ": the server did not prove the topology secret (CHALLENGE server_mac does not "
            "verify; R-SEC-1): it belongs to another topology, or is not who it claims")),
        /*rejected=*/true);
  }
  challenged_ = true;
  v2::Auth proof;
  proof.client_mac = auth::client_mac(*options_.key, hello_body_, challenge->server_nonce,
                                      challenge->server_mac, tls_exporter_);
  v2::append(control_, proof);
  flush_writes();
}

// ---- end of R-SEC-1 ----

void StreamClientCore::on_reject(uint64_t gen, const v2::Reject& reject) {
  if (link_ != Link::kHandshaking) return link_failed(gen, "protocol error: REJECT after WELCOME");
  std::string why =
      absl::StrCat("channel ", addr_text_, ": the server rejected the session: ", reject.text);
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
    acked_ = goodbye.next_expected;
    trim();
  }
  const std::string why =
      absl::StrCat("channel ", addr_text_, ": the server said goodbye: ", goodbye.text);
  if (goodbye.code == static_cast<uint16_t>(v2::GoodbyeCode::kIdle)) return link_failed(gen, why);
  if (goodbye.code == static_cast<uint16_t>(v2::GoodbyeCode::kProtocolError)) {
    return resume_on_new_session(why, /*server_final=*/true);
  }
  // server_stopping (and unknown codes): it processes nothing more of this session.
  close_channel(TransportReason::kChannelClosed,
                absl::UnavailableError(absl::StrCat(why, " (the server stopped)")),
                /*rejected=*/false, /*server_final=*/true);
}

void StreamClientCore::resume_on_new_session(const std::string& why, bool server_final) {
  // Frames written to the old session and not acked may or may not have been enqueued before it
  // went away: return them (at most once). The rest never left this process: they continue, in
  // order, on a new session.
  // Transfers registered (or possibly registered) on the old session go back the same way.
  std::vector<EnvelopePtr> returned;
  while (!pending_.empty() && pending_.front().seq < written_) {
    if (pending_.front().seq >= acked_) returned.push_back(std::move(pending_.front().env));
    pending_.pop_front();
  }
  for (std::unique_ptr<Transfer>& t : transfers_) {
    if (t->env) returned.push_back(std::move(t->env));
  }
  outstanding_.fetch_sub(returned.size(), std::memory_order_acq_rel);
  for (const EnvelopePtr& env : returned) bounds_.release(*env);  // R-FLOW-2
  acked_ = written_;
  const uint64_t old_session = session_;
  new_session();
  log().warn(absl::StrCat(why, "; returning ", returned.size(),
                          " written but unacked envelopes, resuming ", pending_.size(),
                          " on a new session (was ", old_session, ")"));
  drop_connection(why);
  backoff_ = options_.reconnect_initial;  // the server is up: it just answered
  const std::string detail =
      server_final ? absl::StrCat(why,
                                  " (the server processed nothing more of the old session: the "
                                  "envelope was not delivered)")
                   : absl::StrCat(why,
                                  " (the envelope was written to the old session and not acked: it "
                                  "may or may not have been delivered)");
  for (EnvelopePtr& env : returned) {
    std::string target = target_of(*env);
    DeliveryFailure f = DeliveryFailure::transport_failure(std::move(target),
                                                           TransportReason::kChannelClosed, detail);
    f.maybe_delivered = !server_final;
    MessageEnvelope::undeliverable(std::move(env), std::move(f), returns_);
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
  const size_t limit = chunk_limit();
  for (Queued& q : taking_) {
    // The common case, no transfer under way and none coming, nothing paused: nothing can be
    // held.
    if (q.bytes <= limit && transfers_.empty() && held_.empty() && paused_.empty() &&
        !q.env->data().stream()) {
      encode(q.env);
    } else {
      admit(std::move(q.env));
    }
  }
  taking_.clear();
}

size_t StreamClientCore::chunk_limit() const {
  // A CHUNK frame is its kind, 16 bytes of header and the bytes (§9.2).
  const uint64_t frame = std::min<uint64_t>(max_frame_, limits_.max_frame_bytes);
  return static_cast<size_t>(std::min<uint64_t>(options_.chunk_bytes, frame - 17));
}

bool StreamClientCore::chunked(MessageEnvelope& env) const {
  return env.data().stream() || (*env.data().serialized())->size() > chunk_limit();
}

bool StreamClientCore::must_hold(MessageEnvelope& env) const {
  const runtime::ActorAddr& to = env.dest().actor_addr();
  for (const std::unique_ptr<Transfer>& t : transfers_) {
    if (!t->released && t->from == env.sender() && t->to == to) return true;
  }
  return chunked(env) && transfers_.size() >= limits_.max_transfers;
}

void StreamClientCore::admit(EnvelopePtr env) {
  if (!held_.empty()) {
    const runtime::ActorAddr& to = env->dest().actor_addr();
    for (const EnvelopePtr& h : held_) {
      if (h->sender() == env->sender() && h->dest().actor_addr() == to) {
        held_.push_back(std::move(env));
        return;
      }
    }
  }
  if (hold_paused(env)) return;  // §10.1: its destination's mailbox is full
  if (must_hold(*env)) {
    held_.push_back(std::move(env));
    return;
  }
  encode(env);
}

void StreamClientCore::release_held() {
  if (held_.empty() || link_ != Link::kUp || closed()) return;
  std::deque<EnvelopePtr> held;
  held.swap(held_);
  for (EnvelopePtr& env : held) admit(std::move(env));  // in order: a pair stays behind its first
}

bool StreamClientCore::encode(EnvelopePtr& env) {
  // Serialized and cached by post, or still streaming in (§9.7).
  std::shared_ptr<PayloadStream> stream = PayloadStream::of(env->data());
  wire::PayloadBytes* const bytes = stream ? nullptr : *env->data().serialized();
  const uint64_t size = stream ? stream->size() : bytes->size();
  const bool chunked = stream || size > chunk_limit();
  if (size >= kWidenSendBufferAt && !wide_send_buffer_) {
    wide_send_buffer_ = true;
    widen_send_buffer(socket_, addr_);
  }
  Pending p{next_seq_, nullptr, std::string(), {}, 0, !chunked && size > kInlinePayload};
  // A transfer cuts its chunks from one run of bytes (post flattened it: keep_bytes_only).
  const std::string_view payload = chunked && bytes != nullptr ? bytes->contiguous() : "";
  auto fail = [&](DeliveryFailure f) {  // this envelope fails alone; the session carries on
    outstanding_.fetch_sub(1, std::memory_order_acq_rel);
    bounds_.release(*env);  // R-FLOW-2
    MessageEnvelope::undeliverable(std::move(env), std::move(f), returns_);
    return false;
  };
  if (chunked && size > limits_.max_message_bytes) {  // R-CHAN-3, §9.1
    return fail(DeliveryFailure::oversized_frame(target_of(*env), size, limits_.max_message_bytes));
  }
  p.frame.reserve(v2::kPrefixBytes + 96 + (p.sliced || chunked ? 0 : size));
  p.frame.resize(v2::kPrefixBytes);
  const uint64_t max_body = std::min<uint64_t>(max_frame_, limits_.max_frame_bytes) - 1;
  absl::Status s = encoder_->encode(p.seq, *env, p.frame, max_body, !p.sliced, chunked);
  if (!s.ok()) {  // R-CHAN-3
    std::string target = target_of(*env);
    return fail(absl::IsOutOfRange(s)
                    ? DeliveryFailure::oversized_frame(
                          std::move(target), encoder_->last_body_bytes() + 1, max_body + 1)
                    : DeliveryFailure::invalid_reference(std::move(target),
                                                         runtime::InvalidReason::kProtocolMismatch,
                                                         std::string(s.message())));
  }
  const uint32_t length =
      static_cast<uint32_t>(p.frame.size() - v2::kPrefixBytes + 1 + (p.sliced ? size : 0));
  std::memcpy(p.frame.data(), &length, sizeof(length));
  p.frame[4] = static_cast<char>(v2::Kind::kData);
  if (p.sliced) {  // §6.7: written from the envelope's bytes, large fields from their owners
    bytes->for_each_piece([&](std::string_view piece) { p.payload.push_back(piece); });
    p.payload_bytes = size;
  }
  if (chunked) {
    auto t = std::make_unique<Transfer>();
    t->seq = p.seq;
    t->size = size;
    t->payload = payload;
    if (stream) {
      stream->set_consumer_wake([weak = weak_from_this()] {
        if (std::shared_ptr<StreamClientCore> self = weak.lock()) self->kick();
      });
      t->stream = std::move(stream);
    }
    t->from = env->sender();
    t->to = env->dest().actor_addr();
    p.transfer = t.get();
    transfers_.push_back(std::move(t));
  }
  p.env = std::move(env);
  pending_.push_back(std::move(p));
  ++next_seq_;
  return true;
}

void StreamClientCore::trim() {
  // Acked DATA frames are done with, except a transfer's: its envelope stays the client's until
  // the server holds every byte (§9.6).
  // R-FLOW-2: the acked run's bounds first, under one lock; the envelopes go after it.
  auto it = pending_.begin();
  bounds_.release_each([&]() -> const runtime::MessageEnvelope* {
    for (; it != pending_.end() && it->seq < acked_; ++it) {
      if (it->transfer == nullptr && it->env) return (it++)->env.get();
    }
    return nullptr;
  });
  size_t done = 0;
  while (!pending_.empty() && pending_.front().seq < acked_) {
    Pending& p = pending_.front();
    if (p.transfer != nullptr) {
      p.transfer->env = std::move(p.env);
    } else {
      ++done;
    }
    pending_.pop_front();
  }
  if (done > 0) outstanding_.fetch_sub(done, std::memory_order_acq_rel);
}

void StreamClientCore::new_session() {
  // Everything pending is unwritten (the caller returned or dropped the rest): it is encoded
  // again, from seq 0, when the new session's WELCOME announces its dictionary bounds.
  session_ = random_session(session_);
  session_presented_ = false;
  encoder_.reset();
  transfers_.clear();  // their DATA frames were never written: encoded again, with the rest
  cut_half_.reset();
  for (Pending& p : pending_) p.transfer = nullptr;
  acked_ = written_ = next_to_send_ = 0;
  next_seq_ = pending_.size();
  uint64_t seq = 0;
  for (Pending& p : pending_) p.seq = seq++;
}

}  // namespace postal::routing::internal
