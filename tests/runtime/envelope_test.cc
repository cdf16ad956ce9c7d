// Tests for envelopes (R-ENV-1…4) and delivery failures (R-FAIL-1…4): message_envelope.h,
// delivery_failure.h, mailbox_sender.h and the proc's return path.
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "postal/runtime/client.h"
#include "postal/runtime/delivery_failure.h"
#include "postal/runtime/mailbox_sender.h"
#include "postal/runtime/message_envelope.h"
#include "postal/runtime/port.h"
#include "postal/runtime/proc.h"
#include "postal/wire/codec.h"
#include "support/must.h"
#include "support/recording_senders.h"

namespace {

struct EnvPing {
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};

// Counts serializations to prove R-ENV-4: typed in the process, serialized at most once.
struct EnvCounted {
  inline static int saves = 0;
  std::vector<int> payload;
  template <class A>
  void save(A& a) const {
    ++saves;
    a(payload);
  }
  template <class A>
  void load(A& a) {
    a(payload);
  }
};

}  // namespace

POSTAL_MESSAGE(EnvPing, "test.runtime.envelope.Ping");
POSTAL_MESSAGE(EnvCounted, "test.runtime.envelope.Counted");

namespace postal::runtime {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(10);

using test_support::must;

Uid uid(std::string_view name) { return Uid::singleton(must(Label::parse(name))); }

using test_support::RecordingReturn;

using test_support::RecordingSender;

// A sender that is its own next hop: every hop posts again, so only the TTL ends the loop.
class LoopSender final : public MailboxSender {
 public:
  void post_unchecked(EnvelopePtr env, ReturnHandle& ret) override {
    ++hops;
    post(std::move(env), ret);
  }
  int hops = 0;
};

struct Addrs {
  ActorAddr sender;
  PortAddr dest;
};

Addrs addrs(Proc& proc) {
  return {proc.actor_addr(uid("sender")),
          proc.actor_addr(uid("dest")).port(Port::handler(wire::type_hash<EnvPing>()))};
}

EnvelopePtr ping(const Addrs& a, int n = 1, uint8_t ttl = kDefaultTtl) {
  return MessageEnvelope::make(a.sender, a.dest, wire::Any::make(EnvPing{n}), ttl);
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xe  ? 3
                 : (c >> 3) == 0x1e ? 4
                                    : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    }
    i += len;
  }
  return true;
}

// --- R-ENV-1: dest and next_hop ------------------------------------------------------------------

TEST(Envelope, R_ENV_1_NextHopDefaultsToDest) {
  Proc proc(ProcOptions::deterministic());
  Addrs a = addrs(proc);
  EnvelopePtr env = ping(a);
  EXPECT_EQ(env->dest(), a.dest);
  EXPECT_EQ(env->next_hop(), a.dest);
  EXPECT_FALSE(env->has_explicit_next_hop());
}

TEST(Envelope, R_ENV_1_NextHopEqualToDestIsStoredEmpty) {
  Proc proc(ProcOptions::deterministic());
  Addrs a = addrs(proc);
  EnvelopePtr env = ping(a);
  const PortAddr hop = proc.actor_addr(uid("gateway")).port(Port::ephemeral(3));

  env->set_next_hop(hop);
  EXPECT_TRUE(env->has_explicit_next_hop());
  EXPECT_EQ(env->next_hop(), hop);
  EXPECT_EQ(env->dest(), a.dest) << "setting next_hop must not change dest";

  env->set_next_hop(a.dest);
  EXPECT_FALSE(env->has_explicit_next_hop()) << "a next_hop equal to dest is stored empty";
  EXPECT_EQ(env->next_hop(), a.dest);
  EXPECT_EQ(env->dest(), a.dest);
}

TEST(Envelope, R_ENV_1_SerializationKeepsDestAndNextHop) {
  Proc proc(ProcOptions::deterministic());
  Addrs a = addrs(proc);
  EnvelopePtr env = ping(a, 42, 9);
  const PortAddr hop = proc.actor_addr(uid("gateway")).port(Port::ephemeral(1));
  env->set_next_hop(hop);
  env->set_return_undeliverable(false);
  env->add_failure(DeliveryFailure::expired("x"));

  std::string bytes = must(wire::encode(*env));
  MessageEnvelope back;
  ASSERT_TRUE(wire::decode_into(bytes, back).ok());
  EXPECT_EQ(back.sender(), a.sender);
  EXPECT_EQ(back.dest(), a.dest);
  EXPECT_EQ(back.next_hop(), hop);
  EXPECT_EQ(back.ttl(), 9);
  EXPECT_FALSE(back.return_undeliverable());
  ASSERT_EQ(back.delivery_failures().size(), 1u);
  EXPECT_EQ(back.delivery_failures()[0], DeliveryFailure::expired("x"));
  EXPECT_EQ(must(back.data().take<EnvPing>()).n, 42);

  // An empty next_hop stays empty across the wire.
  EnvelopePtr plain = ping(a);
  MessageEnvelope plain_back;
  ASSERT_TRUE(wire::decode_into(must(wire::encode(*plain)), plain_back).ok());
  EXPECT_FALSE(plain_back.has_explicit_next_hop());
  EXPECT_EQ(plain_back.next_hop(), a.dest);
}

TEST(Envelope, R_ENV_1_DestIsUnchangedByDelivery) {
  Proc proc(ProcOptions::deterministic());
  auto client = must(Client::attach(proc, "alice"));
  auto [handle, receiver] = open_port<EnvPing>(*client);
  PortRef<EnvPing> ref = handle.bind();
  ref.send(*client, EnvPing{5});
  EnvelopePtr got = must(receiver.recv_envelope(kDeadline));
  EXPECT_EQ(got->dest(), ref.addr());
  EXPECT_EQ(got->next_hop(), ref.addr());
  EXPECT_FALSE(got->has_explicit_next_hop());
  EXPECT_EQ(got->sender(), client->self_addr());
}

// --- R-ENV-2: defaults ---------------------------------------------------------------------------

TEST(Envelope, R_ENV_2_NewEnvelopeHasTtl64AndReturnsUndeliverable) {
  Proc proc(ProcOptions::deterministic());
  EnvelopePtr env =
      MessageEnvelope::make(addrs(proc).sender, addrs(proc).dest, wire::Any::make(EnvPing{1}));
  EXPECT_EQ(kDefaultTtl, 64);
  EXPECT_EQ(env->ttl(), 64);
  EXPECT_TRUE(env->return_undeliverable());
  EXPECT_TRUE(env->delivery_failures().empty());
  EXPECT_EQ(env->root_failure(), nullptr);

  MessageEnvelope blank;
  EXPECT_EQ(blank.ttl(), 64);
  EXPECT_TRUE(blank.return_undeliverable());
  EXPECT_EQ(proc.default_ttl(), 64);
}

TEST(Envelope, R_ENV_2_ProcDefaultTtlAppliesToSends) {
  ProcOptions options = ProcOptions::deterministic();
  options.default_ttl = 7;
  Proc proc(options);
  EXPECT_EQ(proc.default_ttl(), 7);
  auto client = must(Client::attach(proc, "alice"));
  auto [handle, receiver] = open_port<EnvPing>(*client);

  handle.bind().send(*client, EnvPing{1});  // PortRef, resolved mailbox (fast path)
  EnvelopePtr got = must(receiver.recv_envelope(kDeadline));
  EXPECT_EQ(got->ttl(), 6) << "sent with the proc's ttl 7, one post decrements it";
  EXPECT_TRUE(got->return_undeliverable());

  handle.send(EnvPing{2});  // PortHandle
  EXPECT_EQ(must(receiver.recv_envelope(kDeadline))->ttl(), 6);

  // A PortRef that came over the wire has no resolved mailbox: the routed path, same TTL.
  auto remote = must(wire::decode<PortRef<EnvPing>>(must(wire::encode(handle.bind()))));
  remote.send(*client, EnvPing{3});
  EXPECT_EQ(must(receiver.recv_envelope(kDeadline))->ttl(), 6);
}

// --- R-ENV-3: the TTL rule -----------------------------------------------------------------------

TEST(Envelope, R_ENV_3_PostAtTtlZeroReturnsExpiredToSender) {
  Proc proc(ProcOptions::deterministic());
  Addrs a = addrs(proc);
  RecordingSender sender;
  RecordingReturn ret;
  sender.post(ping(a, 1, /*ttl=*/0), ret);

  EXPECT_TRUE(sender.got.empty()) << "an expired envelope must not reach post_unchecked";
  ASSERT_EQ(ret.returned.size(), 1u);
  EXPECT_TRUE(ret.dropped.empty());
  const DeliveryFailure* root = ret.returned[0]->root_failure();
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->kind, FailureKind::kExpired);
  EXPECT_EQ(root->target, a.dest.to_string());
  EXPECT_EQ(ret.returned[0]->dest(), a.dest);
}

TEST(Envelope, R_ENV_3_PostDecrementsTtl) {
  Proc proc(ProcOptions::deterministic());
  Addrs a = addrs(proc);
  RecordingSender sender;
  RecordingReturn ret;
  sender.post(ping(a, 1, 5), ret);
  sender.post(ping(a, 2, 1), ret);
  ASSERT_EQ(sender.got.size(), 2u);
  EXPECT_EQ(sender.got[0]->ttl(), 4);
  EXPECT_EQ(sender.got[1]->ttl(), 0);
  EXPECT_TRUE(ret.returned.empty());
}

TEST(Envelope, R_ENV_3_PostUncheckedNeverTouchesTtl) {
  Proc proc(ProcOptions::deterministic());
  Addrs a = addrs(proc);
  RecordingSender sender;
  RecordingReturn ret;
  sender.post_unchecked(ping(a, 1, 0), ret);
  sender.post_unchecked(ping(a, 2, 5), ret);
  ASSERT_EQ(sender.got.size(), 2u);
  EXPECT_EQ(sender.got[0]->ttl(), 0) << "post_unchecked is mechanism only: ttl 0 still moves";
  EXPECT_EQ(sender.got[1]->ttl(), 5);
  EXPECT_TRUE(ret.returned.empty());

  // The same holds for a real mailbox: post_unchecked delivers a ttl-0 envelope as is.
  auto client = must(Client::attach(proc, "alice"));
  auto [handle, receiver] = open_port<EnvPing>(*client);
  PortAddr port = handle.bind().addr();
  client->mailbox()->post_unchecked(
      MessageEnvelope::make(a.sender, port, wire::Any::make(EnvPing{3}), 0), proc);
  EXPECT_EQ(must(receiver.recv_envelope(kDeadline))->ttl(), 0);
}

TEST(Envelope, R_ENV_3_ForwardingLoopEndsWhenTtlRunsOut) {
  Proc proc(ProcOptions::deterministic());
  Addrs a = addrs(proc);
  LoopSender loop;
  RecordingReturn ret;
  loop.post(ping(a, 1, 3), ret);
  EXPECT_EQ(loop.hops, 3) << "ttl 3 allows exactly three hops";
  ASSERT_EQ(ret.returned.size(), 1u);
  EXPECT_EQ(ret.returned[0]->root_failure()->kind, FailureKind::kExpired);
  EXPECT_EQ(ret.returned[0]->ttl(), 0);
}

TEST(Envelope, R_ENV_3_ProcSendWithTtlZeroComesBackExpired) {
  Proc proc(ProcOptions::deterministic());
  auto client = must(Client::attach(proc, "alice"));
  auto [handle, receiver] = open_port<EnvPing>(*client);
  const PortAddr port = handle.bind().addr();

  // With the resolved mailbox (the proc's local fast path) and without it (the routed path).
  for (Mailbox* local : {client->mailbox().get(), static_cast<Mailbox*>(nullptr)}) {
    proc.send(MessageEnvelope::make(client->self_addr(), port, wire::Any::make(EnvPing{1}), 0),
              local);
    EXPECT_EQ(receiver.recv_envelope(absl::ZeroDuration()).status().code(),
              absl::StatusCode::kDeadlineExceeded);
    EnvelopePtr back = must(client->next_undeliverable(kDeadline));
    ASSERT_NE(back->root_failure(), nullptr);
    EXPECT_EQ(back->root_failure()->kind, FailureKind::kExpired);
    EXPECT_EQ(back->root_failure()->target, port.to_string());
  }
  EXPECT_EQ(proc.stats().expired, 2u);

  // ttl 1 is still deliverable: the one post takes it to 0.
  proc.send(MessageEnvelope::make(client->self_addr(), port, wire::Any::make(EnvPing{2}), 1),
            client->mailbox().get());
  EXPECT_EQ(must(receiver.recv_envelope(kDeadline))->ttl(), 0);
}

// --- R-ENV-4: typed locally, serialized at most once ---------------------------------------------

TEST(Envelope, R_ENV_4_LocalSendDeliversTheSameTypedValueWithoutSerializing) {
  EnvCounted::saves = 0;
  Proc proc(ProcOptions::deterministic());
  auto client = must(Client::attach(proc, "alice"));
  auto [handle, receiver] = open_port<EnvCounted>(*client);

  EnvCounted first{std::vector<int>(1000, 7)};
  const int* first_buffer = first.payload.data();
  handle.send(std::move(first));
  EnvelopePtr got = must(receiver.recv_envelope(kDeadline));
  EXPECT_TRUE(got->data().is_typed());
  EXPECT_EQ(got->data().type_hash(), wire::fnv1a64("test.runtime.envelope.Counted"));
  ASSERT_NE(got->data().get<EnvCounted>(), nullptr);
  EXPECT_EQ(got->data().get<EnvCounted>()->payload.data(), first_buffer)
      << "the value was copied or re-created, not moved";

  EnvCounted second{std::vector<int>(1000, 8)};
  const int* second_buffer = second.payload.data();
  handle.bind().send(*client, std::move(second));
  EnvCounted received = must(receiver.recv(kDeadline));
  EXPECT_EQ(received.payload.data(), second_buffer);
  EXPECT_EQ(received.payload[0], 8);

  EXPECT_EQ(EnvCounted::saves, 0) << "a local send must never serialize";
}

TEST(Envelope, R_ENV_4_SerializedAtMostOnceWhenLeaving) {
  EnvCounted::saves = 0;
  Proc proc(ProcOptions::deterministic());
  Addrs a = addrs(proc);
  auto env = MessageEnvelope::make(a.sender, a.dest, wire::Any::make(EnvCounted{{1, 2, 3}}));
  std::string once = must(wire::encode(*env));
  std::string twice = must(wire::encode(*env));
  EXPECT_EQ(once, twice);
  EXPECT_TRUE(env->data().is_typed()) << "leaving the process keeps the typed value";
  EXPECT_EQ(EnvCounted::saves, 1);

  MessageEnvelope back;
  ASSERT_TRUE(wire::decode_into(once, back).ok());
  EXPECT_FALSE(back.data().is_typed()) << "received bytes stay bytes until a port decodes them";
  EXPECT_EQ(back.data().type_hash(), wire::type_hash<EnvCounted>());
  EXPECT_EQ(must(back.data().take<EnvCounted>()).payload, (std::vector<int>{1, 2, 3}));
}

// BUG (runtime/src/envelope_pool.cc, EnvelopePool / pool()): the envelope free list is a
// `thread_local EnvelopePool` with a destructor. An envelope deleted on a thread after that
// thread's thread_locals were destroyed — any static or global that owns envelopes (a static Proc
// with queued messages, a global Client, a static test fixture) is destroyed after them at exit —
// calls `pool().put()` on the destroyed pool: a push_back into a freed vector (heap-use-after-free,
// or a double free when it reallocates). Fix: keep a trivially destructible thread_local
// `bool pool_alive` cleared by ~EnvelopePool and fall back to ::operator new/delete when false (or
// allocate the pool with `new` and never destroy it). Disabled until fixed.
TEST(EnvelopeDeathTest, EnvelopeOwnedByAStaticIsFreedCleanlyAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        static std::vector<EnvelopePtr> survivors;  // destroyed after this thread's thread_locals
        std::vector<EnvelopePtr> recycled;
        for (int i = 0; i < 3; ++i) recycled.push_back(std::make_unique<MessageEnvelope>());
        recycled.clear();  // the pool's free list now holds three blocks
        for (int i = 0; i < 8; ++i) survivors.push_back(std::make_unique<MessageEnvelope>());
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
}

// Envelopes made on one thread and freed on another (a sender outside the workers) come back to
// the making thread from the other's overflow, a batch at a time (runtime/src/envelope_pool.h),
// not one by one through the allocator.
TEST(EnvelopePool, BlocksFreedOnAnotherThreadComeBackToTheAllocatingThreadInBatches) {
  // Earlier tests may have left the (bounded) depot full: empty it first, so the batches below
  // are the ones a thread takes.
  std::vector<MessageEnvelope*> hold;
  std::thread drainer([&] {
    for (int i = 0; i < 64 * 256 + 1; ++i) hold.push_back(new MessageEnvelope());
  });
  drainer.join();
  std::vector<MessageEnvelope*> made;
  std::thread maker([&] {
    for (int i = 0; i < 5000; ++i) made.push_back(new MessageEnvelope());
  });
  maker.join();
  std::unordered_set<void*> freed(made.begin(), made.end());
  std::thread freer([&] {
    for (MessageEnvelope* e : made) delete e;  // past the thread's cap: batches to the depot
  });
  freer.join();
  std::vector<MessageEnvelope*> again;
  std::thread taker([&] {  // a fresh thread: nothing of its own to reuse
    for (int i = 0; i < 256; ++i) again.push_back(new MessageEnvelope());
  });
  taker.join();
  size_t reused = 0;
  for (MessageEnvelope* e : again) reused += freed.contains(e) ? 1 : 0;
  EXPECT_EQ(reused, again.size());
  for (MessageEnvelope* e : again) delete e;
  for (MessageEnvelope* e : hold) delete e;
}

// --- R-FAIL-1: kinds, reasons, factories ---------------------------------------------------------

TEST(DeliveryFailure, R_FAIL_1_EveryKindAndReasonRenders) {
  const std::string target = "dest.proc:e0@inproc://1";
  std::vector<std::string> seen;
  for (InvalidReason r : {InvalidReason::kActorNotExist, InvalidReason::kHandlerNotBound,
                          InvalidReason::kActorStopped, InvalidReason::kActorFailed,
                          InvalidReason::kPortNeverAllocated, InvalidReason::kProtocolMismatch,
                          InvalidReason::kWrongMailboxOwner}) {
    std::string reason(to_string(r));
    ASSERT_FALSE(reason.empty());
    std::string line = DeliveryFailure::invalid_reference(target, r).to_string();
    EXPECT_NE(line.find(target), std::string::npos) << line;
    EXPECT_NE(line.find(reason), std::string::npos) << line;
    EXPECT_NE(line.find(to_string(FailureKind::kInvalidReference)), std::string::npos) << line;
    seen.push_back(reason);
  }
  for (TransportReason r : {TransportReason::kChannelClosed, TransportReason::kAckTimedOut,
                            TransportReason::kDialFailed, TransportReason::kNoRoute,
                            TransportReason::kOversizedFrame, TransportReason::kLinkUnavailable,
                            TransportReason::kOverloaded}) {
    std::string reason(to_string(r));
    ASSERT_FALSE(reason.empty());
    std::string line = DeliveryFailure::transport_failure(target, r).to_string();
    EXPECT_NE(line.find(target), std::string::npos) << line;
    EXPECT_NE(line.find(reason), std::string::npos) << line;
    seen.push_back(reason);
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    for (size_t j = i + 1; j < seen.size(); ++j) EXPECT_NE(seen[i], seen[j]);
  }

  std::string gone = DeliveryFailure::port_gone(target, "test.Type").to_string();
  EXPECT_NE(gone.find(target), std::string::npos) << gone;
  EXPECT_NE(gone.find("test.Type"), std::string::npos) << gone;
  EXPECT_NE(gone.find(to_string(FailureKind::kPortGone)), std::string::npos) << gone;

  std::string expired = DeliveryFailure::expired(target).to_string();
  EXPECT_NE(expired.find(target), std::string::npos) << expired;
  EXPECT_NE(expired.find(to_string(FailureKind::kExpired)), std::string::npos) << expired;

  std::string big = DeliveryFailure::oversized_frame(target, 5000, 4096).to_string();
  EXPECT_NE(big.find("5000"), std::string::npos) << big;
  EXPECT_NE(big.find("4096"), std::string::npos) << big;
}

TEST(DeliveryFailure, R_FAIL_1_FactoriesSetFields) {
  DeliveryFailure inv =
      DeliveryFailure::invalid_reference("t1", InvalidReason::kProtocolMismatch, "why");
  EXPECT_EQ(inv.kind, FailureKind::kInvalidReference);
  EXPECT_EQ(inv.invalid, InvalidReason::kProtocolMismatch);
  EXPECT_EQ(inv.transport, TransportReason::kNone);
  EXPECT_EQ(inv.target, "t1");
  EXPECT_EQ(inv.detail, "why");
  EXPECT_FALSE(inv.is_undeliverable());

  DeliveryFailure tr = DeliveryFailure::transport_failure("t2", TransportReason::kDialFailed, "E");
  EXPECT_EQ(tr.kind, FailureKind::kTransport);
  EXPECT_EQ(tr.transport, TransportReason::kDialFailed);
  EXPECT_EQ(tr.invalid, InvalidReason::kNone);
  EXPECT_EQ(tr.target, "t2");
  EXPECT_EQ(tr.detail, "E");
  EXPECT_TRUE(tr.is_undeliverable());

  DeliveryFailure big = DeliveryFailure::oversized_frame("t3", 10, 5);
  EXPECT_EQ(big.kind, FailureKind::kTransport);
  EXPECT_EQ(big.transport, TransportReason::kOversizedFrame);
  EXPECT_EQ(big.len, 10u);
  EXPECT_EQ(big.max, 5u);
  EXPECT_EQ(big.target, "t3");

  DeliveryFailure gone = DeliveryFailure::port_gone("t4", "my.Type");
  EXPECT_EQ(gone.kind, FailureKind::kPortGone);
  EXPECT_EQ(gone.target, "t4");
  EXPECT_EQ(gone.message_type, "my.Type");
  EXPECT_TRUE(gone.is_undeliverable());

  DeliveryFailure exp = DeliveryFailure::expired("t5");
  EXPECT_EQ(exp.kind, FailureKind::kExpired);
  EXPECT_EQ(exp.target, "t5");
  EXPECT_FALSE(exp.is_undeliverable());

  // Failures travel with the envelope: they round-trip through the wire codec.
  for (const DeliveryFailure& f : {inv, tr, big, gone, exp}) {
    EXPECT_EQ(must(wire::decode<DeliveryFailure>(must(wire::encode(f)))), f);
  }
}

// --- R-FAIL-2: accumulation and bounded lines ----------------------------------------------------

TEST(DeliveryFailure, R_FAIL_2_FailuresAccumulateAndTheFirstIsRoot) {
  Proc proc(ProcOptions::deterministic());
  EnvelopePtr env = ping(addrs(proc));
  RecordingReturn ret;
  const DeliveryFailure first = DeliveryFailure::transport_failure("a", TransportReason::kNoRoute);
  const DeliveryFailure second = DeliveryFailure::expired("b");
  env->add_failure(first);
  MessageEnvelope::undeliverable(std::move(env), second, ret);
  ASSERT_EQ(ret.returned.size(), 1u);
  const MessageEnvelope& back = *ret.returned[0];
  ASSERT_EQ(back.delivery_failures().size(), 2u);
  EXPECT_EQ(back.delivery_failures()[0], first);
  EXPECT_EQ(back.delivery_failures()[1], second);
  ASSERT_NE(back.root_failure(), nullptr);
  EXPECT_EQ(*back.root_failure(), first) << "policy reads the first failure, not the latest";
}

TEST(DeliveryFailure, R_FAIL_2_LineIsOneBoundedLineWhateverTheDetail) {
  std::string detail;
  for (int i = 0; i < 500; ++i) detail += "line " + std::to_string(i) + "\n\r\n";
  std::vector<DeliveryFailure> failures = {
      DeliveryFailure::invalid_reference("t\nx", InvalidReason::kProtocolMismatch, detail),
      DeliveryFailure::transport_failure(std::string(5000, 'a'), TransportReason::kDialFailed,
                                         detail),
      DeliveryFailure::port_gone("p\r\n", std::string(3000, 'T') + "\n"),
      DeliveryFailure::oversized_frame(std::string(300, 'o'), 1, 2),
  };
  for (const DeliveryFailure& f : failures) {
    std::string line = f.to_string();
    EXPECT_LE(line.size(), DeliveryFailure::kMaxLine);
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    EXPECT_EQ(line.find('\r'), std::string::npos) << line;
    EXPECT_EQ(line.rfind("deliver to ", 0), 0u) << "names the operation first: " << line;
  }
  // A short failure is not cut.
  std::string small =
      DeliveryFailure::invalid_reference("t", InvalidReason::kActorNotExist).to_string();
  EXPECT_EQ(small.find("..."), std::string::npos);
  EXPECT_EQ(small.find("…"), std::string::npos);
}

// BUG (runtime/src/delivery_failure.cc, DeliveryFailure::to_string): the line is cut at a byte
// offset (`line.resize(kMaxLine - 3)`), which can split a multi-byte UTF-8 character in a long
// detail (OS errors and peer-supplied text are UTF-8), leaving an invalid sequence in logs and in
// Status messages. Disabled until the cut backs up to a character boundary.
TEST(DeliveryFailure, R_FAIL_2_CutLineStaysValidUtf8) {
  std::string detail;
  for (int i = 0; i < 400; ++i) detail += "\xC3\xA9";  // é
  for (std::string target : {"t", "tt", "ttt"}) {
    std::string line =
        DeliveryFailure::invalid_reference(target, InvalidReason::kProtocolMismatch, detail)
            .to_string();
    EXPECT_LE(line.size(), DeliveryFailure::kMaxLine);
    EXPECT_TRUE(valid_utf8(line)) << "target " << target << ": " << line;
  }
}

// --- R-FAIL-3: record, then return or drop; never bounce a return --------------------------------

TEST(DeliveryFailure, R_FAIL_3_FailureIsRecordedBeforeTheReturn) {
  class CheckingReturn final : public ReturnHandle {
   public:
    void return_envelope(EnvelopePtr env) override {
      failures_at_return = env->delivery_failures().size();
      if (env->root_failure() != nullptr) root = *env->root_failure();
    }
    void drop(EnvelopePtr env, DropCause) override {
      failures_at_drop = env->delivery_failures().size();
    }
    size_t failures_at_return = 0;
    size_t failures_at_drop = 0;
    DeliveryFailure root;
  };
  Proc proc(ProcOptions::deterministic());
  CheckingReturn ret;
  const DeliveryFailure f = DeliveryFailure::invalid_reference("x", InvalidReason::kActorFailed);
  MessageEnvelope::undeliverable(ping(addrs(proc)), f, ret);
  EXPECT_EQ(ret.failures_at_return, 1u);
  EXPECT_EQ(ret.root, f);

  EnvelopePtr quiet = ping(addrs(proc));
  quiet->set_return_undeliverable(false);
  MessageEnvelope::undeliverable(std::move(quiet), f, ret);
  EXPECT_EQ(ret.failures_at_drop, 1u) << "a dropped envelope also carries its failure";

  // Through the proc: the trace hook sees the returned envelope with its failure already on it.
  size_t failures_seen_on_return = 0;
  proc.set_trace(TraceHook{[&](const TraceEvent& e) {
                             if (e.kind == TraceEventKind::kReturned) {
                               failures_seen_on_return = e.envelope.delivery_failures().size();
                             }
                           },
                           std::nullopt});
  auto client = must(Client::attach(proc, "alice"));
  proc.send(
      MessageEnvelope::make(client->self_addr(), addrs(proc).dest, wire::Any::make(EnvPing{1})));
  EXPECT_EQ(failures_seen_on_return, 1u);
  proc.set_trace(TraceHook{});
}

TEST(DeliveryFailure, R_FAIL_3_ReturnedEnvelopeReachesItsSender) {
  Proc proc(ProcOptions::deterministic());
  auto client = must(Client::attach(proc, "alice"));
  PortAddr ghost = proc.actor_addr(uid("ghost")).port(Port::handler(wire::type_hash<EnvPing>()));
  proc.send(MessageEnvelope::make(client->self_addr(), ghost, wire::Any::make(EnvPing{11})));

  EnvelopePtr back = must(client->next_undeliverable(kDeadline));
  EXPECT_EQ(back->dest(), ghost);
  ASSERT_NE(back->root_failure(), nullptr);
  EXPECT_EQ(back->root_failure()->kind, FailureKind::kInvalidReference);
  EXPECT_EQ(back->root_failure()->invalid, InvalidReason::kActorNotExist);
  ASSERT_NE(back->data().get<EnvPing>(), nullptr) << "the payload comes back with the envelope";
  EXPECT_EQ(back->data().get<EnvPing>()->n, 11);
  EXPECT_EQ(proc.stats().returned, 1u);
  EXPECT_EQ(proc.stats().dropped, 0u);
}

TEST(DeliveryFailure, R_FAIL_3_ReturnDisabledIsDroppedAndCounted) {
  Proc proc(ProcOptions::deterministic());
  auto client = must(Client::attach(proc, "alice"));
  auto env =
      MessageEnvelope::make(client->self_addr(), addrs(proc).dest, wire::Any::make(EnvPing{1}));
  env->set_return_undeliverable(false);
  proc.send(std::move(env));

  EXPECT_EQ(client->next_undeliverable(absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ProcStatsSnapshot s = proc.stats();
  EXPECT_EQ(s.returned, 0u);
  EXPECT_EQ(s.dropped, 1u);
  EXPECT_EQ(s.drop_return_disabled, 1u);
  EXPECT_EQ(s.invalid_reference, 1u) << "the failure of a dropped envelope is still counted";
}

// Counts the trace events of each kind.
struct TraceCounts {
  int posted = 0, delivered = 0, returned = 0, dropped = 0;
  TraceHook hook() {
    return TraceHook{[this](const TraceEvent& e) {
                       switch (e.kind) {
                         case TraceEventKind::kPosted:
                           ++posted;
                           break;
                         case TraceEventKind::kDelivered:
                           ++delivered;
                           break;
                         case TraceEventKind::kReturned:
                           ++returned;
                           break;
                         case TraceEventKind::kDropped:
                           ++dropped;
                           break;
                       }
                     },
                     std::nullopt};
  }
};

TEST(DeliveryFailure, R_FAIL_3_ReturnToAClosedClientIsDroppedNotBounced) {
  Proc proc(ProcOptions::deterministic());
  ActorAddr gone_sender;
  {
    auto client = must(Client::attach(proc, "alice"));
    gone_sender = client->self_addr();
  }  // the client's mailbox is now a closed tombstone
  TraceCounts counts;
  proc.set_trace(counts.hook());
  proc.send(MessageEnvelope::make(gone_sender, addrs(proc).dest, wire::Any::make(EnvPing{1})));
  proc.set_trace(TraceHook{});

  ProcStatsSnapshot s = proc.stats();
  EXPECT_EQ(s.posted, 1u);
  EXPECT_EQ(s.returned, 1u) << "one return attempt, not a loop";
  EXPECT_EQ(s.dropped, 1u);
  EXPECT_EQ(s.drop_return_failed, 1u);
  EXPECT_EQ(s.drop_return_disabled, 0u);
  EXPECT_EQ(s.delivered, 0u);
  EXPECT_EQ(counts.returned, 1);
  EXPECT_EQ(counts.dropped, 1);
}

TEST(DeliveryFailure, R_FAIL_3_ReturnToAMissingOrRemoteSenderIsDroppedNotBounced) {
  Proc proc(ProcOptions::deterministic());
  // A sender that never existed on this proc: the return fails with ActorNotExist.
  proc.send(MessageEnvelope::make(proc.actor_addr(uid("nobody")), addrs(proc).dest,
                                  wire::Any::make(EnvPing{1})));
  // A sender on another proc with no route there: the return fails with NoRoute.
  ActorAddr remote{ActorId{ProcId{uid("elsewhere")}, uid("bob")}, proc.location()};
  proc.send(MessageEnvelope::make(remote, addrs(proc).dest, wire::Any::make(EnvPing{2})));

  ProcStatsSnapshot s = proc.stats();
  EXPECT_EQ(s.posted, 2u);
  EXPECT_EQ(s.returned, 2u);
  EXPECT_EQ(s.dropped, 2u);
  EXPECT_EQ(s.drop_return_failed, 2u);
  EXPECT_EQ(s.transport, 1u) << "the failed return over no route is counted";
}

TEST(DeliveryFailure, R_FAIL_3_AnUndeliverablePayloadIsNeverBounced) {
  Proc proc(ProcOptions::deterministic());
  auto client = must(Client::attach(proc, "alice"));
  // Someone posts an Undeliverable (as a gateway relaying a return would) to a missing actor,
  // with return_undeliverable left true: it still must not come back.
  UndeliverableEnvelope inner{ping(addrs(proc))};
  PortAddr ghost =
      proc.actor_addr(uid("ghost")).port(Port::handler(wire::type_hash<UndeliverableEnvelope>()));
  auto env = MessageEnvelope::make(client->self_addr(), ghost, wire::Any::make(std::move(inner)));
  ASSERT_TRUE(env->return_undeliverable());
  proc.send(std::move(env));

  EXPECT_EQ(client->next_undeliverable(absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ProcStatsSnapshot s = proc.stats();
  EXPECT_EQ(s.returned, 0u);
  EXPECT_EQ(s.dropped, 1u);
  EXPECT_EQ(s.drop_return_failed, 1u);
}

// --- R-FAIL-4: drops and failures counted by cause -----------------------------------------------

TEST(DeliveryFailure, R_FAIL_4_FailuresAreCountedByKind) {
  Proc proc(ProcOptions::deterministic());
  auto client = must(Client::attach(proc, "alice"));
  const uint64_t h = wire::type_hash<EnvPing>();
  auto send_to = [&](PortAddr to, uint8_t ttl = kDefaultTtl) {
    proc.send(MessageEnvelope::make(client->self_addr(), std::move(to), wire::Any::make(EnvPing{1}),
                                    ttl));
  };
  send_to(proc.actor_addr(uid("ghost")).port(Port::handler(h)));  // invalid reference
  send_to(ActorAddr{ActorId{ProcId{uid("far")}, uid("bob")}, proc.location()}.port(
      Port::handler(h)));  // transport (no route)
  {
    auto [handle, receiver] = open_port<EnvPing>(*client);
    PortAddr port = handle.bind().addr();
    { auto dead = std::move(receiver); }
    send_to(port);  // port gone
  }
  send_to(proc.actor_addr(uid("ghost")).port(Port::handler(h)), 0);  // expired

  for (int i = 0; i < 4; ++i) ASSERT_TRUE(client->next_undeliverable(kDeadline).ok());
  ProcStatsSnapshot s = proc.stats();
  EXPECT_EQ(s.invalid_reference, 1u);
  EXPECT_EQ(s.transport, 1u);
  EXPECT_EQ(s.port_gone, 1u);
  EXPECT_EQ(s.expired, 1u);
  EXPECT_EQ(s.undeliverable(FailureKind::kInvalidReference), 1u);
  EXPECT_EQ(s.undeliverable(FailureKind::kTransport), 1u);
  EXPECT_EQ(s.undeliverable(FailureKind::kPortGone), 1u);
  EXPECT_EQ(s.undeliverable(FailureKind::kExpired), 1u);
  EXPECT_EQ(s.returned, 4u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_NE(s.to_string().find("returned=4"), std::string::npos) << s.to_string();
}

TEST(DeliveryFailure, R_FAIL_4_DropsAreCountedByCause) {
  Proc proc(ProcOptions::deterministic());
  Addrs a = addrs(proc);
  proc.drop(ping(a), DropCause::kReturnDisabled);
  proc.drop(ping(a), DropCause::kReturnFailed);
  proc.drop(ping(a), DropCause::kReturnFailed);
  proc.drop(ping(a), DropCause::kNoReturnPath);
  ProcStatsSnapshot s = proc.stats();
  EXPECT_EQ(s.dropped, 4u);
  EXPECT_EQ(s.drop_return_disabled, 1u);
  EXPECT_EQ(s.drop_return_failed, 2u);
  EXPECT_EQ(s.drop_no_return_path, 1u);
  for (DropCause c :
       {DropCause::kReturnDisabled, DropCause::kReturnFailed, DropCause::kNoReturnPath}) {
    EXPECT_FALSE(to_string(c).empty());
  }
}

TEST(DeliveryFailure, R_FAIL_4_DropsAreLoggedOncePerCauseRateLimited) {
  Proc proc(ProcOptions::deterministic());
  Addrs a = addrs(proc);
  auto count = [](const std::string& text, std::string_view what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  testing::internal::CaptureStderr();
  for (int i = 0; i < 20; ++i) {
    auto env = ping(a);
    env->set_return_undeliverable(false);
    MessageEnvelope::undeliverable(std::move(env), DeliveryFailure::expired("x"), proc);
  }
  for (int i = 0; i < 20; ++i) proc.drop(ping(a), DropCause::kNoReturnPath);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "dropped an envelope"), 2) << err;
  EXPECT_EQ(count(err, std::string(to_string(DropCause::kReturnDisabled))), 1) << err;
  EXPECT_EQ(count(err, std::string(to_string(DropCause::kNoReturnPath))), 1) << err;
  EXPECT_EQ(proc.stats().dropped, 40u) << "rate limiting the log never limits the counting";
}

}  // namespace
}  // namespace postal::runtime
