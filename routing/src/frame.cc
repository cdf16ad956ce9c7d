#include "postal/routing/frame.h"

#include <cstring>
#include <exception>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cereal/archives/portable_binary.hpp"
#include "postal/wire/absl_compat.h"
#include "postal/wire/codec.h"

namespace postal::routing {
namespace {

constexpr size_t kHelloBody = 2 + 8 + 8;
constexpr size_t kWelcomeBody = 2 + 8;
constexpr size_t kAckBody = 8;

template <class T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) {
    bytes[i] = static_cast<char>(static_cast<uint64_t>(value) >> (8 * i));
  }
  out.append(bytes, sizeof(T));
}

template <class T>
T get(std::string_view in, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  }
  return static_cast<T>(v);
}

// Writes the prefix and kind of a frame whose body is `body_bytes` long.
void put_header(std::string& out, FrameKind kind, size_t body_bytes) {
  put<uint32_t>(out, static_cast<uint32_t>(1 + body_bytes));
  put<uint8_t>(out, static_cast<uint8_t>(kind));
}

absl::Status truncated(FrameKind kind, size_t have, size_t need) {
  return absl::DataLossError(absl::StrCat("truncated ", sv(to_string(kind)), " frame: body has ",
                                          have, " bytes, needs ", need));
}

// Fixed-size bodies are exactly their size.
absl::Status check_fixed(FrameKind kind, std::string_view body, size_t size) {
  if (body.size() < size) return truncated(kind, body.size(), size);
  if (body.size() > size) {
    return absl::DataLossError(absl::StrCat(sv(to_string(kind)), " frame has ", body.size() - size,
                                            " trailing bytes after its ", size, "-byte body"));
  }
  return absl::OkStatus();
}

absl::Status check_version(FrameKind kind, uint16_t version) {
  if (version == kWireVersion) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("wire version mismatch in ", sv(to_string(kind)), ": the peer speaks version ",
                   version, ", this side speaks version ", kWireVersion,
                   "; run the same postal wire version on both ends"));
}

}  // namespace

std::string_view to_string(FrameKind kind) {
  switch (kind) {
    case FrameKind::kHello:
      return "HELLO";
    case FrameKind::kWelcome:
      return "WELCOME";
    case FrameKind::kReject:
      return "REJECT";
    case FrameKind::kData:
      return "DATA";
    case FrameKind::kAck:
      return "ACK";
  }
  return "UNKNOWN";
}

FrameKind kind_of(const Frame& frame) {
  return static_cast<FrameKind>(frame.index() + 1);  // the variant follows the kind order
}

void append_hello(std::string& out, const HelloFrame& f) {
  put_header(out, FrameKind::kHello, kHelloBody);
  put(out, f.version);
  put(out, f.client_session);
  put(out, f.first_unacked_seq);
}

void append_welcome(std::string& out, const WelcomeFrame& f) {
  put_header(out, FrameKind::kWelcome, kWelcomeBody);
  put(out, f.version);
  put(out, f.next_expected_seq);
}

void append_reject(std::string& out, const RejectFrame& f) {
  std::string_view reason = f.reason;
  if (reason.size() > kMaxRejectReason) reason = reason.substr(0, kMaxRejectReason);
  put_header(out, FrameKind::kReject, 2 + reason.size());
  put(out, f.version);
  out.append(reason);
}

void append_data(std::string& out, uint64_t seq, std::string_view envelope) {
  put_header(out, FrameKind::kData, 8 + envelope.size());
  put(out, seq);
  out.append(envelope);
}

void append_ack(std::string& out, const AckFrame& f) {
  put_header(out, FrameKind::kAck, kAckBody);
  put(out, f.next_expected);
}

void append_frame(std::string& out, const Frame& frame) {
  std::visit(
      [&out](const auto& f) {
        using F = std::decay_t<decltype(f)>;
        if constexpr (std::is_same_v<F, HelloFrame>) append_hello(out, f);
        if constexpr (std::is_same_v<F, WelcomeFrame>) append_welcome(out, f);
        if constexpr (std::is_same_v<F, RejectFrame>) append_reject(out, f);
        if constexpr (std::is_same_v<F, DataFrame>) append_data(out, f.seq, f.envelope);
        if constexpr (std::is_same_v<F, AckFrame>) append_ack(out, f);
      },
      frame);
}

absl::StatusOr<std::string> encode_data_frame(runtime::MessageEnvelope& env) {
  try {
    std::ostringstream out(std::ios::binary);
    static constexpr char kZeros[kDataHeaderBytes] = {};
    out.write(kZeros, kDataHeaderBytes);
    {
      cereal::PortableBinaryOutputArchive archive(out);
      archive(env);
    }
    std::string frame = std::move(out).str();
    std::string header;
    put_header(header, FrameKind::kData, frame.size() - kDataHeaderBytes + 8);
    put<uint64_t>(header, 0);
    std::memcpy(frame.data(), header.data(), kDataHeaderBytes);
    return frame;
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("cannot encode the envelope to ", env.dest().to_string(), ": ", e.what()));
  }
}

void set_data_seq(std::string& frame, uint64_t seq) {
  for (size_t i = 0; i < 8; ++i) {
    frame[kLengthPrefixBytes + 1 + i] = static_cast<char>(seq >> (8 * i));
  }
}

uint32_t frame_length(std::string_view frame) { return get<uint32_t>(frame, 0); }

absl::StatusOr<runtime::EnvelopePtr> decode_envelope(std::string_view bytes) {
  auto env = std::make_unique<runtime::MessageEnvelope>();
  absl::Status s = wire::decode_into(bytes, *env, "MessageEnvelope");
  if (!s.ok()) return s;
  return env;
}

FrameDecoder::FrameDecoder(size_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {}

// R-FLOW-4: the buffer grows with the bytes fed (std::string's geometric growth), never to a
// frame's announced length, so an announced-but-unsent frame costs nothing.

void FrameDecoder::feed(std::string_view bytes) {
  if (!error_.ok() || bytes.empty()) return;
  if (start_ > 0 && start_ * 2 >= buffer_.size()) {  // compact: keep the buffer from growing
    buffer_.erase(0, start_);
    start_ = 0;
  }
  buffer_.append(bytes);
}

absl::StatusOr<std::optional<Frame>> FrameDecoder::next() {
  if (!error_.ok()) return error_;
  const std::string_view pending = std::string_view(buffer_).substr(start_);
  if (pending.size() < kLengthPrefixBytes) return std::nullopt;
  const uint32_t length = get<uint32_t>(pending, 0);
  if (length > max_frame_bytes_) {
    error_ = absl::ResourceExhaustedError(absl::StrCat("frame length ", length,
                                                       " exceeds the maximum of ", max_frame_bytes_,
                                                       " bytes (ChannelOptions::max_frame_bytes)"));
    return error_;
  }
  if (length == 0) {
    error_ = absl::DataLossError("frame length 0: every frame has at least its kind byte");
    return error_;
  }
  if (pending.size() - kLengthPrefixBytes < length) return std::nullopt;
  const uint8_t kind = static_cast<uint8_t>(pending[kLengthPrefixBytes]);
  if (kind < static_cast<uint8_t>(FrameKind::kHello) ||
      kind > static_cast<uint8_t>(FrameKind::kAck)) {
    error_ =
        absl::DataLossError(absl::StrCat("unknown frame kind ", static_cast<int>(kind), " (length ",
                                         length, "); expected 1..5 (HELLO..ACK)"));
    return error_;
  }
  const std::string_view body = pending.substr(kLengthPrefixBytes + 1, length - 1);
  absl::StatusOr<Frame> frame = parse(static_cast<FrameKind>(kind), body);
  if (!frame.ok()) {
    error_ = frame.status();
    return error_;
  }
  start_ += kLengthPrefixBytes + length;
  if (start_ == buffer_.size()) {
    // R-FLOW-4: a large frame's buffer is not kept once the frame is out; small ones are reused.
    if (buffer_.capacity() > kKeptCapacity) {
      std::string().swap(buffer_);
    } else {
      buffer_.clear();
    }
    start_ = 0;
  }
  return std::optional<Frame>(*std::move(frame));
}

absl::StatusOr<Frame> FrameDecoder::parse(FrameKind kind, std::string_view body) const {
  switch (kind) {
    case FrameKind::kHello:
    case FrameKind::kWelcome:
    case FrameKind::kReject: {
      if (body.size() < 2) return truncated(kind, body.size(), 2);
      const uint16_t version = get<uint16_t>(body, 0);
      if (kind == FrameKind::kReject) {  // frozen layout: readable whatever the version
        return Frame(RejectFrame{version, std::string(body.substr(2))});
      }
      if (absl::Status s = check_version(kind, version); !s.ok()) return s;
      if (kind == FrameKind::kHello) {
        if (absl::Status s = check_fixed(kind, body, kHelloBody); !s.ok()) return s;
        return Frame(HelloFrame{version, get<uint64_t>(body, 2), get<uint64_t>(body, 10)});
      }
      if (absl::Status s = check_fixed(kind, body, kWelcomeBody); !s.ok()) return s;
      return Frame(WelcomeFrame{version, get<uint64_t>(body, 2)});
    }
    case FrameKind::kData:
      if (body.size() < 8) return truncated(kind, body.size(), 8);
      return Frame(DataFrame{get<uint64_t>(body, 0), std::string(body.substr(8))});
    case FrameKind::kAck:
      if (absl::Status s = check_fixed(kind, body, kAckBody); !s.ok()) return s;
      return Frame(AckFrame{get<uint64_t>(body, 0)});
  }
  return absl::DataLossError("unknown frame kind");
}

}  // namespace postal::routing
