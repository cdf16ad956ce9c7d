#include "postal/wire/any.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace {

struct Small {
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};

struct Big {
  std::vector<std::string> items;
  std::string tail;
  char pad[64] = {};
  template <class A>
  void serialize(A& a) {
    a(items, tail);
  }
};

// A large field with others after it, as postal bench's Payload has (body, then two ports).
struct LargeThenSmall {
  std::string body;
  std::vector<int64_t> after;
  template <class A>
  void serialize(A& a) {
    a(body, after);
  }
};

// Counts copies and serializations to prove R-ENV-4's "typed locally, serialized at most once".
struct Counted {
  inline static int serializations = 0;
  int v = 0;
  template <class A>
  void save(A& a) const {
    ++serializations;
    a(v);
  }
  template <class A>
  void load(A& a) {
    a(v);
  }
};

// Counts live instances: an Any owns exactly one value however it is moved, inline or on the heap.
template <size_t Pad>
struct Alive {
  inline static int live = 0;
  int v = 0;
  char pad[Pad] = {};
  Alive() { ++live; }
  explicit Alive(int x) : v(x) { ++live; }
  Alive(const Alive& o) : v(o.v) { ++live; }
  Alive(Alive&& o) noexcept : v(o.v) { ++live; }
  ~Alive() { --live; }
  template <class A>
  void serialize(A& a) {
    a(v);
  }
};
using InlineAlive = Alive<8>;   // fits the 48-byte inline buffer
using HeapAlive = Alive<128>;   // does not

// Arithmetic vectors go through the archives' binary path; empty ones have a null data().
struct Numbers {
  std::vector<uint8_t> flags;
  std::vector<int64_t> times;
  template <class A>
  void serialize(A& a) {
    a(flags, times);
  }
};

}  // namespace

POSTAL_MESSAGE(Small, "test.Small");
POSTAL_MESSAGE(Numbers, "test.Numbers");
POSTAL_MESSAGE(Big, "test.Big");
POSTAL_MESSAGE(Counted, "test.Counted");
POSTAL_MESSAGE(LargeThenSmall, "test.LargeThenSmall");
POSTAL_MESSAGE(InlineAlive, "test.InlineAlive");
POSTAL_MESSAGE(HeapAlive, "test.HeapAlive");

namespace postal::wire {
namespace {

TEST(Any, R_ENV_4_TypedValueStaysTypedAndIsNotSerialized) {
  Counted::serializations = 0;
  Any a = Any::make(Counted{7});
  Any moved = std::move(a);
  ASSERT_TRUE(moved.is_typed());
  EXPECT_EQ(moved.type_hash(), type_hash<Counted>());
  EXPECT_EQ(moved.get<Counted>()->v, 7);
  EXPECT_EQ(moved.get<Small>(), nullptr);
  EXPECT_EQ(Counted::serializations, 0);
}

TEST(Any, R_ENV_4_SerializesAtMostOnce) {
  Counted::serializations = 0;
  Any a = Any::make(Counted{3});
  auto b1 = a.bytes();
  auto b2 = a.bytes();
  ASSERT_TRUE(b1.ok());
  ASSERT_TRUE(b2.ok());
  EXPECT_EQ(*b1, *b2);
  EXPECT_EQ(Counted::serializations, 1);
}

TEST(Any, R_ENV_4_BytesDecodeIntoTheRegisteredType) {
  Any a = Any::make(Big{{"x", "yy"}, "tail", {}});
  std::string bytes(*a.bytes());
  Any received = Any::from_bytes(type_hash<Big>(), bytes);
  EXPECT_FALSE(received.is_typed());
  ASSERT_TRUE(received.decode<Big>().ok());
  ASSERT_NE(received.get<Big>(), nullptr);
  EXPECT_EQ(received.get<Big>()->items, (std::vector<std::string>{"x", "yy"}));
  EXPECT_EQ(received.get<Big>()->tail, "tail");
}

// Under UBSan this failed: memcpy from / to an empty vector's null data() (a MailReply with no
// flags or lease times, the common case).
TEST(Any, EmptyAndFilledArithmeticVectorsRoundTrip) {
  for (const Numbers& n : {Numbers{}, Numbers{{1, 0, 1}, {-5, 7}}}) {
    Any a = Any::make(Numbers{n});
    Any received = Any::from_bytes(type_hash<Numbers>(), std::string(*a.bytes()));
    ASSERT_TRUE(received.decode<Numbers>().ok());
    EXPECT_EQ(received.get<Numbers>()->flags, n.flags);
    EXPECT_EQ(received.get<Numbers>()->times, n.times);
  }
}

TEST(Any, R_MBX_4_WrongTypeIsAStatusAndLeavesTheAnyUnchanged) {
  Any a = Any::from_bytes(type_hash<Small>(), std::string(*Any::make(Small{5}).bytes()));
  absl::Status s = a.decode<Big>();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("test.Small"), std::string::npos) << s;
  EXPECT_NE(s.message().find("test.Big"), std::string::npos) << s;
  ASSERT_TRUE(a.decode<Small>().ok());
  EXPECT_EQ(a.get<Small>()->n, 5);
}

TEST(Any, TruncatedBytesAreDataLossNeverAnException) {
  std::string bytes(*Any::make(Big{{"alpha", "beta"}, "gamma", {}}).bytes());
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    Any a = Any::from_bytes(type_hash<Big>(), bytes.substr(0, cut));
    absl::Status s = a.decode<Big>();
    EXPECT_FALSE(s.ok()) << "cut at " << cut;
    EXPECT_FALSE(a.is_typed());
  }
}

TEST(Any, HostileLengthPrefixIsRefusedBeforeAnyAllocation) {
  // A valid Big whose first string claims 2^40 bytes: 20-odd bytes on the wire.
  std::string bytes(*Any::make(Big{{"x"}, "t", {}}).bytes());
  // Layout: portable-binary header byte, then the vector size (8 bytes), then the first string's
  // size (8 bytes, little-endian).
  const size_t string_size_at = 1 + 8;
  ASSERT_GT(bytes.size(), string_size_at + 8);
  uint64_t huge = uint64_t{1} << 40;
  for (int i = 0; i < 8; ++i)
    bytes[string_size_at + i] = static_cast<char>((huge >> (8 * i)) & 0xff);
  Any a = Any::from_bytes(type_hash<Big>(), bytes);
  absl::Status s = a.decode<Big>();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("exceeds"), absl::string_view::npos) << s;
}

// The first byte is the byte-order mark (1 little-endian, 0 big-endian): any other value is not
// our encoding, even when the rest would decode (an empty value plus one stray byte would).
TEST(Any, ABadByteOrderMarkIsDataLoss) {
  std::string bytes(*Any::make(Big{{"x"}, "t", {}}).bytes());
  ASSERT_EQ(bytes[0], 1);
  bytes[0] = 'x';
  Any a = Any::from_bytes(type_hash<Big>(), bytes);
  absl::Status s = a.decode<Big>();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("byte-order mark"), absl::string_view::npos) << s;
}

// wire.md §9.10: a large payload serialized for the wire is held once, as its bytes.
TEST(Any, KeepBytesOnlyDropsTheValueAndTheBytesStillDecode) {
  Any a = Any::make(Big{{"one", "two"}, std::string(3 << 20, 't'), {}});
  Any untouched = Any::make(Small{1});
  untouched.keep_bytes_only();  // no bytes yet: the value stays
  EXPECT_TRUE(untouched.is_typed());
  ASSERT_TRUE(a.bytes().ok());
  const size_t bytes = a.bytes()->size();
  a.keep_bytes_only();
  EXPECT_FALSE(a.is_typed());
  EXPECT_EQ(a.get<Big>(), nullptr);
  EXPECT_EQ(a.known_size(), bytes);
  absl::StatusOr<Big> back = a.take<Big>();
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->items, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(back->tail.size(), size_t{3} << 20);
}

// A large field leaves room for the fields after it: the buffer is not doubled (and copied).
TEST(Any, ALargeFieldIsNotFollowedByADoublingOfTheBuffer) {
  absl::StatusOr<std::string> encoded =
      encode(LargeThenSmall{std::string(8 << 20, 'b'), {1, 2, 3}});
  ASSERT_TRUE(encoded.ok());
  EXPECT_LT(encoded->capacity(), encoded->size() + (1 << 20))
      << "capacity " << encoded->capacity() << " for " << encoded->size() << " bytes";
}

TEST(Any, LargeValuesLiveOnTheHeapAndMove) {
  Any a = Any::make(Big{{std::string(100, 'z')}, "t", {}});
  Any b = std::move(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b.get<Big>()->items[0].size(), 100u);
}

TEST(TypeRegistry, HashIsStableFnv1aOfTheName) {
  // Pinned: a change here breaks every peer speaking the wire format.
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(type_hash<Small>(), fnv1a64("test.Small"));
  EXPECT_EQ(TypeRegistry::global().name_of(type_hash<Small>()), "test.Small");
}

template <class T>
void OwnsExactlyOneValue() {
  ASSERT_EQ(T::live, 0);
  {
    Any a = Any::make(T(7));
    EXPECT_EQ(T::live, 1);
    Any b = std::move(a);
    EXPECT_EQ(T::live, 1);
    EXPECT_EQ(a.get<T>(), nullptr);
    ASSERT_NE(b.get<T>(), nullptr);
    EXPECT_EQ(b.get<T>()->v, 7);
    Any c = Any::make(T(8));
    c = std::move(b);  // c's own value is destroyed, b's moves in
    EXPECT_EQ(T::live, 1);
    EXPECT_EQ(c.get<T>()->v, 7);
    ASSERT_TRUE(c.bytes().ok());
    c.keep_bytes_only();  // the value goes, the bytes stay
    EXPECT_EQ(T::live, 0);
    absl::StatusOr<T> back = c.take<T>();
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->v, 7);
  }
  EXPECT_EQ(T::live, 0);
}

TEST(Any, AnInlineValueIsOwnedOnceThroughMovesAndResets) { OwnsExactlyOneValue<InlineAlive>(); }
TEST(Any, AHeapValueIsOwnedOnceThroughMovesAndResets) { OwnsExactlyOneValue<HeapAlive>(); }

}  // namespace
}  // namespace postal::wire
