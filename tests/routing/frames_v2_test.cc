// Wire v2's frames (routing/src/frames_v2.h; docs/wire.md §3, §4, §8–§11, §16): every kind
// round-trips through the splitter in any chunking, and every malformed body or prefix is a
// stream error found before anything past the frame is buffered (R-FLOW-4).
#include "frames_v2.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace postal::routing::internal::v2 {
namespace {

// Feeds `bytes` one byte at a time and returns every frame (kind and a copy of the body).
std::vector<std::pair<Kind, std::string>> split_bytewise(const std::string& bytes) {
  FrameSplitter splitter(1 << 20);
  std::vector<std::pair<Kind, std::string>> frames;
  for (char c : bytes) {
    splitter.feed(std::string_view(&c, 1));
    for (;;) {
      absl::StatusOr<std::optional<RawFrame>> f = splitter.next();
      EXPECT_TRUE(f.ok()) << f.status();
      if (!f.ok() || !f->has_value()) break;
      frames.emplace_back((*f)->kind, std::string((*f)->body));
    }
  }
  EXPECT_EQ(splitter.buffered(), 0u);
  return frames;
}

TEST(FramesV2, R_CHAN_1_EveryKindRoundTripsInAnyChunking) {
  Hello hello;
  hello.resuming = true;
  hello.features = kFeatureHeartbeat;
  hello.client_session = 0x1122334455667788;
  hello.first_unacked_seq = 41;
  hello.ack_interval_ms = 7500;
  hello.client_nonce[31] = 9;
  Welcome welcome;
  welcome.next_expected = 42;
  welcome.transfers = {{40, 1 << 20}, {41, 5}};
  Reject structured{kVersion, uint16_t{2}, "session unknown: this server restarted"};
  Reject frozen{kVersion, std::nullopt, "wire version mismatch: client speaks 1, server 2"};
  Ack ack{43, {{40, 2 << 20}}};
  const std::string chunk_bytes(3000, 'c');
  Chunk chunk{40, 1 << 20, chunk_bytes};
  TransferEnd abort{40, 3, "the upstream aborted"};
  TransferEnd cancel{41, 7, "reassembly budget exhausted"};
  Goodbye goodbye{1, 44, {{41, 9}}, "the server is stopping"};
  Ping ping{77};

  std::string bytes;
  append(bytes, hello);
  append(bytes, welcome);
  append(bytes, structured);
  append(bytes, frozen);
  append(bytes, ack);
  append(bytes, chunk);
  append_abort(bytes, abort);
  append_cancel(bytes, cancel);
  append(bytes, goodbye);
  append_ping(bytes, ping);
  append_pong(bytes, ping);
  auto frames = split_bytewise(bytes);
  ASSERT_EQ(frames.size(), 11u);

  EXPECT_EQ(frames[0].first, Kind::kHello);
  EXPECT_EQ(frames[0].second.size(), 72u);
  EXPECT_EQ(*decode_hello(frames[0].second), hello);
  EXPECT_EQ(frames[1].first, Kind::kWelcome);
  EXPECT_EQ(*decode_welcome(frames[1].second), welcome);
  EXPECT_EQ(*decode_reject(frames[2].second), structured);
  // A frozen REJECT of version 2 reads back as structured: the layout follows the version.
  absl::StatusOr<Reject> frozen_back = decode_reject(frames[3].second);
  ASSERT_TRUE(frozen_back.ok());
  EXPECT_EQ(frozen_back->version, kVersion);
  EXPECT_EQ(*decode_ack(frames[4].second), ack);
  absl::StatusOr<Chunk> c = decode_chunk(frames[5].second);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->seq, 40u);
  EXPECT_EQ(c->offset, 1u << 20);
  EXPECT_EQ(c->bytes, chunk_bytes);
  EXPECT_EQ(frames[6].first, Kind::kAbort);
  EXPECT_EQ(*decode_transfer_end(frames[6].second), abort);
  EXPECT_EQ(frames[7].first, Kind::kCancel);
  EXPECT_EQ(*decode_transfer_end(frames[7].second), cancel);
  EXPECT_EQ(*decode_goodbye(frames[8].second), goodbye);
  EXPECT_EQ(frames[9].first, Kind::kPing);
  EXPECT_EQ(*decode_ping(frames[9].second), ping);
  EXPECT_EQ(frames[10].first, Kind::kPong);
}

// §15: a HELLO of version 1 is recognized by its first field, so the server can answer with the
// frozen REJECT naming both versions; and a version-1 REJECT reads in the frozen layout.
TEST(FramesV2, R_CHAN_1_AnotherVersionIsRecognizedByItsFirstField) {
  std::string v1_hello_body;
  const uint16_t v1 = 1;
  v1_hello_body.append(reinterpret_cast<const char*>(&v1), 2);
  v1_hello_body.append(16, '\x05');  // v1's session and first unacked seq
  absl::StatusOr<Hello> h = decode_hello(v1_hello_body);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->version, 1);
  std::string frame;
  append(frame, Reject{1, std::nullopt, "wire version mismatch: client speaks 2, server 1"});
  absl::StatusOr<Reject> r = decode_reject(std::string_view(frame).substr(5));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->version, 1);
  EXPECT_FALSE(r->code.has_value());
  EXPECT_EQ(r->text, "wire version mismatch: client speaks 2, server 1");
}

TEST(FramesV2, R_FLOW_4_MalformedBodiesAreStreamErrors) {
  std::string hello;
  Hello good;
  good.client_session = 5;
  append(hello, good);
  std::string body = hello.substr(5);
  auto patched = [&](size_t at, uint8_t v) {
    std::string b = body;
    b[at] = static_cast<char>(v);
    return b;
  };
  EXPECT_TRUE(decode_hello(body).ok());
  EXPECT_FALSE(decode_hello(body.substr(0, 71)).ok()) << "truncated";
  EXPECT_FALSE(decode_hello(body + "x").ok()) << "trailing byte";
  EXPECT_FALSE(decode_hello(patched(2, 2)).ok()) << "a reserved flag";
  EXPECT_FALSE(decode_hello(patched(33, 1)).ok()) << "a reserved byte";
  EXPECT_FALSE(decode_hello(patched(16, 1)).ok()) << "not resuming with a first unacked seq";
  std::string zero_session = body;
  std::memset(zero_session.data() + 8, 0, 8);
  EXPECT_FALSE(decode_hello(zero_session).ok()) << "session 0";

  std::string welcome;
  append(welcome, Welcome{});
  std::string wbody = welcome.substr(5);
  EXPECT_TRUE(decode_welcome(wbody).ok());
  std::string many = wbody;
  const uint16_t huge = 60;  // ≤ max_transfers would need 60 × 16 bytes that are not there
  std::memcpy(many.data() + 42, &huge, 2);
  EXPECT_FALSE(decode_welcome(many).ok()) << "a count past the bytes left";
  std::string tiny_dict = wbody;
  const uint32_t small = 10;
  std::memcpy(tiny_dict.data() + 28, &small, 4);
  EXPECT_FALSE(decode_welcome(tiny_dict).ok()) << "a limit out of range";

  EXPECT_FALSE(decode_ack(std::string(11, '\0')).ok());
  EXPECT_FALSE(decode_chunk(std::string(16, '\0')).ok()) << "a chunk without bytes";
  EXPECT_FALSE(decode_ping(std::string(9, '\0')).ok());
  std::string long_text(10 + 2000, 'x');
  std::memset(long_text.data(), 0, 10);
  EXPECT_FALSE(decode_transfer_end(long_text).ok()) << "a text over 1024 bytes";
}

TEST(FramesV2, R_FLOW_4_ASplitterRefusesFromThePrefixAlone) {
  {
    FrameSplitter s;  // the handshake limit: 4096
    const uint32_t length = 5000;
    s.feed(std::string_view(reinterpret_cast<const char*>(&length), 4));
    absl::StatusOr<std::optional<RawFrame>> f = s.next();
    EXPECT_FALSE(f.ok()) << "refused before a byte of the body arrived";
    EXPECT_EQ(s.buffered(), 4u);
    s.feed("more");
    EXPECT_FALSE(s.next().ok()) << "the error is sticky";
  }
  for (const uint8_t kind : {uint8_t{0}, uint8_t{15}, uint8_t{255}}) {
    FrameSplitter s;
    std::string frame("\x01\x00\x00\x00", 4);
    frame.push_back(static_cast<char>(kind));
    s.feed(frame);
    EXPECT_FALSE(s.next().ok()) << "kind " << int(kind);
  }
  FrameSplitter s;
  s.feed(std::string("\x00\x00\x00\x00", 4));
  EXPECT_FALSE(s.next().ok()) << "length 0";
}

TEST(FramesV2, R_CHAN_3_OversizedLengthIsAnErrorNamingLenAndMax) {
  FrameSplitter s(8192);
  const uint32_t length = 9000;
  s.feed(std::string_view(reinterpret_cast<const char*>(&length), 4));
  absl::StatusOr<std::optional<RawFrame>> f = s.next();
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("9000"), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find("8192"), std::string::npos) << f.status();
}

TEST(FramesV2, R_FLOW_4_MemoryFollowsTheBytesFedNotTheAnnouncedLength) {
  constexpr size_t kBig = 8 << 20;
  std::string frame;
  append(frame, Chunk{0, 0, std::string_view(std::string(kBig - 64, 'x'))});
  FrameSplitter splitter(kBig);
  splitter.feed(std::string_view(frame).substr(0, 100));  // the prefix announces ~8 MiB
  absl::StatusOr<std::optional<RawFrame>> f = splitter.next();
  ASSERT_TRUE(f.ok() && !f->has_value());
  EXPECT_LT(splitter.held_bytes(), 4096u) << "the announced length was reserved up front";
  for (size_t at = 100; at < frame.size(); at += 64 << 10) {
    splitter.feed(std::string_view(frame).substr(at, 64 << 10));
    EXPECT_LE(splitter.held_bytes(), 2 * splitter.buffered() + 4096) << "at " << at;
  }
  f = splitter.next();
  ASSERT_TRUE(f.ok() && f->has_value());
  EXPECT_EQ(splitter.buffered(), 0u);
  splitter.feed(std::string(10, '\0'));  // the next frame begins: the big buffer is let go
  EXPECT_LE(splitter.held_bytes(), FrameSplitter::kKeptCapacity) << "the big buffer was kept";
}

TEST(FramesV2, R_CHAN_4_ABufferAPayloadStillSlicesIsNeverWrittenAgain) {
  // CHUNK frames of 40 000 bytes fed 30 000 at a time: a partial frame sits behind most
  // returned ones, which the splitter would otherwise compact over the returned bytes.
  std::vector<std::string> frames;
  for (char c : {'a', 'b', 'c', 'd'}) {
    std::string f;
    append(f, Chunk{0, 0, std::string_view(std::string(40'000, c))});
    frames.push_back(f);
  }
  std::string all;
  for (const std::string& f : frames) all += f;
  FrameSplitter splitter(1 << 20);
  std::vector<std::pair<std::shared_ptr<const void>, std::string_view>> held;
  for (size_t at = 0; at < all.size(); at += 30'000) {
    splitter.feed(std::string_view(all).substr(at, 30'000));  // compacts, or moves, the rest
    for (;;) {
      absl::StatusOr<std::optional<RawFrame>> f = splitter.next();
      ASSERT_TRUE(f.ok()) << f.status();
      if (!f->has_value()) break;
      held.emplace_back(splitter.block(), (*f)->body);  // kept, as a sliced payload keeps it
    }
  }
  ASSERT_EQ(held.size(), frames.size());
  for (size_t i = 0; i < held.size(); ++i) {
    EXPECT_EQ(held[i].second, std::string_view(frames[i]).substr(5)) << "frame " << i;
  }
  // Once nothing holds them, the splitter reuses its buffer again (no allocation per read).
  held.clear();
  splitter.feed(std::string_view(frames[0]).substr(0, 10));
  const void* const before = splitter.block().get();
  splitter.feed(std::string_view(frames[0]).substr(10, 10));
  EXPECT_EQ(splitter.block().get(), before);
}

}  // namespace
}  // namespace postal::routing::internal::v2
