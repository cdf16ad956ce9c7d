#include "postal/wire/shared_bytes.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "postal/wire/any.h"
#include "postal/wire/codec.h"

namespace {

// A large shared field between small ones, as postal bench's Payload has.
struct Blob {
  uint64_t seq = 0;
  postal::wire::SharedBytes body;
  std::string tail;
  template <class A>
  void serialize(A& a) {
    a(seq, body, tail);
  }
};

// The same layout with a plain string: what a peer declaring the field as std::string reads.
struct StringBlob {
  uint64_t seq = 0;
  std::string body;
  std::string tail;
  template <class A>
  void serialize(A& a) {
    a(seq, body, tail);
  }
};

}  // namespace

POSTAL_MESSAGE(Blob, "test.SharedBlob");
POSTAL_MESSAGE(StringBlob, "test.StringBlob");

namespace postal::wire {
namespace {

// Bytes whose value depends on the position, so a piece in the wrong place shows.
std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return s;
}

std::string joined(const PayloadBytes& b) {
  std::string all;
  b.for_each_piece([&](std::string_view p) { all.append(p); });
  return all;
}

TEST(SharedBytes, R_ENV_4_OnTheWireExactlyAString) {
  const std::string body = pattern(64 << 10);
  absl::StatusOr<std::string> shared = encode(Blob{7, SharedBytes(body), "end"});
  absl::StatusOr<std::string> plain = encode(StringBlob{7, body, "end"});
  ASSERT_TRUE(shared.ok());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*shared, *plain);
  absl::StatusOr<StringBlob> back = decode<StringBlob>(*shared);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->body, body);
}

TEST(SharedBytes, R_ENV_4_AGatheredPayloadReferencesTheBodyAndHasTheSameBytes) {
  const SharedBytes body(pattern(64 << 10));
  Any a = Any::make(Blob{9, body, "tail"});
  absl::StatusOr<PayloadBytes*> bytes = a.serialized();
  ASSERT_TRUE(bytes.ok());
  EXPECT_TRUE((*bytes)->gathered());
  EXPECT_EQ((*bytes)->piece_count(), 3u);  // head, the body where it is, tail
  bool referenced = false;
  (*bytes)->for_each_piece([&](std::string_view p) { referenced |= p.data() == body.data(); });
  EXPECT_TRUE(referenced) << "the body was copied, not referenced";
  EXPECT_EQ(joined(**bytes), *encode(StringBlob{9, std::string(body.view()), "tail"}));
  EXPECT_EQ((*bytes)->size(), joined(**bytes).size());
}

TEST(SharedBytes, AMovedFromValueIsEmpty) {
  SharedBytes a(pattern(100));
  SharedBytes b = std::move(a);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): what a move leaves is the point
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.view(), pattern(100));
}

TEST(SharedBytes, R_ENV_4_SmallSharedFieldsAreCopiedNotReferenced) {
  Any a = Any::make(Blob{1, SharedBytes(pattern(100)), "t"});
  absl::StatusOr<PayloadBytes*> bytes = a.serialized();
  ASSERT_TRUE(bytes.ok());
  EXPECT_FALSE((*bytes)->gathered());
  EXPECT_EQ((*bytes)->piece_count(), 1u);
}

TEST(SharedBytes, R_CHAN_2_GatheredBytesSurviveTheSenderDroppingItsValue) {
  const std::string expected_body = pattern(64 << 10);
  Any a = Any::make(Blob{3, SharedBytes(expected_body), "x"});
  std::vector<std::string_view> pieces;  // what a channel keeps to write, and resend
  (*a.serialized())->for_each_piece([&](std::string_view p) { pieces.push_back(p); });
  const std::string before = joined(**a.serialized());
  {
    absl::StatusOr<Blob> taken = a.take<Blob>();  // the value leaves the Any and is freed
    ASSERT_TRUE(taken.ok());
  }
  Any moved = std::move(a);  // an envelope moves its Any around
  std::string after;
  for (std::string_view p : pieces) after.append(p);
  EXPECT_EQ(after, before);
  EXPECT_EQ(*moved.bytes(), before);
  // Joining into one run (a mail store, a transfer) leaves the pieces handed out valid.
  after.clear();
  for (std::string_view p : pieces) after.append(p);
  EXPECT_EQ(after, before);
  absl::StatusOr<Blob> decoded =
      Any::from_bytes(type_hash<Blob>(), std::string(*moved.bytes())).take<Blob>();
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->body.view(), expected_body);
}

TEST(SharedBytes, R_ENV_4_KeepBytesOnlyFlattensAndDropsTheValue) {
  const std::string body = pattern(300 << 10);
  Any a = Any::make(Blob{4, SharedBytes(body), "y"});
  const std::string before = std::string(*a.bytes());
  a.keep_bytes_only();
  EXPECT_FALSE(a.is_typed());
  EXPECT_FALSE((*a.serialized())->gathered());
  EXPECT_EQ(*a.bytes(), before);
  absl::StatusOr<Blob> back = a.take<Blob>();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->body.view(), body);
}

TEST(SharedBytes, R_MBX_4_ADecodedLargeFieldIsASliceOfTheReceivedBuffer) {
  const std::string body = pattern(64 << 10);
  auto buffer = std::make_shared<std::string>("frame-header" + *encode(StringBlob{5, body, "z"}) +
                                              "next-frame");
  const std::string_view payload = std::string_view(*buffer).substr(12, buffer->size() - 22);
  Any a = Any::from_slice(type_hash<Blob>(), buffer, payload);
  std::weak_ptr<std::string> watch = buffer;
  buffer.reset();  // the channel lets its receive buffer go; the payload keeps it
  ASSERT_FALSE(watch.expired());
  absl::StatusOr<Blob> got = a.take<Blob>();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->body.view(), body);
  EXPECT_EQ(got->tail, "z");
  const char* const base = watch.lock()->data();
  EXPECT_GE(got->body.data(), base) << "the body was copied out of the buffer";
  EXPECT_LT(got->body.data(), base + payload.size() + 12);
  a = Any();  // the envelope goes; the decoded value still holds the buffer
  ASSERT_FALSE(watch.expired());
  EXPECT_EQ(got->body.view(), body);
  got->body = SharedBytes();
  EXPECT_TRUE(watch.expired()) << "nothing else may hold the buffer";
}

TEST(SharedBytes, R_FLOW_4_SmallFieldsOfASliceAreCopiedAndDoNotHoldTheBuffer) {
  auto buffer = std::make_shared<std::string>(*encode(StringBlob{5, pattern(1000), "z"}));
  Any a = Any::from_slice(type_hash<Blob>(), buffer, *buffer);
  std::weak_ptr<std::string> watch = buffer;
  buffer.reset();
  absl::StatusOr<Blob> got = a.take<Blob>();
  ASSERT_TRUE(got.ok());
  a = Any();
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(got->body.view(), pattern(1000));
}

TEST(SharedBytes, R_FLOW_4_ALengthPastTheEndIsRefusedBeforeAnyAllocation) {
  std::string bytes = *encode(StringBlob{5, pattern(64 << 10), "z"});
  bytes.resize(bytes.size() - 100);  // truncated inside the body
  auto owner = std::make_shared<std::string>(bytes);
  Any a = Any::from_slice(type_hash<Blob>(), owner, *owner);
  absl::Status s = a.decode<Blob>();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
}

}  // namespace
}  // namespace postal::wire
