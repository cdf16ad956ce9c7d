// Frames: the versioned wire format of the ipc and tcp channels (R-CHAN-1). docs/wire-v1.md has the
// byte-by-byte layout; this header is its code.
//
//   frame   = u32 length (little-endian; the bytes that follow it) | u8 kind | body
//   HELLO   = u16 version | u64 client_session | u64 first_unacked_seq        (client → server)
//   WELCOME = u16 version | u64 next_expected_seq                             (server → client)
//   REJECT  = u16 version | reason (UTF-8, the rest of the body)              (server → client)
//   DATA    = u64 seq | envelope (cereal portable binary of a MessageEnvelope, the rest)
//   ACK     = u64 next_expected: every seq below it was enqueued at the receiving proc
//
// All integers are little-endian. A fixed-size body must be exactly its size. Both sides speak
// exactly one version (kWireVersion); any layout change bumps it. The version is the first field
// of every handshake frame, and REJECT's layout is frozen for all versions, so a peer can always
// read why it was turned away.
//
// Guarantees
//   `FrameDecoder` accepts bytes in chunks of any size and never reads past what it was fed,
//   whatever the input (fuzz/frame_decoder_fuzzer.cc). It yields frames in order, or one error,
//   after which the stream is unusable (there is no resynchronisation point) and every later
//   `next()` returns the same error.
//   R-FLOW-4 (memory): the decoder holds at most about twice the bytes fed and not yet returned
//   (its buffer grows as bytes arrive, never to the length a prefix announces), and once every
//   frame fed has been returned it keeps at most kKeptCapacity bytes (a large frame's buffer is
//   freed).
//
// Failure (statuses returned by `FrameDecoder::next`)
//   ResourceExhausted   the length prefix exceeds the decoder's maximum (names both)
//   DataLoss            length 0, unknown kind, truncated body, trailing bytes in a fixed body
//   FailedPrecondition  a HELLO or WELCOME of another wire version (names both versions)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "postal/runtime/message_envelope.h"

namespace postal::routing {

// The one wire version this build speaks.
inline constexpr uint16_t kWireVersion = 1;
// Bytes of the length prefix.
inline constexpr size_t kLengthPrefixBytes = 4;
// Bytes of the length prefix, kind and seq of a DATA frame, before the envelope.
inline constexpr size_t kDataHeaderBytes = kLengthPrefixBytes + 1 + 8;
// REJECT reasons are cut to this many bytes when encoded.
inline constexpr size_t kMaxRejectReason = 1024;

enum class FrameKind : uint8_t {
  kHello = 1,
  kWelcome = 2,
  kReject = 3,
  kData = 4,
  kAck = 5,
};
std::string_view to_string(FrameKind kind);

struct HelloFrame {
  uint16_t version = kWireVersion;
  uint64_t client_session = 0;
  uint64_t first_unacked_seq = 0;
  bool operator==(const HelloFrame&) const = default;
};
struct WelcomeFrame {
  uint16_t version = kWireVersion;
  uint64_t next_expected_seq = 0;
  bool operator==(const WelcomeFrame&) const = default;
};
struct RejectFrame {
  uint16_t version = kWireVersion;
  std::string reason;
  bool operator==(const RejectFrame&) const = default;
};
struct DataFrame {
  uint64_t seq = 0;
  std::string envelope;  // cereal portable binary of a runtime::MessageEnvelope
  bool operator==(const DataFrame&) const = default;
};
struct AckFrame {
  uint64_t next_expected = 0;
  bool operator==(const AckFrame&) const = default;
};
using Frame = std::variant<HelloFrame, WelcomeFrame, RejectFrame, DataFrame, AckFrame>;

FrameKind kind_of(const Frame& frame);

// Encoding: each helper appends one complete frame (prefix included) to `out`, so a caller can
// batch many frames into one buffer for one write.
void append_hello(std::string& out, const HelloFrame& frame);
void append_welcome(std::string& out, const WelcomeFrame& frame);
void append_reject(std::string& out, const RejectFrame& frame);  // reason cut to kMaxRejectReason
void append_data(std::string& out, uint64_t seq, std::string_view envelope);
void append_ack(std::string& out, const AckFrame& frame);
void append_frame(std::string& out, const Frame& frame);

// The value of the length prefix of a DATA frame carrying `envelope_bytes` (what max_frame_bytes
// limits).
constexpr uint64_t data_frame_length(uint64_t envelope_bytes) { return 1 + 8 + envelope_bytes; }

// A complete DATA frame for `env` with seq 0, serializing the envelope straight into the frame
// (no intermediate copy). The payload's bytes are computed once and cached in its Any (R-ENV-4).
// Fails with Internal when the payload cannot be serialized (an empty Any, a throwing save).
absl::StatusOr<std::string> encode_data_frame(runtime::MessageEnvelope& env);
// Patches the seq of a frame made by encode_data_frame / append_data (the only frame in `frame`).
void set_data_seq(std::string& frame, uint64_t seq);
// The length prefix of the frame at the start of `frame` (precondition: ≥ 4 bytes).
uint32_t frame_length(std::string_view frame);

// Decodes a DATA frame's envelope bytes. DataLoss names what is wrong; never throws.
absl::StatusOr<runtime::EnvelopePtr> decode_envelope(std::string_view bytes);

class FrameDecoder {
 public:
  // `max_frame_bytes` bounds the length prefix (kind + body); a larger one is an error before
  // any of its body is buffered.
  explicit FrameDecoder(size_t max_frame_bytes);

  // Appends bytes received from the stream.
  void feed(std::string_view bytes);

  // The next complete frame; nullopt when more bytes are needed; an error (sticky) when the
  // stream is malformed.
  absl::StatusOr<std::optional<Frame>> next();

  // Bytes fed but not yet returned as frames (a partial frame at end of stream is truncation).
  size_t buffered() const { return buffer_.size() - start_; }
  // Bytes of memory the decoder's buffer holds now (≥ buffered()).
  size_t held_bytes() const { return buffer_.capacity(); }
  // An empty decoder keeps a buffer up to this size for reuse; a larger one is freed.
  static constexpr size_t kKeptCapacity = 64 << 10;
  size_t max_frame_bytes() const { return max_frame_bytes_; }

 private:
  absl::StatusOr<Frame> parse(FrameKind kind, std::string_view body) const;

  size_t max_frame_bytes_;
  std::string buffer_;
  size_t start_ = 0;  // first unconsumed byte of buffer_
  absl::Status error_;
};

}  // namespace postal::routing
