#include "postal/wire/headers.h"

#include "gtest/gtest.h"
#include "postal/wire/codec.h"

namespace postal::wire {
namespace {

inline constexpr HeaderKey<uint64_t> kAttempt{"mbx-attempt"};
inline constexpr HeaderKey<std::string> kTopic{"topic"};
inline constexpr HeaderKey<std::string> kAttemptAsString{"mbx-attempt"};

TEST(Headers, TypedGetAndSet) {
  Headers h;
  EXPECT_FALSE(h.get(kAttempt).has_value());
  h.set(kAttempt, uint64_t{2});
  h.set(kTopic, std::string("jobs"));
  EXPECT_EQ(h.get(kAttempt), 2u);
  EXPECT_EQ(h.get(kTopic), "jobs");
  h.set(kAttempt, uint64_t{3});
  EXPECT_EQ(h.get(kAttempt), 3u);
  EXPECT_EQ(h.size(), 2u);
}

TEST(Headers, ReadingThroughAKeyOfAnotherTypeYieldsNothing) {
  Headers h;
  h.set(kAttempt, uint64_t{2});
  EXPECT_FALSE(h.get(kAttemptAsString).has_value());
}

TEST(Headers, ErasePrefixRemovesOnlyMatching) {
  Headers h;
  h.set(kAttempt, uint64_t{1});
  h.set(HeaderKey<bool>{"mbx-dead-letter-terminal"}, true);
  h.set(kTopic, std::string("t"));
  EXPECT_EQ(h.erase_prefix("mbx-"), 2u);
  EXPECT_TRUE(h.contains("topic"));
  EXPECT_EQ(h.size(), 1u);
}

TEST(Headers, RoundTripsThroughCereal) {
  Headers h;
  h.set(kAttempt, uint64_t{9});
  h.set(HeaderKey<double>{"ratio"}, 0.5);
  h.set(HeaderKey<int64_t>{"delta"}, int64_t{-4});
  auto bytes = encode(h);
  ASSERT_TRUE(bytes.ok());
  auto back = decode<Headers>(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, h);
}

// Headers allocate on the first `set` (an envelope without headers holds one null pointer), so
// an empty set of headers must behave like any other: compare, copy, erase, round-trip.
TEST(Headers, EmptyHeadersCompareCopyEraseAndRoundTrip) {
  Headers empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.begin(), empty.end());
  EXPECT_FALSE(empty.erase("topic"));
  EXPECT_EQ(empty.erase_prefix("mbx-"), 0u);
  EXPECT_EQ(empty, Headers{});
  Headers copy = empty;
  EXPECT_TRUE(copy.empty());
  auto bytes = encode(empty);
  ASSERT_TRUE(bytes.ok());
  auto back = decode<Headers>(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->empty());
  Headers one;
  one.set(kTopic, std::string("t"));
  EXPECT_NE(one, empty);
  EXPECT_TRUE(one.erase("topic"));
  EXPECT_EQ(one, empty);  // emptied, not null: still equal
}

TEST(Headers, ACopyIsIndependentOfItsSource) {
  Headers a;
  a.set(kAttempt, uint64_t{1});
  Headers b = a;
  b.set(kAttempt, uint64_t{2});
  b.set(kTopic, std::string("t"));
  EXPECT_EQ(a.get(kAttempt), 1u);
  EXPECT_EQ(a.size(), 1u);
  a = b;
  b.erase_prefix("mbx-");
  EXPECT_EQ(a.get(kAttempt), 2u);
  EXPECT_EQ(a.size(), 2u);
  Headers moved = std::move(a);
  EXPECT_EQ(moved.get(kTopic), "t");
}

}  // namespace
}  // namespace postal::wire
