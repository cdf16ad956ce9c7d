// Wire v2 frames: docs/wire.md §3 (framing), §4 (handshake), §8 (ACK), §9.2/§9.6 (CHUNK,
// ABORT, CANCEL), §10.2 (PING, PONG), §11 (GOODBYE).
#include "frames_v2.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "le_bytes.h"
#include "postal/wire/absl_compat.h"

namespace postal::routing::internal::v2 {
namespace {

constexpr size_t kHelloBytes = 72;
constexpr size_t kWelcomeFixedBytes = 48;
constexpr size_t kProgressBytes = 16;
constexpr size_t kMaxTransfers = 64;
constexpr uint32_t kMinFrameLimit = 4096;

void zeros(std::string& out, size_t n) { out.append(n, '\0'); }

// A text cut to kMaxText bytes at a UTF-8 character boundary.
std::string_view bounded(std::string_view text) {
  if (text.size() <= kMaxText) return text;
  size_t n = kMaxText;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

// Writes the prefix of a frame whose body is `body_bytes` long.
void begin(std::string& out, Kind kind, size_t body_bytes) {
  put<uint32_t>(out, static_cast<uint32_t>(body_bytes + 1));
  put<uint8_t>(out, static_cast<uint8_t>(kind));
}

void put_progress(std::string& out, const std::vector<TransferProgress>& transfers) {
  for (const TransferProgress& t : transfers) {
    put<uint64_t>(out, t.seq);
    put<uint64_t>(out, t.received);
  }
}

// A ByteReader that names its frame in errors and reads transfer progress lists.
class Reader : public ByteReader {
 public:
  Reader(std::string_view bytes, std::string_view frame) : ByteReader(bytes), frame_(frame) {}
  bool progress(uint16_t count, std::vector<TransferProgress>& out) {
    if (count > kMaxTransfers || count > left() / kProgressBytes) return false;
    out.resize(count);
    for (TransferProgress& t : out) {
      if (!(get(t.seq) && get(t.received))) return false;
    }
    return true;
  }
  absl::Status error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(sv(frame_), ": ", sv(what)));
  }

 private:
  std::string_view frame_;
};

absl::StatusOr<std::string> text_of(const Reader& r) {
  if (r.left() > kMaxText) return r.error(absl::StrCat("a text over ", kMaxText, " bytes"));
  return std::string(r.rest());
}

void append_transfer_end(std::string& out, Kind kind, const TransferEnd& f) {
  const std::string_view text = bounded(f.text);
  begin(out, kind, 10 + text.size());
  put<uint64_t>(out, f.seq);
  put<uint8_t>(out, f.reason);
  put<uint8_t>(out, 0);
  out.append(text);
}

void append_token(std::string& out, Kind kind, const Ping& f) {
  begin(out, kind, 8);
  put<uint64_t>(out, f.token);
}

}  // namespace

void append(std::string& out, const Hello& f) {
  begin(out, Kind::kHello, kHelloBytes);
  put<uint16_t>(out, f.version);
  put<uint16_t>(out, f.resuming ? 1 : 0);
  put<uint32_t>(out, f.features);
  put<uint64_t>(out, f.client_session);
  put<uint64_t>(out, f.first_unacked_seq);
  put<uint32_t>(out, f.max_frame_bytes);
  put<uint32_t>(out, f.ack_interval_ms);
  put<uint8_t>(out, f.auth_mode);
  zeros(out, 7);
  out.append(reinterpret_cast<const char*>(f.client_nonce.data()), f.client_nonce.size());
}

void append(std::string& out, const Welcome& f) {
  begin(out, Kind::kWelcome, kWelcomeFixedBytes + kProgressBytes * f.transfers.size());
  put<uint16_t>(out, kVersion);
  put<uint16_t>(out, 0);
  put<uint32_t>(out, f.features);
  put<uint64_t>(out, f.next_expected);
  put<uint64_t>(out, f.max_message_bytes);
  put<uint32_t>(out, f.max_frame_bytes);
  put<uint32_t>(out, f.dict_max_entries);
  put<uint32_t>(out, f.dict_max_bytes);
  put<uint32_t>(out, f.transfer_window);
  put<uint16_t>(out, f.max_transfers);
  put<uint16_t>(out, static_cast<uint16_t>(f.transfers.size()));
  zeros(out, 4);
  put_progress(out, f.transfers);
}

void append(std::string& out, const Challenge& f) {
  begin(out, Kind::kChallenge, 68);
  put<uint8_t>(out, f.auth_mode);
  zeros(out, 3);
  out.append(reinterpret_cast<const char*>(f.server_nonce.data()), f.server_nonce.size());
  out.append(reinterpret_cast<const char*>(f.server_mac.data()), f.server_mac.size());
}

void append(std::string& out, const Auth& f) {
  begin(out, Kind::kAuth, 32);
  out.append(reinterpret_cast<const char*>(f.client_mac.data()), f.client_mac.size());
}

void append(std::string& out, const Reject& f) {
  const std::string_view text = bounded(f.text);
  begin(out, Kind::kReject, (f.code ? 4 : 2) + text.size());
  put<uint16_t>(out, f.version);
  if (f.code) put<uint16_t>(out, *f.code);
  out.append(text);
}

void append(std::string& out, const Ack& f) {
  begin(out, Kind::kAck, 12 + kProgressBytes * f.transfers.size());
  put<uint64_t>(out, f.next_expected);
  put<uint16_t>(out, static_cast<uint16_t>(f.transfers.size()));
  put<uint16_t>(out, 0);
  put_progress(out, f.transfers);
}

void append(std::string& out, const Chunk& f) {
  begin(out, Kind::kChunk, 16 + f.bytes.size());
  put<uint64_t>(out, f.seq);
  put<uint64_t>(out, f.offset);
  out.append(f.bytes);
}

void append_abort(std::string& out, const TransferEnd& f) {
  append_transfer_end(out, Kind::kAbort, f);
}
void append_cancel(std::string& out, const TransferEnd& f) {
  append_transfer_end(out, Kind::kCancel, f);
}

void append(std::string& out, const Goodbye& f) {
  const std::string_view text = bounded(f.text);
  begin(out, Kind::kGoodbye, 16 + kProgressBytes * f.transfers.size() + text.size());
  put<uint16_t>(out, f.code);
  put<uint16_t>(out, static_cast<uint16_t>(f.transfers.size()));
  zeros(out, 4);
  put<uint64_t>(out, f.next_expected);
  put_progress(out, f.transfers);
  out.append(text);
}

void append_ping(std::string& out, const Ping& f) { append_token(out, Kind::kPing, f); }
void append_pong(std::string& out, const Ping& f) { append_token(out, Kind::kPong, f); }

absl::StatusOr<Hello> decode_hello(std::string_view body) {
  Reader r(body, "HELLO");
  Hello h;
  if (!r.get(h.version)) return r.error("truncated before its version");
  if (h.version != kVersion) return h;  // another version: the caller sends the frozen REJECT
  if (body.size() != kHelloBytes) {
    return r.error(absl::StrCat(body.size(), " bytes, a HELLO has ", kHelloBytes));
  }
  uint16_t flags = 0;
  r.get(flags);
  if (flags & ~1u) return r.error("reserved flags set");
  h.resuming = flags & 1;
  r.get(h.features);
  r.get(h.client_session);
  r.get(h.first_unacked_seq);
  r.get(h.max_frame_bytes);
  r.get(h.ack_interval_ms);
  r.get(h.auth_mode);
  if (!r.reserved(7)) return r.error("reserved bytes set");
  std::memcpy(h.client_nonce.data(), r.rest().data(), h.client_nonce.size());
  if (h.client_session == 0) return r.error("client_session 0");
  if (h.max_frame_bytes < kMinFrameLimit) return r.error("max_frame_bytes under 4096");
  if (h.ack_interval_ms < 10 || h.ack_interval_ms > 60'000) {
    return r.error("ack_interval_ms outside 10 … 60 000");
  }
  if (!h.resuming && h.first_unacked_seq != 0) {
    return r.error("a new session (not resuming) with a first unacked seq above 0");
  }
  return h;
}

absl::StatusOr<Challenge> decode_challenge(std::string_view body) {
  Reader r(body, "CHALLENGE");
  Challenge c;
  if (body.size() != 68) return r.error(absl::StrCat(body.size(), " bytes, a CHALLENGE has 68"));
  r.get(c.auth_mode);
  if (!r.reserved(3)) return r.error("reserved bytes set");
  if (c.auth_mode != 1) return r.error(absl::StrCat("auth_mode ", c.auth_mode, ", not 1"));
  std::memcpy(c.server_nonce.data(), body.data() + 4, 32);
  std::memcpy(c.server_mac.data(), body.data() + 36, 32);
  return c;
}

absl::StatusOr<Auth> decode_auth(std::string_view body) {
  Reader r(body, "AUTH");
  Auth a;
  if (body.size() != 32) return r.error(absl::StrCat(body.size(), " bytes, an AUTH has 32"));
  std::memcpy(a.client_mac.data(), body.data(), 32);
  return a;
}

absl::StatusOr<Welcome> decode_welcome(std::string_view body) {
  Reader r(body, "WELCOME");
  Welcome w;
  uint16_t version = 0, count = 0;
  if (!(r.get(version) && r.reserved(2) && r.get(w.features) && r.get(w.next_expected) &&
        r.get(w.max_message_bytes) && r.get(w.max_frame_bytes) && r.get(w.dict_max_entries) &&
        r.get(w.dict_max_bytes) && r.get(w.transfer_window) && r.get(w.max_transfers) &&
        r.get(count) && r.reserved(4))) {
    return r.error("truncated, or reserved bytes set");
  }
  if (version != kVersion) return r.error(absl::StrCat("version ", version));
  if (w.max_frame_bytes < kMinFrameLimit || w.dict_max_entries < 1024 ||
      w.dict_max_bytes < 262'144 || w.transfer_window < w.max_frame_bytes ||
      w.max_transfers < 1 || w.max_transfers > kMaxTransfers || count > w.max_transfers) {
    return r.error("a limit out of range");
  }
  if (!r.progress(count, w.transfers) || r.left() != 0) return r.error("transfers do not fit");
  return w;
}

absl::StatusOr<Reject> decode_reject(std::string_view body) {
  Reader r(body, "REJECT");
  Reject j;
  if (!r.get(j.version)) return r.error("truncated");
  if (j.version == kVersion) {
    uint16_t code = 0;
    if (!r.get(code)) return r.error("truncated before its code");
    j.code = code;
  }
  absl::StatusOr<std::string> text = text_of(r);
  if (!text.ok()) return text.status();
  j.text = *std::move(text);
  return j;
}

absl::StatusOr<Ack> decode_ack(std::string_view body) {
  Reader r(body, "ACK");
  Ack a;
  uint16_t count = 0;
  if (!(r.get(a.next_expected) && r.get(count) && r.reserved(2))) {
    return r.error("truncated, or reserved bytes set");
  }
  if (!r.progress(count, a.transfers) || r.left() != 0) return r.error("transfers do not fit");
  return a;
}

absl::StatusOr<Chunk> decode_chunk(std::string_view body) {
  Reader r(body, "CHUNK");
  Chunk c;
  if (!(r.get(c.seq) && r.get(c.offset)) || r.left() == 0) return r.error("no bytes");
  c.bytes = r.rest();
  return c;
}

absl::StatusOr<TransferEnd> decode_transfer_end(std::string_view body) {
  Reader r(body, "ABORT/CANCEL");
  TransferEnd e;
  if (!(r.get(e.seq) && r.get(e.reason) && r.reserved(1))) {
    return r.error("truncated, or reserved bytes set");
  }
  absl::StatusOr<std::string> text = text_of(r);
  if (!text.ok()) return text.status();
  e.text = *std::move(text);
  return e;
}

absl::StatusOr<Goodbye> decode_goodbye(std::string_view body) {
  Reader r(body, "GOODBYE");
  Goodbye g;
  uint16_t count = 0;
  if (!(r.get(g.code) && r.get(count) && r.reserved(4) && r.get(g.next_expected))) {
    return r.error("truncated, or reserved bytes set");
  }
  if (!r.progress(count, g.transfers)) return r.error("transfers do not fit");
  absl::StatusOr<std::string> text = text_of(r);
  if (!text.ok()) return text.status();
  g.text = *std::move(text);
  return g;
}

absl::StatusOr<Ping> decode_ping(std::string_view body) {
  Reader r(body, "PING/PONG");
  Ping p;
  if (!r.get(p.token) || r.left() != 0) return r.error("a body of 8 bytes");
  return p;
}

void FrameSplitter::feed(std::string_view bytes) {
  if (!error_.ok() || bytes.empty()) return;
  std::memcpy(prepare(bytes.size()), bytes.data(), bytes.size());
  commit(bytes.size());
}

char* FrameSplitter::prepare(size_t n) {
  // §14.3: a buffer some payload still slices (use_count > 1) is never written again; the
  // bytes not yet returned move to a fresh one.
  const bool shared = data_ != nullptr && data_.use_count() > 2;  // data_ and block_ are ours
  if (start_ == end_) {  // every frame was returned: a large frame's buffer goes
    start_ = end_ = 0;
    if (shared || (cap_ > kKeptCapacity && n <= kKeptCapacity)) {
      data_.reset();
      block_.reset();
      cap_ = 0;
    }
  } else if (!shared && start_ > 0 && (cap_ - end_ < n || start_ * 2 >= end_)) {  // compact
    std::memmove(data_.get(), data_.get() + start_, end_ - start_);
    end_ -= start_;
    start_ = 0;
  }
  if (cap_ - end_ < n || shared) {
    // Grow by doubling: memory follows the bytes, never a prefix's claim. A buffer left to
    // slices gets a successor of the same size (the reads stay as large).
    const size_t live = end_ - start_;
    const size_t cap = shared ? std::max(live + n, cap_) : std::max(end_ + n, 2 * cap_);
    std::shared_ptr<char[]> data(new char[cap]);
    if (live > 0) std::memcpy(data.get(), data_.get() + start_, live);
    end_ = live;
    start_ = 0;
    data_ = std::move(data);
    block_ = data_;
    cap_ = cap;
  }
  return data_.get() + end_;
}

absl::StatusOr<std::optional<RawFrame>> FrameSplitter::next() {
  if (!error_.ok()) return error_;
  const std::string_view pending(data_.get() + start_, end_ - start_);
  if (pending.size() < 4) return std::nullopt;
  uint32_t length = 0;
  std::memcpy(&length, pending.data(), 4);
  // §3 rules 1–2: from the prefix alone, before the body is buffered.
  if (length == 0 || length > limit_) {
    error_ = absl::InvalidArgumentError(
        absl::StrCat("frame length ", length, length == 0 ? " (a frame has at least its kind)"
                                                          : absl::StrCat(" over the limit of ", limit_)));
    return error_;
  }
  if (pending.size() < 5) return std::nullopt;
  const uint8_t kind = static_cast<uint8_t>(pending[4]);
  if (kind < static_cast<uint8_t>(Kind::kHello) || kind > static_cast<uint8_t>(Kind::kPong)) {
    error_ = absl::InvalidArgumentError(absl::StrCat("unknown frame kind ", kind));
    return error_;
  }
  if (pending.size() - 4 < length) return std::nullopt;
  start_ += 4 + length;
  return RawFrame{static_cast<Kind>(kind), pending.substr(5, length - 1)};
}

}  // namespace postal::routing::internal::v2
