// One accepted connection of a ChannelServer (routing internal): reads frames straight into its
// splitter, answers HELLO (docs/wire.md §4.2), delivers DATA in seq order (§8 rules 17–19), acks
// cumulatively once per read batch (rule 20), and closes for the listener bounds (R-FLOW-4).
// Runs on the I/O thread only.
#pragma once

#include "stream_server_core.h"

namespace postal::routing::internal::stream_server {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `sink`: where writes go instead of the socket (nats://, byte_sink.h); the socket still reads.
  Connection(std::shared_ptr<ServerCore> core, Socket socket, uint64_t number, ConnectionWire wire,
             std::shared_ptr<ByteSink> sink = nullptr)
      : core_(std::move(core)),
        socket_(std::move(socket)),
        sink_(std::move(sink)),
        number_(number),
        wire_(std::move(wire)),
        accepted_at_(std::chrono::steady_clock::now()),
        last_read_(accepted_at_) {}

  void start() { read(); }

  uint64_t number() const { return number_; }
  size_t partial_bytes() const { return partial_bytes_; }

  // R-FLOW-4: closes the connection if it is past the handshake or partial-frame timeout.
  void check_timeouts(std::chrono::steady_clock::time_point now) {
    if (closed_ || state_ == State::kRejected) return;  // a REJECT lingers on its own timer
    if ((state_ == State::kAwaitHello || state_ == State::kAwaitAuth) &&
        now - accepted_at_ >= to_chrono(core_->options_.handshake_timeout)) {
      core_->closed_handshake_timeout_.fetch_add(1, std::memory_order_relaxed);
      return close_bounded(absl::StrCat("no valid HELLO within handshake_timeout (",
                                        absl::FormatDuration(core_->options_.handshake_timeout),
                                        ")"));
    }
    if (splitter_.buffered() > 0 &&
        now - last_read_ >= to_chrono(core_->options_.partial_frame_timeout)) {
      core_->closed_partial_frame_timeout_.fetch_add(1, std::memory_order_relaxed);
      return close_bounded(absl::StrCat("nothing received for partial_frame_timeout (",
                                        absl::FormatDuration(core_->options_.partial_frame_timeout),
                                        ") in the middle of a ", splitter_.buffered(),
                                        "-byte partial frame"));
    }
  }

  // R-CHAN-2, §11: the server stops. Called after the server stopped processing frames (on the
  // I/O thread, between two reads), so the GOODBYE's final ACK is the truth: nothing more of
  // this session is processed. A connection not up yet just closes.
  void say_goodbye_stopping() {
    if (closed_ || state_ == State::kRejected) return;  // a REJECT lingers on its own
    if (state_ != State::kUp || session_ == nullptr) return close("");
    state_ = State::kRejected;  // discard whatever the client still sends, until it hangs up
    out_.clear();               // the GOODBYE is the final ACK: it supersedes any queued one
    ack_pending_ = false;
    progress_.clear();
    close_after_write_ = false;
    v2::append(
        out_, v2::Goodbye{static_cast<uint16_t>(v2::GoodbyeCode::kServerStopping),
                          session_->next_expected, session_->progress(), "the server is stopping"});
    linger_for_ = kStopLinger;
    shutdown_after_write_ = true;
    flush();
  }

  // R-FLOW-4 heartbeats (§10.2), once per interval from the listener's timer: a connection up
  // with the feature that received nothing for heartbeat_timeout is closed (GOODBYE `idle`, best
  // effort; the session stays, §11); one that wrote nothing since the last tick sends a PING.
  void heartbeat(std::chrono::steady_clock::time_point now) {
    if (closed_ || state_ != State::kUp || session_ == nullptr ||
        (session_->features & v2::kFeatureHeartbeat) == 0) {
      return;
    }
    if (now - last_read_ >= core_->heartbeat_timeout()) {
      core_->closed_heartbeat_timeout_.fetch_add(1, std::memory_order_relaxed);
      if (!writing_) {  // a peer that stopped reading gets no GOODBYE: a write is stuck already
        std::string goodbye;
        v2::append(goodbye, v2::Goodbye{static_cast<uint16_t>(v2::GoodbyeCode::kIdle),
                                        session_->next_expected, session_->progress(),
                                        "nothing received for heartbeat_timeout"});
        send_now(std::move(goodbye));
      }
      return close_bounded(
          absl::StrCat("nothing received for heartbeat_timeout (",
                       absl::FormatDuration(absl::FromChrono(core_->heartbeat_timeout())),
                       "): the client is stuck or gone; its session stays"));
    }
    if (!wrote_since_tick_) {
      v2::append_ping(out_, v2::Ping{++pings_});
      flush();
    }
    wrote_since_tick_ = false;
  }

  // Closes for a bound (R-FLOW-4): the line is rate-limited, since input can repeat it.
  void close_bounded(std::string_view why) {
    if (closed_) return;
    core_->log_bounded(absl::StrCat("closing connection #", number_, ": ", sv(why)));
    close("");
  }

  // Closes the connection (idempotent); logs `why` unless it is empty.
  void close(std::string_view why) {
    if (closed_) return;
    closed_ = true;
    const auto self = shared_from_this();  // the set below may hold the last other reference
    if (!why.empty()) {
      log().info(absl::StrCat("channel server ", core_->text_, ": closing connection #", number_,
                              ": ", sv(why)));
    }
    // The counts first, so whoever sees the socket close sees them already updated.
    core_->partial_total_ -= partial_bytes_;
    partial_bytes_ = 0;
    core_->publish_partial();
    if (core_->connections_.erase(self) > 0) {
      core_->connections_open_.store(core_->connections_.size(), std::memory_order_relaxed);
    }
    core_->note_drained();
    boost::system::error_code ignored;
    socket_.close(ignored);
    sink_.reset();
    if (linger_) linger_->cancel();
    if (ack_timer_) ack_timer_->cancel();
    if (session_ != nullptr && session_->owner == this) {
      session_->owner = nullptr;
      session_->orphaned = std::chrono::steady_clock::now();
    }
    session_ = nullptr;
  }

 private:
  // kAwaitAuth: a CHALLENGE was sent, the client's AUTH is due (R-SEC-1, wire.md §4.5).
  enum class State { kAwaitHello, kAwaitAuth, kUp, kRejected };

  void read() {
    // Straight into the splitter: no copy between the socket and the frame (R-SEC-1: TLS
    // records, and a tcp connection's first bytes, go through wire_ first).
    char* into =
        wire_.reads_plain() ? splitter_.prepare(read_chunk_) : wire_.read_buffer(read_chunk_);
    socket_.async_read_some(boost::asio::buffer(into, read_chunk_),
                            [self = shared_from_this()](const boost::system::error_code& ec,
                                                        size_t n) { self->on_read(ec, n); });
  }

  void on_read(const boost::system::error_code& ec, size_t n) {
    if (closed_) return;
    if (ec) return close(hung_up(ec) ? "" : os_error(ec));
    last_read_ = std::chrono::steady_clock::now();
    if (state_ == State::kRejected) return read();  // discard until the client hangs up
    if (!wire_.reads_plain()) {
      if (!open_wire(n)) return;
    } else {
      splitter_.commit(n);
    }
    // R-FLOW-4: the reads grow only when the peer fills them.
    if (n == read_chunk_ && read_chunk_ < kReadChunk) read_chunk_ *= 2;
    for (;;) {
      absl::StatusOr<std::optional<v2::RawFrame>> frame = splitter_.next();
      if (!frame.ok()) {
        return protocol_error(absl::StrCat("protocol error: ", frame.status().message()));
      }
      if (!frame->has_value()) break;
      if (!on_frame((*frame)->kind, (*frame)->body)) return;
      if (closed_ || close_after_write_) return;
    }
    account_partial();
    if (closed_) return;  // the partial-frame bound closed this one
    ack_read();           // one cumulative ACK per batch read (§8 rule 20)
    read();
  }

  // The ACK of a batch read: at once, or — on a sink with nothing else to send — within
  // kSinkAckDelay, covering every batch read meanwhile.
  void ack_read() {
    if (sink_ == nullptr || !out_.empty() || writing_ || !ack_pending_) return flush();
    if (ack_timer_ == nullptr) {
      ack_timer_ = std::make_unique<boost::asio::steady_timer>(core_->io_.context());
    } else if (ack_timer_armed_) {
      return;
    }
    ack_timer_armed_ = true;
    ack_timer_->expires_after(kSinkAckDelay);
    ack_timer_->async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      self->ack_timer_armed_ = false;
      if (!ec && !self->closed_) self->flush();
    });
  }

  // One frame; false when the connection ends (or stops reading).
  bool on_frame(v2::Kind kind, std::string_view body) {
    if (kind == v2::Kind::kData) return on_data(body);
    if (kind == v2::Kind::kChunk && state_ == State::kUp) return on_chunk(body);
    if (kind == v2::Kind::kAbort && state_ == State::kUp) return on_abort(body);
    if ((kind == v2::Kind::kPing || kind == v2::Kind::kPong) && state_ == State::kUp &&
        (session_->features & v2::kFeatureHeartbeat) != 0) {
      return on_heartbeat_frame(kind, body);
    }
    if (kind == v2::Kind::kHello) {
      absl::StatusOr<v2::Hello> hello = v2::decode_hello(body);
      if (!hello.ok()) {
        if (state_ != State::kAwaitHello) {
          protocol_error("protocol error: a second HELLO on one connection");
        } else {
          reject(v2::RejectCode::kBadHello, std::string(hello.status().message()));
        }
        return false;
      }
      return on_hello(*hello, body);
    }
    if (kind == v2::Kind::kAuth && state_ == State::kAwaitAuth) return on_auth(body);
    if (kind == v2::Kind::kGoodbye && state_ == State::kUp) {
      // §11: client_closing (and protocol_error, and unknown codes) — the session is over.
      absl::StatusOr<v2::Goodbye> goodbye = v2::decode_goodbye(body);
      forget_session();
      close(goodbye.ok() && goodbye->code == static_cast<uint16_t>(v2::GoodbyeCode::kClientClosing)
                ? ""
                : "the client said goodbye: protocol error");
      return false;
    }
    protocol_error(absl::StrCat("protocol error: unexpected frame kind ", static_cast<int>(kind),
                                state_ == State::kUp ? " from a client" : " before HELLO"));
    return false;
  }

  // §10.2: a PING is answered with a PONG of the same token in the batch's write; a PONG only
  // proves liveness, which the read already counted.
  bool on_heartbeat_frame(v2::Kind kind, std::string_view body) {
    absl::StatusOr<v2::Ping> ping = v2::decode_ping(body);
    if (!ping.ok()) {
      protocol_error(absl::StrCat("protocol error: ", ping.status().message()));
      return false;
    }
    if (kind == v2::Kind::kPing) v2::append_pong(out_, *ping);
    return true;
  }

  // ---- R-SEC-1: TLS (connection_wire.h) ----

  // The bytes read pass through the wire: the first-byte check, TLS records. False when the
  // connection ends (or stops reading).
  bool open_wire(size_t n) {
    absl::Status why;
    switch (wire_.open(n, splitter_, why)) {
      case ConnectionWire::Opened::kOk:
        return true;
      case ConnectionWire::Opened::kRefusePlain:
        core_->refused_plaintext_.fetch_add(1, std::memory_order_relaxed);
        reject(v2::RejectCode::kAuthRequired,
               "this server requires TLS from this client (R-SEC-1: its tls mode is on, or the "
               "client is off loopback); dial with the topology secret and tls auto or on",
               /*quiet=*/true);
        return false;
      case ConnectionWire::Opened::kRefuseTls:
        // In plaintext: the client's TLS cannot parse it and fails for good (its handshake
        // fails), which a silent close would not tell from a lost connection.
        core_->tls_failed_.fetch_add(1, std::memory_order_relaxed);
        reject(v2::RejectCode::kAuthUnsupported,
               "a TLS ClientHello, but this server runs without TLS (tls off, or no topology "
               "key; R-SEC-1)",
               /*quiet=*/true);
        return false;
      case ConnectionWire::Opened::kFailed:
        break;
    }
    tls_failed(why);
    return false;
  }

  // A TLS failure ends the connection: counted, logged rate-limited (a stranger can repeat it),
  // and the alert OpenSSL made is sent, best effort.
  void tls_failed(const absl::Status& why) {
    core_->tls_failed_.fetch_add(1, std::memory_order_relaxed);
    core_->refusals_.log(log(), runtime::LogLevel::kWarn,
                         absl::StrCat("channel server ", core_->text_, ": closing connection #",
                                      number_, ": ", why.message(), " (R-SEC-1)"));
    if (!writing_) send_now({});
    close("");
  }

  // Best effort, non-blocking, when no write is in flight: `frame` (sealed under TLS).
  void send_now(std::string frame) {
    if (!wire_.seal(frame).ok() || frame.empty()) return;
    if (sink_ != nullptr) {
      const iovec iov{frame.data(), frame.size()};
      [[maybe_unused]] const ssize_t n = sink_->writev(&iov, 1);
      return;
    }
    [[maybe_unused]] const ssize_t n =
        ::send(socket_.native_handle(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  // ---- end of R-SEC-1 ----

  // R-FLOW-4: counts what the splitter holds of an incomplete frame toward the listener's bound.
  void account_partial() {
    const size_t now = splitter_.buffered();
    core_->partial_total_ = core_->partial_total_ - partial_bytes_ + now;
    partial_bytes_ = now;
    core_->enforce_partial_cap();
  }

  // A protocol error ends the connection. What this connection already enqueued is acked first
  // (one ACK, then close), so the client neither counts it unacked nor retransmits it.
  void protocol_error(std::string why) {
    if (closed_) return;
    if (!ack_pending_ || session_ == nullptr) return close(why);
    log().info(absl::StrCat("channel server ", core_->text_, ": closing connection #", number_,
                            " after acking what it delivered: ", why));
    close_after_write_ = true;
    state_ = State::kRejected;  // read nothing more
    flush();
  }

  // §4.2's server rule, after §4.5's authentication.
  bool on_hello(const v2::Hello& hello, std::string_view body) {
    if (state_ != State::kAwaitHello) {
      protocol_error("protocol error: a second HELLO on one connection");
      return false;
    }
    if (hello.version != v2::kVersion) {  // §15: the frozen layout, naming both versions
      reject(std::nullopt,
             absl::StrCat("wire version mismatch: the client speaks version ", hello.version,
                          ", this server version ", v2::kVersion, "; upgrade the older side"));
      return false;
    }
    switch (authenticate(hello, body)) {
      case Auth::kEnded:
        return false;
      case Auth::kChallenged:
        return true;  // the session is looked at once AUTH verifies (on_auth)
      case Auth::kNone:
        break;
    }
    return open_session(hello);
  }

  // ---- R-SEC-1: authentication (docs/wire.md §4.5) ----

  enum class Auth { kNone, kChallenged, kEnded };

  // What the HELLO's auth_mode leads to. Only `version` (checked before) and `auth_mode` are
  // looked at here: no session is looked up, created or replaced before AUTH verifies (rule 6).
  Auth authenticate(const v2::Hello& hello, std::string_view body) {
    const ChannelKey* key = core_->options_.key.get();
    if (hello.auth_mode == 0 && key == nullptr) return Auth::kNone;  // unauthenticated, as before
    if (hello.auth_mode == 0) {
      core_->refused_unauthenticated_.fetch_add(1, std::memory_order_relaxed);
      reject(v2::RejectCode::kAuthRequired,
             "this server requires authentication (auth_mode 1, the topology secret); "
             "a client without the secret is refused (R-SEC-1)",
             /*quiet=*/true);
      return Auth::kEnded;
    }
    if (hello.auth_mode != 1 || key == nullptr) {
      reject(v2::RejectCode::kAuthUnsupported,
             absl::StrCat("auth_mode ", hello.auth_mode, " is not supported by this server",
                          key == nullptr ? " (it has no topology secret)" : ""),
             /*quiet=*/true);
      return Auth::kEnded;
    }
    hello_ = hello;
    hello_body_.assign(body);
    challenge_.server_nonce = auth::random_nonce();
    // X (wire.md §4.5): over TLS both proofs are bound to this TLS session.
    challenge_.server_mac =
        auth::server_mac(*key, hello_body_, challenge_.server_nonce, wire_.exporter());
    state_ = State::kAwaitAuth;
    v2::append(out_, challenge_);
    flush();
    return Auth::kChallenged;
  }

  // The client's proof: on success the HELLO is answered per §4.2; on failure REJECT
  // auth_failed, counted and logged rate-limited (a stranger can repeat it).
  bool on_auth(std::string_view body) {
    absl::StatusOr<v2::Auth> proof = v2::decode_auth(body);
    const auth::Mac expected =
        auth::client_mac(*core_->options_.key, hello_body_, challenge_.server_nonce,
                         challenge_.server_mac, wire_.exporter());
    if (!proof.ok() || !auth::equal(proof->client_mac, expected)) {
      core_->auth_failed_.fetch_add(1, std::memory_order_relaxed);
      reject(v2::RejectCode::kAuthFailed, "the AUTH does not prove the topology secret (R-SEC-1)",
             /*quiet=*/true);
      return false;
    }
    state_ = State::kAwaitHello;  // open_session's precondition; it moves to kUp or rejects
    const v2::Hello hello = *hello_;
    hello_.reset();
    return open_session(hello);
  }

  // ---- end of R-SEC-1 ----

  // §4.2's session rule for an (authenticated, when the server has a key) HELLO.
  bool open_session(const v2::Hello& hello) {
    bool created = false;
    auto it = core_->sessions_.find(hello.client_session);
    if (it == core_->sessions_.end()) {
      if (hello.resuming) {
        reject(v2::RejectCode::kSessionUnknown,
               absl::StrCat("unknown session ", hello.client_session, " (first unacked seq ",
                            hello.first_unacked_seq,
                            "): this server restarted or forgot it; resume on a new session"));
        return false;
      }
      auto session = std::make_unique<Session>();
      session->decoder.emplace(core_->dict_limits());
      session->features = hello.features & core_->offered_features();  // §15 rule 52
      it = core_->sessions_.emplace(hello.client_session, std::move(session)).first;
      created = true;
      if (log().enabled(runtime::LogLevel::kDebug)) {
        log().debug(absl::StrCat("channel server ", core_->text_, ": new session ",
                                 hello.client_session, " on connection #", number_));
      }
    } else if (!hello.resuming) {
      reject(v2::RejectCode::kBadHello,
             absl::StrCat("session ", hello.client_session,
                          " exists: a new session (not resuming) needs a new id"));
      return false;
    } else if (it->second->next_expected < hello.first_unacked_seq) {
      reject(v2::RejectCode::kSessionOutOfSync,
             absl::StrCat("session ", hello.client_session,
                          " out of sync: the client's first "
                          "unacked seq ",
                          hello.first_unacked_seq, " is beyond this server's ",
                          it->second->next_expected, "; resume on a new session"));
      return false;
    }
    Session* session = it->second.get();
    if (session->owner != nullptr && session->owner != this) {
      session->owner->close("its session reconnected on a new connection");
    }
    session->owner = this;
    session_ = session;
    session_id_ = hello.client_session;
    if (created) {  // the new session is owned: only others can be forgotten for the bound
      if (core_->sessions_.size() > core_->options_.max_sessions) core_->bound_sessions();
      core_->sessions_open_.store(core_->sessions_.size(), std::memory_order_relaxed);
    }
    state_ = State::kUp;
    splitter_.set_limit(core_->max_frame_);
    v2::Welcome welcome = core_->welcome(session->next_expected);
    welcome.features = session->features;
    welcome.transfers = session->progress();  // §9.5: where each transfer resumes
    v2::append(out_, welcome);
    if (!created) session_->credit.repeat(out_);  // §10.1 rule 58
    flush();
    return true;
  }

  // ---- Credit (docs/wire.md §10.1, R-FLOW-2) ----

  // Posts a decoded envelope into the proc. With the `credit` feature, a refusal because the
  // destination actor's mailbox is full pauses that actor for this session (note_refusal).
  void deliver(EnvelopePtr env) {
    if ((session_->features & v2::kFeatureCredit) == 0) {
      core_->deliver_to_.post(std::move(env), core_->ret_);
      return;
    }
    CreditReturns returns(*this);
    core_->deliver_to_.post(std::move(env), returns);
  }

  // The proc returned `env` at once (it is about to go back to its sender): when a full mailbox
  // of this proc refused it, the session pauses the actor until the mailbox has room again.
  void note_refusal(const runtime::MessageEnvelope& env) {
    if (session_ == nullptr) return;
    const std::optional<runtime::ActorId> actor = SessionCredit::refused_by_full_mailbox(env);
    if (!actor || !session_->credit.may_pause(*actor)) return;
    if (!core_->deliver_to_.notify_on_room(*actor, core_->room_waker(session_id_, *actor))) return;
    core_->credit_pauses_.fetch_add(1, std::memory_order_relaxed);
    session_->credit.pause(*actor, out_);  // goes with the batch's ACK
  }

 public:
  // The paused actor has room again (ServerCore::room_again, on the I/O thread).
  void send_open(const runtime::ActorId& actor) {
    if (closed_ || state_ != State::kUp) return;
    v2::append(out_, v2::Credit{{{v2::CreditState::kOpen, actor}}});
    flush();
  }

 private:
  // What the proc returns at once while delivering, seen on its way back to the sender.
  class CreditReturns final : public runtime::ReturnHandle {
   public:
    explicit CreditReturns(Connection& c) : c_(c) {}
    void return_envelope(EnvelopePtr env) override {
      c_.note_refusal(*env);
      c_.core_->ret_.return_envelope(std::move(env));
    }
    void drop(EnvelopePtr env, runtime::DropCause cause) override {
      c_.note_refusal(*env);
      c_.core_->ret_.drop(std::move(env), cause);
    }

   private:
    Connection& c_;
  };

  // §8 rules 17–19: deliver seq == next, drop seq < next, a gap is a stream error.
  bool on_data(std::string_view body) {
    if (state_ != State::kUp) {
      close("protocol error: DATA before HELLO");
      return false;
    }
    uint64_t seq = 0;
    if (body.size() < sizeof(seq)) {
      protocol_error("protocol error: a DATA frame shorter than its seq");
      return false;
    }
    std::memcpy(&seq, body.data(), sizeof(seq));
    if (seq < session_->next_expected) return true;  // a retransmit we already enqueued
    if (seq > session_->next_expected) {
      protocol_error(absl::StrCat("protocol error: DATA seq ", seq, " skips ahead of ",
                                  session_->next_expected));
      return false;
    }
    uint64_t chunked = 0;
    absl::StatusOr<EnvelopePtr> env = session_->decoder->decode(
        body, seq, &chunked, core_->options_.max_message_bytes, splitter_.block());
    if (!env.ok()) {
      protocol_error(absl::StrCat("protocol error: DATA seq ", seq, ": ", env.status().message()));
      return false;
    }
    if (chunked != 0) {  // §9.3: a transfer registers; its CHUNK frames follow
      if (session_->transfers.size() >= core_->welcome(0).max_transfers) {
        protocol_error(absl::StrCat("protocol error: DATA seq ", seq, " starts a transfer past ",
                                    "max_transfers (", session_->transfers.size(), " open)"));
        return false;
      }
      Transfer t;
      t.payload_len = chunked;
      ++session_->next_expected;
      ack_pending_ = true;
      // §9.7: a gateway streams only payloads larger than two of its windows — below that,
      // reassembling holds no more than streaming would, and a failure returns the envelope
      // whole from here.
      if (chunked <= 2 * uint64_t{core_->welcome(0).transfer_window} ||
          !core_->deliver_to_.accepts_stream((*env)->next_hop())) {
        t.env = *std::move(env);
        session_->transfers.emplace(seq, std::move(t));
        return true;
      }
      // §9.7: a gateway routes the envelope now and streams the bytes after it.
      t.stream = std::make_shared<PayloadStream>(chunked);
      core_->watch(*t.stream, session_id_, seq);
      EnvelopePtr streamed = *std::move(env);
      streamed->data() = t.stream->make_reader(streamed->data().type_hash());
      session_->transfers.emplace(seq, std::move(t));
      core_->deliver_to_.post(std::move(streamed), core_->ret_);
      return true;
    }
    ++session_->next_expected;
    ack_pending_ = true;
    deliver(*std::move(env));
    return true;
  }

  // §9.2 rule 23: the next bytes of a registered transfer, in order.
  bool on_chunk(std::string_view body) {
    absl::StatusOr<v2::Chunk> chunk = v2::decode_chunk(body);
    if (!chunk.ok()) {
      protocol_error(absl::StrCat("protocol error: CHUNK: ", chunk.status().message()));
      return false;
    }
    auto it = session_->transfers.find(chunk->seq);
    if (it == session_->transfers.end()) {
      protocol_error(absl::StrCat("protocol error: a CHUNK of transfer ", chunk->seq,
                                  ", which is not registered"));
      return false;
    }
    if (it->second.stream) return on_streamed_chunk(it, *chunk);
    Transfer& t = it->second;
    const uint64_t n = chunk->bytes.size();
    if (chunk->offset != t.bytes.size() || n > t.payload_len - t.bytes.size()) {
      protocol_error(absl::StrCat("protocol error: a CHUNK of transfer ", chunk->seq, " at ",
                                  chunk->offset, " (+", n, "); it holds ", t.bytes.size(), " of ",
                                  t.payload_len));
      return false;
    }
    // §9.10 rule 38: the buffer grows with the bytes received (doubling), never from the
    // announced length alone, until it reaches a quarter of it; then straight to the whole.
    const uint64_t need = t.bytes.size() + n;
    if (need > t.bytes.capacity()) {
      uint64_t cap = t.bytes.empty() ? n : 2 * static_cast<uint64_t>(t.bytes.capacity());
      if (t.bytes.capacity() >= t.payload_len / 4) cap = t.payload_len;
      t.bytes.reserve(static_cast<size_t>(std::min(std::max(cap, need), t.payload_len)));
    }
    t.bytes.append(chunk->bytes);
    note_progress(chunk->seq, t.bytes.size());
    ack_pending_ = true;
    if (t.bytes.size() == t.payload_len) {  // rule 25: posted before the next frame is read
      EnvelopePtr env = std::move(t.env);
      const uint64_t type = env->data().type_hash();
      env->data() = wire::Any::from_bytes(type, std::move(t.bytes));
      session_->transfers.erase(it);
      deliver(std::move(env));
    }
    return true;
  }

  // §9.7: the next bytes of a transfer streamed through this gateway. After a reconnect the
  // client resends from what was taken over, which may be less than what the stream holds: the
  // bytes this gateway has already are skipped.
  bool on_streamed_chunk(std::map<uint64_t, Transfer>::iterator it, const v2::Chunk& chunk) {
    Transfer& t = it->second;
    if (t.cancelled) return true;  // rule 23: discarded until the client's ABORT
    const uint64_t n = chunk.bytes.size();
    if (chunk.offset < t.taken || chunk.offset > t.received || n > t.payload_len - chunk.offset) {
      protocol_error(absl::StrCat("protocol error: a CHUNK of transfer ", chunk.seq, " at ",
                                  chunk.offset, " (+", n, "); it took ", t.taken, " and holds ",
                                  t.received, " of ", t.payload_len));
      return false;
    }
    const uint64_t skip = t.received - chunk.offset;
    if (n > skip) {
      t.stream->append(chunk.bytes.substr(static_cast<size_t>(skip)));
      t.received += n - skip;
    }
    report(it);
    return true;
  }

 public:
  // §9.7: streamed transfer `seq` moved at its consumer (ServerCore::stream_moved).
  void stream_moved(uint64_t seq) {
    if (closed_ || state_ != State::kUp || session_ == nullptr) return;
    auto it = session_->transfers.find(seq);
    if (it == session_->transfers.end() || !it->second.stream) return;
    report(it);
    flush();
  }

 private:
  // Tells the upstream what streamed transfer `it` now amounts to (rules 31, 32); a transfer
  // taken over whole is done here (the stream goes on with the envelope).
  void report(std::map<uint64_t, Transfer>::iterator it) {
    Transfer& t = it->second;
    switch (t.advance(core_->welcome(0).transfer_window)) {
      case Transfer::News::kNone:
        return;
      case Transfer::News::kCancel:  // rule 31: the client returns it, with this failure
        v2::append_cancel(out_, v2::TransferEnd{it->first, t.stream->failure_reason(),
                                                t.stream->failure_detail()});
        return;
      case Transfer::News::kProgress:
        note_progress(it->first, t.taken);
        ack_pending_ = true;
        if (t.taken == t.payload_len) {
          t.stream->taken_whole();
          session_->transfers.erase(it);
        }
        return;
    }
  }

  // §9.6 rule 30: the client gave the transfer up; its bytes go, nothing is returned.
  bool on_abort(std::string_view body) {
    absl::StatusOr<v2::TransferEnd> end = v2::decode_transfer_end(body);
    if (!end.ok()) {
      protocol_error(absl::StrCat("protocol error: ABORT: ", end.status().message()));
      return false;
    }
    session_->transfers.erase(end->seq);  // unknown or complete: ignored
    return true;
  }

  // §8 rule 20: the next ACK lists this transfer's progress.
  void note_progress(uint64_t seq, uint64_t received) {
    for (v2::TransferProgress& p : progress_) {
      if (p.seq == seq) {
        p.received = received;
        return;
      }
    }
    progress_.push_back({seq, received});
  }

  // §5 rule 10: the client ended the session; its dictionary and counters go.
  void forget_session() {
    if (session_ == nullptr) return;
    session_ = nullptr;
    core_->sessions_.erase(session_id_);
    core_->sessions_open_.store(core_->sessions_.size(), std::memory_order_relaxed);
  }

  // REJECT (structured with a code; the frozen layout without one), then half-close and linger.
  // `quiet`: input can repeat it (R-SEC-1 refusals), so the line is rate-limited.
  void reject(std::optional<v2::RejectCode> code, const std::string& reason, bool quiet = false) {
    const std::string line = absl::StrCat("channel server ", core_->text_,
                                          ": rejecting connection #", number_, ": ", reason);
    if (quiet) {
      core_->refusals_.log(log(), runtime::LogLevel::kWarn, line);
    } else {
      log().warn(line);
    }
    state_ = State::kRejected;
    v2::Reject r;
    if (code) r.code = static_cast<uint16_t>(*code);
    r.text = reason;
    v2::append(out_, r);
    shutdown_after_write_ = true;
    flush();
    if (!closed_) read();
  }

  void flush() {
    if (writing_ || closed_) return;
    if (ack_pending_ && session_ != nullptr) {
      v2::append(out_, v2::Ack{session_->next_expected, std::move(progress_)});
      progress_.clear();
      ack_pending_ = false;
    }
    if (absl::Status s = wire_.seal(out_); !s.ok()) return tls_failed(s);  // R-SEC-1
    if (out_.empty()) return;
    in_flight_.swap(out_);
    out_.clear();
    writing_ = true;
    wrote_since_tick_ = true;  // §10.2: no PING needed this interval
    if (sink_ != nullptr) return write_to_sink(0);
    boost::asio::async_write(socket_, boost::asio::buffer(in_flight_),
                             [self = shared_from_this()](const boost::system::error_code& ec,
                                                         size_t) { self->on_written(ec); });
  }

  // in_flight_ from `done` on into the sink; when it is full, again once it has room.
  void write_to_sink(size_t done) {
    while (done < in_flight_.size()) {
      const iovec iov{in_flight_.data() + done, in_flight_.size() - done};
      const ssize_t n = sink_->writev(&iov, 1);
      if (n < 0)
        return on_written(boost::system::error_code(errno, boost::system::system_category()));
      if (n == 0) {
        sink_->when_writable([weak = weak_from_this(), &io = core_->io_, done] {
          boost::asio::post(io.context(), [weak, done] {
            const std::shared_ptr<Connection> self = weak.lock();
            if (self != nullptr && !self->closed_ && self->sink_ != nullptr) {
              self->write_to_sink(done);
            }
          });
        });
        return;
      }
      done += static_cast<size_t>(n);
    }
    on_written({});
  }

  void on_written(const boost::system::error_code& ec) {
    writing_ = false;
    in_flight_.clear();
    if (closed_) return;
    if (ec) return close(hung_up(ec) ? "" : os_error(ec));
    if (close_after_write_ && out_.empty()) return close("");
    if (shutdown_after_write_ && out_.empty()) {
      shutdown_after_write_ = false;
      boost::system::error_code ignored;
      socket_.shutdown(Socket::shutdown_send, ignored);
      sink_.reset();  // the peer sees the end of the stream, as from the shutdown above
      linger_ = std::make_unique<boost::asio::steady_timer>(core_->io_.context(), linger_for_);
      linger_->async_wait([self = shared_from_this()](const boost::system::error_code& e) {
        if (!e) self->close("");
      });
      return;
    }
    flush();
  }

  std::shared_ptr<ServerCore> core_;
  Socket socket_;
  std::shared_ptr<ByteSink> sink_;  // set: writes go here, not to socket_ (byte_sink.h)
  const uint64_t number_;
  ConnectionWire wire_;  // R-SEC-1: plaintext or TLS
  v2::FrameSplitter splitter_{v2::kHandshakeFrameLimit};
  size_t read_chunk_ = kFirstReadChunk;  // what the next read asks for
  std::string out_;                      // frames waiting for the next write
  std::string in_flight_;                // the write in flight
  State state_ = State::kAwaitHello;
  const std::chrono::steady_clock::time_point accepted_at_;
  std::chrono::steady_clock::time_point last_read_;
  size_t partial_bytes_ = 0;  // counted in core_->partial_total_
  Session* session_ = nullptr;
  uint64_t session_id_ = 0;
  bool writing_ = false;
  bool ack_pending_ = false;                    // envelopes enqueued since the last ACK
  std::vector<v2::TransferProgress> progress_;  // transfers that advanced since the last ACK
  bool close_after_write_ = false;  // a protocol error: close once the final ACK is written
  bool shutdown_after_write_ = false;
  bool closed_ = false;
  std::unique_ptr<boost::asio::steady_timer> linger_;
  std::unique_ptr<boost::asio::steady_timer> ack_timer_;  // ack_read on a sink
  bool ack_timer_armed_ = false;
  std::chrono::steady_clock::duration linger_for_ = kRejectLinger;  // after a REJECT or GOODBYE
  bool wrote_since_tick_ = false;  // a write started since the last heartbeat tick
  uint64_t pings_ = 0;             // the last PING's token
  // R-SEC-1, while kAwaitAuth: the HELLO (decoded and as sent) and the CHALLENGE answering it.
  std::optional<v2::Hello> hello_;
  std::string hello_body_;
  v2::Challenge challenge_;
};

}  // namespace postal::routing::internal::stream_server
