// Wire version 2's frames other than DATA's body (docs/wire.md §3, §4, §8–§11): their structs,
// encoders and decoders, and the splitter that cuts a byte stream into frames. Routing internal;
// the channel client and server switch to them with the rest of wire v2 (§18). DATA bodies are
// envelope_codec.h's.
//
// Every decoder takes a frame's body (after the 4-byte length and the kind byte) and checks it
// exactly: a fixed body of the wrong size, a count past the bytes left, a reserved byte or flag
// set, or a value out of range is an InvalidArgument naming the field — a *stream error* (§16).
// The splitter rejects a length of 0 or above the limit in force from the prefix alone, before
// buffering the body (§3 rules 1–2), and an unknown kind (§3).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace postal::routing::internal::v2 {

inline constexpr uint16_t kVersion = 2;
inline constexpr size_t kPrefixBytes = 5;             // u32 length + u8 kind (§3)
inline constexpr uint32_t kHandshakeFrameLimit = 4096;  // §3 rule 2
inline constexpr size_t kMaxText = 1024;              // REJECT, ABORT, CANCEL, GOODBYE texts

enum class Kind : uint8_t {
  kHello = 1,
  kWelcome = 2,
  kReject = 3,
  kData = 4,
  kAck = 5,
  kChunk = 6,
  kAbort = 7,
  kCancel = 8,
  kGoodbye = 9,
  kChallenge = 10,
  kAuth = 11,
  kCredit = 12,
  kPing = 13,
  kPong = 14,
};

// Feature bits (HELLO offers, WELCOME enables; §15).
inline constexpr uint32_t kFeatureCredit = 1 << 0;
inline constexpr uint32_t kFeatureHeartbeat = 1 << 1;
inline constexpr uint32_t kFeaturePayloadAddrs = 1 << 2;

// §4.1, 72 bytes.
struct Hello {
  uint16_t version = kVersion;
  bool resuming = false;
  uint32_t features = 0;
  uint64_t client_session = 0;
  uint64_t first_unacked_seq = 0;
  uint32_t max_frame_bytes = 8 << 20;
  uint32_t ack_interval_ms = 1000;
  uint8_t auth_mode = 0;
  std::array<uint8_t, 32> client_nonce{};
  friend bool operator==(const Hello&, const Hello&) = default;
};

// §4.5 (R-SEC-1): CHALLENGE, 68 bytes, and AUTH, 32 bytes.
struct Challenge {
  uint8_t auth_mode = 1;
  std::array<uint8_t, 32> server_nonce{};
  std::array<uint8_t, 32> server_mac{};
  friend bool operator==(const Challenge&, const Challenge&) = default;
};
struct Auth {
  std::array<uint8_t, 32> client_mac{};
  friend bool operator==(const Auth&, const Auth&) = default;
};

// ACK, WELCOME and GOODBYE list transfer progress (§8, §9.4).
struct TransferProgress {
  uint64_t seq = 0;
  uint64_t received = 0;
  friend bool operator==(const TransferProgress&, const TransferProgress&) = default;
};

// §4.3, 48 + 16·n bytes.
struct Welcome {
  uint32_t features = 0;
  uint64_t next_expected = 0;
  uint64_t max_message_bytes = 1ull << 30;
  uint32_t max_frame_bytes = 8 << 20;
  uint32_t dict_max_entries = 4096;
  uint32_t dict_max_bytes = 1 << 20;
  uint32_t transfer_window = 8 << 20;
  uint16_t max_transfers = 4;
  std::vector<TransferProgress> transfers;
  friend bool operator==(const Welcome&, const Welcome&) = default;
};

// §4.4: the frozen layout (any version; `code` absent) or the structured one (version 2).
enum class RejectCode : uint16_t {
  kBadHello = 1,
  kSessionUnknown = 2,
  kSessionOutOfSync = 3,
  kAuthRequired = 4,
  kAuthFailed = 5,
  kAuthUnsupported = 6,
  kBusy = 7,
  kShuttingDown = 8,
};
struct Reject {
  uint16_t version = kVersion;
  std::optional<uint16_t> code;  // structured layout when set (version 2 only)
  std::string text;
  friend bool operator==(const Reject&, const Reject&) = default;
};

// §8, 12 + 16·n bytes.
struct Ack {
  uint64_t next_expected = 0;
  std::vector<TransferProgress> transfers;
  friend bool operator==(const Ack&, const Ack&) = default;
};

// §9.2, ≥ 17 bytes; `bytes` views the frame.
struct Chunk {
  uint64_t seq = 0;
  uint64_t offset = 0;
  std::string_view bytes;
};

// §9.6: ABORT (client) and CANCEL (server) share a layout.
struct TransferEnd {
  uint64_t seq = 0;
  uint8_t reason = 0;  // a Transport reason (§6.5)
  std::string text;
  friend bool operator==(const TransferEnd&, const TransferEnd&) = default;
};

// §11, ≥ 16 + 16·n bytes.
enum class GoodbyeCode : uint16_t {
  kServerStopping = 1,
  kClientClosing = 2,
  kProtocolError = 3,
  kIdle = 4,
};
struct Goodbye {
  uint16_t code = 0;
  uint64_t next_expected = 0;
  std::vector<TransferProgress> transfers;
  std::string text;
  friend bool operator==(const Goodbye&, const Goodbye&) = default;
};

// §10.2: PING and PONG carry a token.
struct Ping {
  uint64_t token = 0;
  friend bool operator==(const Ping&, const Ping&) = default;
};

// Encoders append a whole frame (prefix, kind, body) to `out`. Texts longer than kMaxText are
// cut at a character boundary.
void append(std::string& out, const Hello& f);
void append(std::string& out, const Welcome& f);
void append(std::string& out, const Challenge& f);
void append(std::string& out, const Auth& f);
void append(std::string& out, const Reject& f);
void append(std::string& out, const Ack& f);
void append(std::string& out, const Chunk& f);
void append_abort(std::string& out, const TransferEnd& f);
void append_cancel(std::string& out, const TransferEnd& f);
void append(std::string& out, const Goodbye& f);
void append_ping(std::string& out, const Ping& f);
void append_pong(std::string& out, const Ping& f);

// Decoders of bodies. A HELLO of another version decodes its version only (the caller answers
// with the frozen REJECT, §15): `version` set, everything else default.
absl::StatusOr<Hello> decode_hello(std::string_view body);
absl::StatusOr<Welcome> decode_welcome(std::string_view body);
absl::StatusOr<Challenge> decode_challenge(std::string_view body);
absl::StatusOr<Auth> decode_auth(std::string_view body);
absl::StatusOr<Reject> decode_reject(std::string_view body);
absl::StatusOr<Ack> decode_ack(std::string_view body);
absl::StatusOr<Chunk> decode_chunk(std::string_view body);
absl::StatusOr<TransferEnd> decode_transfer_end(std::string_view body);
absl::StatusOr<Goodbye> decode_goodbye(std::string_view body);
absl::StatusOr<Ping> decode_ping(std::string_view body);

// One frame cut from the stream; `body` views the splitter's buffer until the next feed().
struct RawFrame {
  Kind kind;
  std::string_view body;
};

// Cuts frames out of a byte stream. `limit` is the longest frame (kind included) accepted now:
// kHandshakeFrameLimit until the handshake completes, then the announced max_frame_bytes.
class FrameSplitter {
 public:
  explicit FrameSplitter(uint32_t limit = kHandshakeFrameLimit) : limit_(limit) {}
  FrameSplitter(FrameSplitter&&) = default;
  FrameSplitter& operator=(FrameSplitter&&) = default;
  void set_limit(uint32_t limit) { limit_ = limit; }

  // Appends bytes (a copy).
  void feed(std::string_view bytes);
  // Or, to read straight into the buffer: room for `n` more bytes, to be filled and committed
  // (`commit(k)`, k ≤ n) before anything else is called.
  char* prepare(size_t n);
  void commit(size_t n) { end_ += n; }
  // The next complete frame, nullopt when more bytes are needed, or a stream error (sticky).
  absl::StatusOr<std::optional<RawFrame>> next();
  // Bytes held for an incomplete frame.
  size_t buffered() const { return end_ - start_; }
  // Memory the splitter holds (R-FLOW-4): about the bytes fed and not yet returned (plus the
  // room last prepared), and at most kKeptCapacity once every frame fed was returned. Buffers
  // handed to payload slices (`block`) are theirs, not counted here.
  size_t held_bytes() const { return cap_; }
  static constexpr size_t kKeptCapacity = 256 << 10;
  // The reference-counted buffer the frames `next` returns point into (§14.3). Whoever keeps a
  // copy keeps those bytes as they are: the splitter never writes a buffer that is shared again
  // — it moves what it has not returned yet to a new one.
  const std::shared_ptr<const void>& block() const { return block_; }

 private:
  uint32_t limit_;
  std::shared_ptr<char[]> data_;  // not zeroed: only [start_, end_) is ever read
  std::shared_ptr<const void> block_;  // data_ again, for block() (so data_ is shared at 3)
  size_t cap_ = 0;
  size_t start_ = 0;  // the first byte not yet returned in a frame
  size_t end_ = 0;    // the end of the bytes fed
  absl::Status error_;
};

}  // namespace postal::routing::internal::v2
