// Wire v2's binary envelope and session dictionary (routing/src/envelope_codec.h; docs/wire.md
// §6, §7, §14): round trips, refs instead of repeated addresses, LRU redefinition kept in step on
// both ends, a failed envelope leaving the dictionary as it was, and stream errors for every
// malformed body without allocating past the frame (R-FLOW-4).
#include "envelope_codec.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "postal/wire/any.h"
#include "support/must.h"

namespace {

struct CodecMsg {
  int64_t n = 0;
  std::string pad;
  template <class A>
  void serialize(A& a) {
    a(n, pad);
  }
};

// docs/wire.md §17's example type.
struct Blob {
  std::string bytes;
  template <class A>
  void serialize(A& a) {
    a(bytes);
  }
};

}  // namespace

POSTAL_MESSAGE(CodecMsg, "test.routing.codec.Msg");
POSTAL_MESSAGE(Blob, "example.Blob");

namespace postal::routing::internal::v2 {
namespace {

using runtime::ActorAddr;
using runtime::DeliveryFailure;
using runtime::EnvelopePtr;
using runtime::MessageEnvelope;
using runtime::Port;
using runtime::PortAddr;
using test_support::must;

ActorAddr actor(const std::string& text) { return must(ActorAddr::parse(text)); }

EnvelopePtr envelope(int64_t n, const std::string& from = "alice.alpha@tcp://127.0.0.1:4000",
                     size_t pad = 48) {
  return MessageEnvelope::make(actor(from),
                               actor("bob.beta@edge.ipc:///tmp/edge.sock").port(Port::ephemeral(3)),
                               wire::Any::make(CodecMsg{n, std::string(pad, 'x')}));
}

std::string encode(EnvelopeEncoder& enc, uint64_t seq, MessageEnvelope& env) {
  std::string out;
  absl::Status s = enc.encode(seq, env, out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(EnvelopeCodec, R_ENV_1_EveryFieldRoundTrips) {
  EnvelopePtr env = envelope(7);
  env->set_ttl(9);
  env->set_return_undeliverable(false);
  env->set_next_hop(actor("bob.beta@tcp://127.0.0.1:5000").port(Port::ephemeral(3)));
  env->headers().set_value("trace-id", std::string("abc"));
  env->headers().set_value("count", uint64_t{42});
  env->headers().set_value("delta", int64_t{-5});
  env->headers().set_value("ratio", 0.25);
  env->headers().set_value("flag", true);
  env->headers().set_value(std::string(100, 'h'), std::string("a long name travels inline"));
  DeliveryFailure refused = DeliveryFailure::transport_failure(
      actor("carol.gamma@tcp://127.0.0.1:6000").port(Port::handler(99)).to_string(),
      runtime::TransportReason::kDialFailed, "connection refused (ECONNREFUSED)");
  refused.os_errno = 111;
  env->add_failure(std::move(refused));
  env->add_failure(DeliveryFailure::invalid_reference(
      "carol.gamma@tcp://127.0.0.1:6000", runtime::InvalidReason::kActorStopped, "stopped"));
  env->add_failure(DeliveryFailure::expired("not an address"));
  env->add_failure(DeliveryFailure::oversized_frame("bob.beta@tcp://127.0.0.1:5000", 10, 5));
  DeliveryFailure unacked = DeliveryFailure::transport_failure(
      "bob.beta@tcp://127.0.0.1:5000", runtime::TransportReason::kAckTimedOut, "no ack");
  unacked.maybe_delivered = true;  // §6.5: `flags` bit 0 of a transport failure
  env->add_failure(std::move(unacked));

  EnvelopeEncoder enc;
  EnvelopeDecoder dec;
  const std::string body = encode(enc, 17, *env);
  uint64_t seq = 0;
  absl::StatusOr<EnvelopePtr> got = dec.decode(body, seq);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(seq, 17u);
  EXPECT_EQ((*got)->sender(), env->sender());
  EXPECT_EQ((*got)->dest(), env->dest());
  EXPECT_EQ((*got)->next_hop(), env->next_hop());
  EXPECT_EQ((*got)->ttl(), 9);
  EXPECT_FALSE((*got)->return_undeliverable());
  ASSERT_EQ((*got)->headers().size(), env->headers().size());
  for (const auto& [name, value] : env->headers()) {
    const wire::HeaderValue* v = (*got)->headers().find(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(*v, value) << name;
  }
  ASSERT_EQ((*got)->delivery_failures().size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    const DeliveryFailure& a = env->delivery_failures()[i];
    const DeliveryFailure& b = (*got)->delivery_failures()[i];
    EXPECT_EQ(b.kind, a.kind) << i;
    EXPECT_EQ(b.invalid, a.invalid) << i;
    EXPECT_EQ(b.transport, a.transport) << i;
    EXPECT_EQ(b.target, a.target) << i;
    EXPECT_EQ(b.detail, a.detail) << i;
    EXPECT_EQ(b.len, a.len) << i;
    EXPECT_EQ(b.max, a.max) << i;
    EXPECT_EQ(b.os_errno, a.os_errno) << i;
    EXPECT_EQ(b.maybe_delivered, a.maybe_delivered) << i;
  }
  absl::StatusOr<CodecMsg> msg = (*got)->data().take<CodecMsg>();
  ASSERT_TRUE(msg.ok()) << msg.status();
  EXPECT_EQ(msg->n, 7);
  EXPECT_EQ(msg->pad, std::string(48, 'x'));
}

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

// A DATA frame: length prefix, kind 4, body.
std::string data_frame_v2(const std::string& body) {
  std::string frame;
  const uint32_t length = static_cast<uint32_t>(body.size() + 1);
  frame.append(reinterpret_cast<const char*>(&length), 4);
  frame.push_back(4);
  return frame + body;
}

// docs/wire.md §17, byte for byte: the spec's worked example is what the encoder writes.
TEST(EnvelopeCodec, R_ENV_4_DataFrameCarriesTheEnvelopeSerializedOnce) {
  EnvelopePtr env = envelope(5);
  EnvelopeEncoder enc;
  const std::string body = encode(enc, 77, *env);
  EXPECT_TRUE(env->data().is_typed());  // the sender's copy keeps its typed value
  // The payload is the Any's cached bytes, at the end of the body, untouched.
  const std::string_view payload = must(env->data().bytes());
  ASSERT_GE(body.size(), payload.size());
  EXPECT_EQ(std::string_view(body).substr(body.size() - payload.size()), payload);
  // Without the payload (written from the envelope as a slice), the rest is the same bytes.
  EnvelopeEncoder sliced;
  std::string head;
  ASSERT_TRUE(sliced.encode(77, *env, head, UINT64_MAX, /*with_payload=*/false).ok());
  EXPECT_EQ(head + std::string(payload), body);

  EnvelopeDecoder dec;
  uint64_t seq = 0;
  absl::StatusOr<EnvelopePtr> back = dec.decode(body, seq);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(seq, 77u);
  EXPECT_FALSE((*back)->data().is_typed());  // bytes until a port of the type decodes them
  absl::StatusOr<CodecMsg> msg = (*back)->data().take<CodecMsg>();
  ASSERT_TRUE(msg.ok()) << msg.status();
  EXPECT_EQ(msg->n, 5);
}

TEST(EnvelopeCodec, R_FLOW_4_OnlyAPayloadOver64KiBStaysASliceOfTheReceiveBlock) {
  for (const size_t pad : {size_t{60} << 10, size_t{70} << 10}) {
    EnvelopePtr env = envelope(6, "alice.alpha@tcp://127.0.0.1:4000", pad);
    EnvelopeEncoder enc;
    auto block = std::make_shared<const std::string>(encode(enc, 1, *env));
    EnvelopeDecoder dec;
    uint64_t seq = 0;
    absl::StatusOr<EnvelopePtr> back = dec.decode(*block, seq, nullptr, 0, block);
    ASSERT_TRUE(back.ok()) << back.status();
    const std::string_view payload = must((*back)->data().bytes());
    const bool in_block =
        payload.data() >= block->data() && payload.data() < block->data() + block->size();
    // §14.3 rule 49: a slice pins its block; only a large payload may, at most 4× its size.
    EXPECT_EQ(in_block, payload.size() > EnvelopeDecoder::kSliceOver) << pad;
    const std::weak_ptr<const std::string> watch = block;
    block.reset();
    EXPECT_EQ(watch.expired(), payload.size() <= EnvelopeDecoder::kSliceOver) << pad;
    absl::StatusOr<CodecMsg> msg = (*back)->data().take<CodecMsg>();
    ASSERT_TRUE(msg.ok()) << msg.status();
    EXPECT_EQ(msg->pad, std::string(pad, 'x'));
  }
}

TEST(EnvelopeCodec, R_CHAN_3_ABodyOverTheLimitFailsAndLeavesTheDictionaryAsItWas) {
  EnvelopeEncoder enc;
  std::string out;
  EnvelopePtr big = envelope(1, "alice.alpha@tcp://127.0.0.1:4000", 5000);
  absl::Status s = enc.encode(0, *big, out, 4095);
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  EXPECT_GT(enc.last_body_bytes(), 5000u);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(enc.entries(), 0u);
}

TEST(EnvelopeCodec, R_FAIL_1_TheOsErrorCrossesTheWire) {
  EnvelopePtr env = envelope(3);
  DeliveryFailure f = DeliveryFailure::transport_failure(
      "bob.beta@tcp://127.0.0.1:5000", runtime::TransportReason::kDialFailed, "refused");
  f.os_errno = ECONNREFUSED;
  env->add_failure(std::move(f));
  EnvelopeEncoder enc;
  EnvelopeDecoder dec;
  uint64_t seq = 0;
  absl::StatusOr<EnvelopePtr> got = dec.decode(encode(enc, 0, *env), seq);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ((*got)->delivery_failures().size(), 1u);
  EXPECT_EQ((*got)->delivery_failures()[0].os_errno, ECONNREFUSED);
}

// R-FLOW-1, R-FLOW-2: an Overloaded failure keeps its bound, the queue's depth and the maximum
// across the wire (§6.5: reason 7, the bound in `flags`), and renders them.
TEST(EnvelopeCodec, R_FLOW_2_OverloadedCrossesTheWireWithItsStructuredFields) {
  EnvelopePtr env = envelope(4);
  env->add_failure(DeliveryFailure::overloaded("bob.beta@tcp://127.0.0.1:5000",
                                               runtime::OverloadBound::kMailboxBytes, 4096,
                                               4000, "the mailbox is full"));
  EnvelopeEncoder enc;
  EnvelopeDecoder dec;
  uint64_t seq = 0;
  absl::StatusOr<EnvelopePtr> got = dec.decode(encode(enc, 0, *env), seq);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ((*got)->delivery_failures().size(), 1u);
  const DeliveryFailure& f = (*got)->delivery_failures()[0];
  EXPECT_EQ(f, env->delivery_failures()[0]);
  EXPECT_EQ(f.transport, runtime::TransportReason::kOverloaded);
  EXPECT_EQ(f.bound, runtime::OverloadBound::kMailboxBytes);
  EXPECT_EQ(f.len, 4096u);
  EXPECT_EQ(f.max, 4000u);
  EXPECT_NE(f.to_string().find("overloaded (mailbox bytes: 4096 of max 4000)"), std::string::npos)
      << f.to_string();
  EXPECT_EQ(f.to_status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(EnvelopeCodec, TheWorkedExampleOfTheSpecByteForByte) {
  std::string letters;
  for (char c = 0x41; c <= 0x78; ++c) letters.push_back(c);
  ASSERT_EQ(wire::type_hash<Blob>(), 0x934f14b78c879cc2u);
  auto blob = [&] {
    auto env = MessageEnvelope::make(
        actor("pinger.alpha@tcp://127.0.0.1:4001"),
        actor("ponger.beta@tcp://127.0.0.1:4002").port(Port::handler(wire::type_hash<Blob>())),
        wire::Any::make(Blob{letters}));
    env->set_ttl(63);
    return env;
  };
  EnvelopeEncoder enc;
  const std::string first = data_frame_v2(encode(enc, 0, *blob()));
  const std::string second = data_frame_v2(encode(enc, 1, *blob()));
  EXPECT_EQ(hex(first),
            "c500000004000000000000000001003f010000000001000000c29c878cb7144f93c29c878cb7144f934100"
            "00000000000002000000000000000000000001210070696e6765722e616c706861407463703a2f2f3132"
            "372e302e302e313a3430303101000000012000706f6e6765722e62657461407463703a2f2f3132372e30"
            "2e302e313a34303032" "01" "3800000000000000"
            + hex(letters));
  EXPECT_EQ(first.size(), 201u);
  EXPECT_EQ(hex(second),
            "760000000401000000000000000100" "3f01" "0000000001000000"
            "c29c878cb7144f93c29c878cb7144f934100000000000000" "0000000000000000"
            "01" "3800000000000000" + hex(letters));
  EXPECT_EQ(second.size(), 122u);
  // Version 1 carried the same message in 232 bytes (§17's comparison, measured with the v1
  // codec before it was removed).
}

TEST(EnvelopeCodec, ALaterFrameRefersToAddressesItDefinedBefore) {
  EnvelopeEncoder enc;
  EnvelopeDecoder dec;
  EnvelopePtr first = envelope(1, "alice.alpha@tcp://127.0.0.1:4000", 64);
  EnvelopePtr second = envelope(2, "alice.alpha@tcp://127.0.0.1:4000", 64);
  const std::string a = encode(enc, 0, *first);
  const std::string b = encode(enc, 1, *second);
  EXPECT_LT(b.size(), a.size()) << "the second frame carries no DEFINE";
  // With refs only, the frame is the fixed part and the payload: no address text.
  EXPECT_EQ(b.size(), kFixedBytes + must(second->data().bytes()).size());
  uint64_t seq = 0;
  ASSERT_TRUE(dec.decode(a, seq).ok());
  absl::StatusOr<EnvelopePtr> got = dec.decode(b, seq);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)->sender(), second->sender());
  EXPECT_EQ(dec.entries(), 2u);
}

TEST(EnvelopeCodec, AFullDictionaryRedefinesTheLeastRecentlyUsedIdInStepOnBothEnds) {
  const DictLimits small{3, 1 << 20};
  EnvelopeEncoder enc(small);
  EnvelopeDecoder dec(small);
  for (int i = 0; i < 50; ++i) {
    const std::string from = absl::StrCat("a", i % 7, ".alpha@tcp://127.0.0.1:4000");
    EnvelopePtr env = envelope(i, from);
    const std::string body = encode(enc, static_cast<uint64_t>(i), *env);
    uint64_t seq = 0;
    absl::StatusOr<EnvelopePtr> got = dec.decode(body, seq);
    ASSERT_TRUE(got.ok()) << i << ": " << got.status();
    EXPECT_EQ((*got)->sender().to_string(), from) << i;
    EXPECT_EQ((*got)->dest(), env->dest()) << i;
    EXPECT_LE(enc.entries(), 3u);
    EXPECT_EQ(dec.entries(), enc.entries());
  }
}

TEST(EnvelopeCodec, AnEnvelopeThatFailsLeavesTheDictionaryAsItWas) {
  // Three ids at most: an envelope that needs four distinct addresses in one frame cannot be
  // encoded (no id it does not use itself is free to redefine), after it took three refs.
  const DictLimits small{3, 1 << 20};
  EnvelopeEncoder enc(small);
  EnvelopeDecoder dec(small);
  uint64_t seq = 0;
  ASSERT_TRUE(dec.decode(encode(enc, 0, *envelope(0)), seq).ok());
  const size_t entries = enc.entries();
  const uint64_t bytes = enc.bytes();
  EnvelopePtr bad = envelope(1, "zed.zeta@tcp://127.0.0.1:9");
  bad->add_failure(DeliveryFailure::expired("one.one@tcp://127.0.0.1:1"));
  bad->add_failure(DeliveryFailure::expired("two.two@tcp://127.0.0.1:2"));
  std::string out;
  absl::Status s = enc.encode(1, *bad, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(enc.entries(), entries);
  EXPECT_EQ(enc.bytes(), bytes);
  // The two ends are still in step: the next frames decode.
  for (int i = 2; i < 6; ++i) {
    absl::StatusOr<EnvelopePtr> next =
        dec.decode(encode(enc, 1, *envelope(i, absl::StrCat("n", i, ".alpha@tcp://127.0.0.1:4"))), seq);
    ASSERT_TRUE(next.ok()) << next.status() << " (the ends fell out of step)";
  }
}

TEST(EnvelopeCodec, AnAddressOverTheWireBoundFailsTheEnvelopeAlone) {
  EnvelopeEncoder enc;
  std::string via;
  for (int i = 0; i < 450; ++i) absl::StrAppend(&via, "gateway", i, "x.");
  EnvelopePtr env = MessageEnvelope::make(actor(absl::StrCat("a.p@", via, "tcp://127.0.0.1:1")),
                                          envelope(0)->dest(), wire::Any::make(CodecMsg{}));
  std::string out;
  absl::Status s = enc.encode(0, *env, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(enc.entries(), 0u);
}

// Every malformed body is a stream error, found without allocating past the frame.
TEST(EnvelopeCodec, R_FLOW_4_MalformedBodiesAreStreamErrors) {
  EnvelopeEncoder enc;
  const std::string good = encode(enc, 0, *envelope(0));
  auto decode = [](std::string body) {
    EnvelopeDecoder dec;
    uint64_t seq = 0;
    return dec.decode(body, seq).status();
  };
  ASSERT_TRUE(decode(good).ok());
  auto patched = [&](size_t offset, const void* v, size_t n) {
    std::string b = good;
    std::memcpy(b.data() + offset, v, n);
    return b;
  };
  const uint16_t huge16 = 0xFFFF;
  const uint16_t unknown_flag = 1 << 9;
  const uint32_t undefined_ref = 77;
  const uint64_t wrong_len = 3;
  const uint8_t bad_port_kind = 9;
  struct Case {
    const char* what;
    std::string body;
  };
  for (const Case& c : {
           Case{"empty", ""},
           Case{"truncated fixed part", good.substr(0, 30)},
           Case{"DEFINE count past the frame", patched(44, &huge16, 2)},
           Case{"header count past the frame", patched(46, &huge16, 2)},
           Case{"failure count past the frame", patched(48, &huge16, 2)},
           Case{"unknown flags", patched(8, &unknown_flag, 2)},
           Case{"undefined sender ref", patched(12, &undefined_ref, 4)},
           Case{"payload length", patched(36, &wrong_len, 8)},
           Case{"port kind", patched(11, &bad_port_kind, 1)},
           Case{"trailing byte", good + "z"},
           Case{"cut payload", good.substr(0, good.size() - 1)},
       }) {
    absl::Status s = decode(c.body);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.what << ": " << s;
  }
}

TEST(EnvelopeCodec, R_FLOW_4_DefinesPastTheAnnouncedBoundsAreStreamErrors) {
  EnvelopeEncoder roomy;
  const std::string body = encode(roomy, 0, *envelope(0));  // defines 2 ACTOR entries
  uint64_t seq = 0;
  EnvelopeDecoder one_entry(DictLimits{1, 1 << 20});
  EXPECT_EQ(one_entry.decode(body, seq).status().code(), absl::StatusCode::kInvalidArgument);
  EnvelopeDecoder few_bytes(DictLimits{4096, 100});
  EXPECT_EQ(few_bytes.decode(body, seq).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace postal::routing::internal::v2
