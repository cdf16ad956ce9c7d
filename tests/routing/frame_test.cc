// Frames and FrameDecoder: the channel wire format, every error, any chunking (frame.h;
// R-CHAN-1, R-CHAN-3, docs/wire-v1.md).
#include "postal/routing/frame.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "postal/runtime/address.h"

namespace {

struct FrameMsg {
  int64_t n = 0;
  std::string text;
  template <class A>
  void serialize(A& a) {
    a(n, text);
  }
};

}  // namespace

POSTAL_MESSAGE(FrameMsg, "test.routing.frame.Msg");

namespace postal::routing {
namespace {

using runtime::Label;
using runtime::Uid;

std::vector<Frame> all_kinds() {
  return {HelloFrame{kWireVersion, 0x0123456789abcdefull, 42}, WelcomeFrame{kWireVersion, 7},
          RejectFrame{kWireVersion, "unknown session: this server restarted; redial"},
          DataFrame{9, std::string("\x00\x01envelope\xff", 11)}, AckFrame{1000}};
}

std::string encode_all(const std::vector<Frame>& frames) {
  std::string out;
  for (const Frame& f : frames) append_frame(out, f);
  return out;
}

// Decodes everything in `bytes`, fed `chunk` bytes at a time.
absl::StatusOr<std::vector<Frame>> decode_all(const std::string& bytes, size_t chunk,
                                              size_t max = 1 << 20) {
  FrameDecoder decoder(max);
  std::vector<Frame> frames;
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    decoder.feed(std::string_view(bytes).substr(at, chunk));
    for (;;) {
      absl::StatusOr<std::optional<Frame>> f = decoder.next();
      if (!f.ok()) return f.status();
      if (!f->has_value()) break;
      frames.push_back(**f);
    }
  }
  EXPECT_EQ(decoder.buffered(), 0u);
  return frames;
}

// A raw frame: prefix with `length`, then `rest` (kind + body).
std::string raw(uint32_t length, const std::string& rest) {
  std::string out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(length >> (8 * i)));
  return out + rest;
}

absl::Status first_error(const std::string& bytes, size_t max = 1 << 20) {
  FrameDecoder decoder(max);
  decoder.feed(bytes);
  absl::StatusOr<std::optional<Frame>> f = decoder.next();
  if (f.ok()) return absl::OkStatus();
  // Sticky: the stream has no resynchronisation point.
  absl::StatusOr<std::optional<Frame>> again = decoder.next();
  EXPECT_FALSE(again.ok());
  if (!again.ok()) {
    EXPECT_EQ(again.status(), f.status());
  }
  return f.status();
}

TEST(Frame, R_CHAN_1_EveryKindRoundTripsInAnyChunking) {
  const std::vector<Frame> frames = all_kinds();
  const std::string bytes = encode_all(frames);
  for (size_t chunk : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}, bytes.size()}) {
    absl::StatusOr<std::vector<Frame>> decoded = decode_all(bytes, chunk);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, frames) << "chunk " << chunk;
  }
}

TEST(Frame, LayoutIsLittleEndianLengthKindBody) {
  std::string out;
  append_ack(out, AckFrame{0x0102030405060708ull});
  ASSERT_EQ(out.size(), 4u + 1u + 8u);
  EXPECT_EQ(out.substr(0, 4), std::string("\x09\x00\x00\x00", 4));  // length of kind + body
  EXPECT_EQ(out[4], static_cast<char>(FrameKind::kAck));
  EXPECT_EQ(out.substr(5), std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));

  std::string hello;
  append_hello(hello, HelloFrame{kWireVersion, 1, 2});
  EXPECT_EQ(hello.size(), 4u + 1u + 18u);
  EXPECT_EQ(hello.substr(5, 2), std::string("\x01\x00", 2));  // u16 version first
}

TEST(Frame, R_CHAN_3_OversizedLengthIsAnErrorNamingLenAndMax) {
  absl::Status s = first_error(raw(1001, std::string("\x04", 1)), 1000);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("1001"), std::string::npos) << s;
  EXPECT_NE(s.message().find("1000"), std::string::npos) << s;
}

TEST(Frame, OversizedLengthFailsBeforeTheBodyArrives) {
  FrameDecoder decoder(16);
  decoder.feed(raw(0xffffffffu, ""));  // only the prefix
  EXPECT_EQ(decoder.next().status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(Frame, ExactlyMaxIsAccepted) {
  std::string out;
  append_data(out, 3, std::string(100, 'x'));
  const size_t max = data_frame_length(100);
  absl::StatusOr<std::vector<Frame>> decoded = decode_all(out, out.size(), max);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(std::get<DataFrame>((*decoded)[0]).envelope, std::string(100, 'x'));
  EXPECT_EQ(first_error(out, max - 1).code(), absl::StatusCode::kResourceExhausted);
}

TEST(Frame, ZeroLengthIsAnError) {
  EXPECT_EQ(first_error(raw(0, "")).code(), absl::StatusCode::kDataLoss);
}

TEST(Frame, UnknownKindIsAnError) {
  for (char kind : {'\x00', '\x06', '\xff'}) {
    absl::Status s = first_error(raw(1, std::string(1, kind)));
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(s.message().find("unknown frame kind"), std::string::npos) << s;
  }
}

TEST(Frame, TruncatedBodiesAreErrors) {
  // Each kind with a body one byte short of its minimum.
  const std::vector<std::pair<char, size_t>> minimum = {
      {'\x01', 18}, {'\x02', 10}, {'\x03', 2}, {'\x04', 8}, {'\x05', 8}};
  for (auto [kind, size] : minimum) {
    std::string body = std::string(1, kind) + std::string("\x01\x00", 2) + std::string(size, '\0');
    body.resize(1 + size - 1);  // kind + (size - 1) body bytes; version (if any) stays 1
    absl::Status s = first_error(raw(static_cast<uint32_t>(body.size()), body));
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << "kind " << int(kind) << ": " << s;
    EXPECT_NE(s.message().find("truncated"), std::string::npos) << s;
  }
}

TEST(Frame, TrailingBytesInAFixedBodyAreErrors) {
  std::string ack;
  append_ack(ack, AckFrame{1});
  std::string longer = raw(10, ack.substr(4) + "x");
  absl::Status s = first_error(longer);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("trailing"), std::string::npos) << s;
}

TEST(Frame, R_CHAN_1_AnotherWireVersionIsAnErrorNamingBothVersions) {
  std::string hello;
  append_hello(hello, HelloFrame{7, 1, 0});
  absl::Status s = first_error(hello);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("version 7"), std::string::npos) << s;
  EXPECT_NE(s.message().find("version 1"), std::string::npos) << s;

  std::string welcome;
  append_welcome(welcome, WelcomeFrame{2, 0});
  EXPECT_EQ(first_error(welcome).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Frame, RejectOfAnyVersionStaysReadable) {
  std::string reject;
  append_reject(reject, RejectFrame{9, "from the future"});
  absl::StatusOr<std::vector<Frame>> decoded = decode_all(reject, 5);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(std::get<RejectFrame>((*decoded)[0]), (RejectFrame{9, "from the future"}));
}

TEST(Frame, RejectReasonIsBounded) {
  std::string reject;
  append_reject(reject, RejectFrame{kWireVersion, std::string(5000, 'r')});
  absl::StatusOr<std::vector<Frame>> decoded = decode_all(reject, reject.size());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(std::get<RejectFrame>((*decoded)[0]).reason.size(), kMaxRejectReason);
}

TEST(Frame, ErrorsComeOnlyAfterTheGoodFramesBeforeThem) {
  std::string bytes;
  append_ack(bytes, AckFrame{1});
  bytes += raw(1, "\x09");
  FrameDecoder decoder(1024);
  decoder.feed(bytes);
  absl::StatusOr<std::optional<Frame>> first = decoder.next();
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ(std::get<AckFrame>(**first).next_expected, 1u);
  EXPECT_FALSE(decoder.next().ok());
}

TEST(Frame, PartialFrameWaitsForMoreBytes) {
  std::string out;
  append_welcome(out, WelcomeFrame{kWireVersion, 5});
  FrameDecoder decoder(1024);
  decoder.feed(std::string_view(out).substr(0, out.size() - 1));
  absl::StatusOr<std::optional<Frame>> f = decoder.next();
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->has_value());
  EXPECT_EQ(decoder.buffered(), out.size() - 1);
  decoder.feed(std::string_view(out).substr(out.size() - 1));
  f = decoder.next();
  ASSERT_TRUE(f.ok() && f->has_value());
  EXPECT_EQ(std::get<WelcomeFrame>(**f).next_expected_seq, 5u);
}

// R-FLOW-4 (listener bounds): an announced length reserves nothing; memory follows the bytes
// that arrived, and a large frame's buffer is freed once the frame is out.
TEST(Frame, R_FLOW_4_MemoryFollowsTheBytesFedNotTheAnnouncedLength) {
  constexpr size_t kBig = 8 << 20;
  std::string frame;
  append_data(frame, 0, std::string(kBig - 64, 'x'));
  FrameDecoder decoder(kBig);
  decoder.feed(std::string_view(frame).substr(0, 100));  // the prefix announces ~8 MiB
  absl::StatusOr<std::optional<Frame>> f = decoder.next();
  ASSERT_TRUE(f.ok() && !f->has_value());
  EXPECT_LT(decoder.held_bytes(), 4096u) << "the announced length was reserved up front";

  for (size_t at = 100; at < frame.size(); at += 64 << 10) {
    decoder.feed(std::string_view(frame).substr(at, 64 << 10));
    EXPECT_LE(decoder.held_bytes(), 2 * decoder.buffered() + 4096) << "at " << at;
  }
  f = decoder.next();
  ASSERT_TRUE(f.ok() && f->has_value());
  EXPECT_EQ(decoder.buffered(), 0u);
  EXPECT_LE(decoder.held_bytes(), FrameDecoder::kKeptCapacity) << "the big buffer was kept";
}

TEST(Frame, R_ENV_4_DataFrameCarriesTheEnvelopeSerializedOnce) {
  const runtime::ProcId proc{Uid::singleton(*Label::parse("p"))};
  const runtime::ActorAddr sender{runtime::ActorId{proc, Uid::singleton(*Label::parse("a"))}, {}};
  const runtime::PortAddr dest = sender.port(runtime::Port::ephemeral(3));
  auto env = runtime::MessageEnvelope::make(sender, dest, wire::Any::make(FrameMsg{5, "hi"}));
  env->headers().set_value("k", wire::HeaderValue(int64_t{1}));

  absl::StatusOr<std::string> frame = encode_data_frame(*env);
  ASSERT_TRUE(frame.ok()) << frame.status();
  set_data_seq(*frame, 77);
  EXPECT_EQ(frame_length(*frame), frame->size() - kLengthPrefixBytes);
  EXPECT_TRUE(env->data().is_typed());  // the sender's copy keeps its typed value

  absl::StatusOr<std::vector<Frame>> decoded = decode_all(*frame, 13);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const DataFrame& data = std::get<DataFrame>((*decoded)[0]);
  EXPECT_EQ(data.seq, 77u);
  absl::StatusOr<runtime::EnvelopePtr> back = decode_envelope(data.envelope);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->dest(), dest);
  EXPECT_EQ((*back)->sender(), sender);
  EXPECT_FALSE((*back)->data().is_typed());  // bytes until a port of the type decodes them
  absl::StatusOr<FrameMsg> msg = (*back)->data().take<FrameMsg>();
  ASSERT_TRUE(msg.ok()) << msg.status();
  EXPECT_EQ(msg->n, 5);
  EXPECT_EQ(msg->text, "hi");
}

TEST(Frame, UndecodableEnvelopeIsDataLossNotACrash) {
  absl::StatusOr<runtime::EnvelopePtr> env = decode_envelope("\x01garbage");
  EXPECT_EQ(env.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(decode_envelope("").ok());
}

}  // namespace
}  // namespace postal::routing
