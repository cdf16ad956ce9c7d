// Tests for Mailbox (R-MBX-1…5, R-PORT-1, R-PORT-2), driven directly: a mailbox built by hand
// with a recording handler sink, posted to with a recording ReturnHandle. No actors involved.
#include "postal/runtime/mailbox.h"

#include <cstdlib>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "postal/runtime/message_envelope.h"
#include "postal/runtime/port_sink.h"
#include "postal/runtime/proc.h"
#include "postal/wire/codec.h"
#include "support/must.h"
#include "support/recording_senders.h"

namespace {

struct MbxPing {
  int32_t n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};

struct MbxPong {
  std::string text;
  template <class A>
  void serialize(A& a) {
    a(text);
  }
};

// Registered, but bound on no handler port of the test table.
struct MbxUnbound {
  int32_t n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};

}  // namespace

POSTAL_MESSAGE(MbxPing, "test.runtime.mailbox.Ping");
POSTAL_MESSAGE(MbxPong, "test.runtime.mailbox.Pong");
POSTAL_MESSAGE(MbxUnbound, "test.runtime.mailbox.Unbound");

namespace postal::runtime {
namespace {

using test_support::must;

Uid uid(std::string_view name) { return Uid::singleton(must(Label::parse(name))); }

const HandlerTable& handlers() {
  static const HandlerTable table{
      {wire::type_hash<MbxPing>(), &decode_as<MbxPing>},
      {wire::type_hash<MbxPong>(), &decode_as<MbxPong>},
      {wire::type_hash<UndeliverableEnvelope>(), &decode_as<UndeliverableEnvelope>},
  };
  return table;
}

// Records what a port accepted and any failure it was completed with.
class RecordingSink final : public PortSink {
 public:
  void deliver(EnvelopePtr env) override {
    absl::MutexLock lock(&mu);
    delivered.push_back(std::move(env));
  }
  void fail(const DeliveryFailure& f) override {
    absl::MutexLock lock(&mu);
    failures.push_back(f);
  }
  size_t size() {
    absl::MutexLock lock(&mu);
    return delivered.size();
  }
  absl::Mutex mu;
  std::vector<EnvelopePtr> delivered;
  std::vector<DeliveryFailure> failures;
};

using test_support::RecordingReturn;

class MailboxTest : public testing::Test {
 protected:
  MailboxTest()
      : proc_(ProcOptions::deterministic()),
        sink_(std::make_shared<RecordingSink>()),
        mbx_(std::make_shared<Mailbox>(proc_, proc_.actor_addr(uid("owner")), &handlers(), sink_)),
        sender_(proc_.actor_addr(uid("sender"))) {}

  template <class T>
  EnvelopePtr to_port(Port port, T value) {
    return MessageEnvelope::make(sender_, mbx_->port_addr(port), wire::Any::make(std::move(value)));
  }
  EnvelopePtr bytes_to_port(Port port, uint64_t hash, std::string bytes) {
    return MessageEnvelope::make(sender_, mbx_->port_addr(port),
                                 wire::Any::from_bytes(hash, std::move(bytes)));
  }
  template <class T>
  static Port handler() {
    return Port::handler(wire::type_hash<T>());
  }
  uint64_t open(std::shared_ptr<PortSink> sink, bool once = false) {
    return mbx_->open_port(wire::type_hash<MbxPing>(), &decode_as<MbxPing>, sink, once);
  }

  Proc proc_;
  std::shared_ptr<RecordingSink> sink_;
  std::shared_ptr<Mailbox> mbx_;
  ActorAddr sender_;
  RecordingReturn ret_;
};

// --- R-MBX-1: owner only -------------------------------------------------------------------------

TEST_F(MailboxTest, R_MBX_1_OtherActorIsWrongMailboxOwner) {
  PortAddr other = proc_.actor_addr(uid("someone-else")).port(handler<MbxPing>());
  mbx_->post_unchecked(MessageEnvelope::make(sender_, other, wire::Any::make(MbxPing{1})), ret_);
  DeliveryFailure root = ret_.only_root();
  EXPECT_EQ(root.kind, FailureKind::kInvalidReference);
  EXPECT_EQ(root.invalid, InvalidReason::kWrongMailboxOwner);
  EXPECT_EQ(root.target, other.to_string());
  EXPECT_EQ(sink_->size(), 0u);
}

TEST_F(MailboxTest, R_MBX_1_SameUidOnAnotherProcIsWrongMailboxOwner) {
  ActorAddr twin{ActorId{ProcId{uid("other-proc")}, uid("owner")}, proc_.location()};
  mbx_->post_unchecked(
      MessageEnvelope::make(sender_, twin.port(handler<MbxPing>()), wire::Any::make(MbxPing{1})),
      ret_);
  EXPECT_EQ(ret_.only_root().invalid, InvalidReason::kWrongMailboxOwner);
  EXPECT_EQ(sink_->size(), 0u);
}

TEST_F(MailboxTest, R_MBX_1_OwnerOnAnotherLocationIsDelivered) {
  // R-ADDR-3: ownership is by id; the location is routing data only.
  ActorAddr moved{mbx_->owner().id, Location::addr(must(ChannelAddr::parse("tcp://127.0.0.1:9")))};
  mbx_->post_unchecked(
      MessageEnvelope::make(sender_, moved.port(handler<MbxPing>()), wire::Any::make(MbxPing{1})),
      ret_);
  EXPECT_TRUE(ret_.returned.empty());
  EXPECT_EQ(sink_->size(), 1u);
}

// --- R-MBX-2: port lookup ------------------------------------------------------------------------

TEST_F(MailboxTest, R_MBX_2_BoundHandlerPortDelivers) {
  mbx_->post_unchecked(to_port(handler<MbxPing>(), MbxPing{7}), ret_);
  ASSERT_EQ(sink_->size(), 1u);
  EXPECT_EQ(sink_->delivered[0]->data().get<MbxPing>()->n, 7);
  EXPECT_EQ(sink_->delivered[0]->dest(), mbx_->port_addr(handler<MbxPing>()));
  EXPECT_TRUE(ret_.returned.empty());
  EXPECT_EQ(proc_.stats().delivered, 1u);
}

TEST_F(MailboxTest, R_MBX_2_UnboundHandlerPortFailsHandlerNotBound) {
  EXPECT_FALSE(mbx_->has_handler(wire::type_hash<MbxUnbound>()));
  EXPECT_TRUE(mbx_->has_handler(wire::type_hash<MbxPing>()));
  mbx_->post_unchecked(to_port(handler<MbxUnbound>(), MbxUnbound{1}), ret_);
  DeliveryFailure root = ret_.only_root();
  EXPECT_EQ(root.kind, FailureKind::kInvalidReference);
  EXPECT_EQ(root.invalid, InvalidReason::kHandlerNotBound);
  EXPECT_EQ(root.target, mbx_->port_addr(handler<MbxUnbound>()).to_string());
  EXPECT_NE(root.detail.find("test.runtime.mailbox.Unbound"), std::string::npos) << root.detail;
  EXPECT_EQ(sink_->size(), 0u);
  EXPECT_EQ(proc_.stats().delivered, 0u);
}

TEST_F(MailboxTest, R_MBX_2_MailboxWithoutHandlersFailsHandlerNotBound) {
  auto bare = std::make_shared<Mailbox>(proc_, proc_.actor_addr(uid("bare")), nullptr, nullptr);
  bare->post_unchecked(MessageEnvelope::make(sender_, bare->port_addr(handler<MbxPing>()),
                                             wire::Any::make(MbxPing{1})),
                       ret_);
  EXPECT_EQ(ret_.only_root().invalid, InvalidReason::kHandlerNotBound);
}

TEST_F(MailboxTest, R_MBX_2_ControlPortIsNotBound) {
  mbx_->post_unchecked(to_port(Port::control(1), MbxPing{1}), ret_);
  EXPECT_EQ(ret_.only_root().invalid, InvalidReason::kHandlerNotBound);
  EXPECT_EQ(sink_->size(), 0u);
}

TEST_F(MailboxTest, R_MBX_2_EphemeralIndexNeverAllocatedFailsPortNeverAllocated) {
  // No ephemeral port was ever opened.
  mbx_->post_unchecked(to_port(Port::ephemeral(0), MbxPing{1}), ret_);
  EXPECT_EQ(ret_.only_root().invalid, InvalidReason::kPortNeverAllocated);

  // Ports 0 and 1 exist; 2 and a far index were never allocated.
  auto port_sink = std::make_shared<RecordingSink>();
  ASSERT_EQ(open(port_sink), 0u);
  ASSERT_EQ(open(port_sink), 1u);
  for (uint64_t index : {uint64_t{2}, uint64_t{1} << 40}) {
    RecordingReturn ret;
    mbx_->post_unchecked(to_port(Port::ephemeral(index), MbxPing{1}), ret);
    DeliveryFailure root = ret.only_root();
    EXPECT_EQ(root.kind, FailureKind::kInvalidReference) << index;
    EXPECT_EQ(root.invalid, InvalidReason::kPortNeverAllocated) << index;
    EXPECT_EQ(root.target, mbx_->port_addr(Port::ephemeral(index)).to_string());
  }
  EXPECT_EQ(port_sink->size(), 0u);
}

TEST_F(MailboxTest, R_MBX_2_PortGoneWhenReceiverIsDropped) {
  auto port_sink = std::make_shared<RecordingSink>();
  uint64_t index = open(port_sink);
  mbx_->post_unchecked(to_port(Port::ephemeral(index), MbxPing{1}), ret_);
  ASSERT_EQ(port_sink->size(), 1u);

  port_sink.reset();  // the receiver goes away; the mailbox held it only weakly
  mbx_->post_unchecked(to_port(Port::ephemeral(index), MbxPing{2}), ret_);
  ASSERT_EQ(ret_.returned.size(), 1u);
  const DeliveryFailure& root = *ret_.returned[0]->root_failure();
  EXPECT_EQ(root.kind, FailureKind::kPortGone);
  EXPECT_TRUE(root.is_undeliverable());
  EXPECT_EQ(root.target, mbx_->port_addr(Port::ephemeral(index)).to_string());
  EXPECT_EQ(root.message_type, "test.runtime.mailbox.Ping");

  // Still gone on the next send (not "never allocated").
  RecordingReturn again;
  mbx_->post_unchecked(to_port(Port::ephemeral(index), MbxPing{3}), again);
  EXPECT_EQ(again.only_root().kind, FailureKind::kPortGone);
}

TEST_F(MailboxTest, R_MBX_2_PortGoneAfterClosePort) {
  auto port_sink = std::make_shared<RecordingSink>();
  uint64_t index = open(port_sink);
  mbx_->close_port(index);
  mbx_->post_unchecked(to_port(Port::ephemeral(index), MbxPing{1}), ret_);
  EXPECT_EQ(ret_.only_root().kind, FailureKind::kPortGone);
  EXPECT_EQ(port_sink->size(), 0u) << "a closed port delivers nothing, even with its sink alive";
}

// --- R-MBX-3: closed mailboxes -------------------------------------------------------------------

TEST_F(MailboxTest, R_MBX_3_StoppedMailboxFailsActorStopped) {
  auto port_sink = std::make_shared<RecordingSink>();
  uint64_t index = open(port_sink);
  mbx_->set_state(MailboxState::kStopped);
  EXPECT_EQ(mbx_->state(), MailboxState::kStopped);
  mbx_->post_unchecked(to_port(handler<MbxPing>(), MbxPing{1}), ret_);
  mbx_->post_unchecked(to_port(Port::ephemeral(index), MbxPing{2}), ret_);
  ASSERT_EQ(ret_.returned.size(), 2u);
  for (const EnvelopePtr& env : ret_.returned) {
    EXPECT_EQ(env->root_failure()->kind, FailureKind::kInvalidReference);
    EXPECT_EQ(env->root_failure()->invalid, InvalidReason::kActorStopped);
  }
  EXPECT_EQ(sink_->size(), 0u);
  EXPECT_EQ(port_sink->size(), 0u);
}

TEST_F(MailboxTest, R_MBX_3_FailedMailboxFailsActorFailed) {
  auto port_sink = std::make_shared<RecordingSink>();
  uint64_t index = open(port_sink);
  mbx_->set_state(MailboxState::kFailed);
  mbx_->post_unchecked(to_port(handler<MbxPing>(), MbxPing{1}), ret_);
  mbx_->post_unchecked(to_port(Port::ephemeral(index), MbxPing{2}), ret_);
  ASSERT_EQ(ret_.returned.size(), 2u);
  for (const EnvelopePtr& env : ret_.returned) {
    EXPECT_EQ(env->root_failure()->invalid, InvalidReason::kActorFailed);
  }
  EXPECT_EQ(sink_->size(), 0u);
  EXPECT_EQ(port_sink->size(), 0u);
}

TEST_F(MailboxTest, R_MBX_3_ClosedStateWinsOverPortLookup) {
  // Even an unbound handler port reports the mailbox's terminal state, not HandlerNotBound.
  mbx_->set_state(MailboxState::kFailed);
  mbx_->post_unchecked(to_port(handler<MbxUnbound>(), MbxUnbound{1}), ret_);
  EXPECT_EQ(ret_.only_root().invalid, InvalidReason::kActorFailed);
}

TEST_F(MailboxTest, R_MBX_3_StoppingRefusesHandlerMessagesButDeliversReplies) {
  auto port_sink = std::make_shared<RecordingSink>();
  uint64_t index = open(port_sink);
  mbx_->set_state(MailboxState::kStopping);
  mbx_->post_unchecked(to_port(handler<MbxPing>(), MbxPing{1}), ret_);
  EXPECT_EQ(ret_.only_root().invalid, InvalidReason::kActorStopped);
  EXPECT_EQ(sink_->size(), 0u);

  RecordingReturn ok;
  mbx_->post_unchecked(to_port(Port::ephemeral(index), MbxPing{2}), ok);
  EXPECT_TRUE(ok.returned.empty());
  EXPECT_EQ(port_sink->size(), 1u) << "R-ACT-5: replies to a stopping actor still arrive";
}

TEST_F(MailboxTest, R_MBX_3_DetachedHandlerSinkFailsActorStopped) {
  mbx_->detach_handler_sink();
  mbx_->post_unchecked(to_port(handler<MbxPing>(), MbxPing{1}), ret_);
  EXPECT_EQ(ret_.only_root().invalid, InvalidReason::kActorStopped);
  EXPECT_EQ(sink_->size(), 0u);
}

// --- R-MBX-4: decoding into the port's type ------------------------------------------------------

TEST_F(MailboxTest, R_MBX_4_TypedValueOfAnotherTypeIsProtocolMismatch) {
  mbx_->post_unchecked(to_port(handler<MbxPing>(), MbxPong{"hi"}), ret_);
  DeliveryFailure root = ret_.only_root();
  EXPECT_EQ(root.invalid, InvalidReason::kProtocolMismatch);
  EXPECT_NE(root.detail.find("test.runtime.mailbox.Pong"), std::string::npos) << root.detail;
  EXPECT_NE(root.detail.find("test.runtime.mailbox.Ping"), std::string::npos) << root.detail;
  EXPECT_EQ(sink_->size(), 0u);

  mbx_->post_unchecked(to_port(handler<MbxPing>(), MbxPing{5}), ret_);
  ASSERT_EQ(sink_->size(), 1u) << "the port stays bound after a mismatch";
  EXPECT_EQ(sink_->delivered[0]->data().get<MbxPing>()->n, 5);
}

TEST_F(MailboxTest, R_MBX_4_BytesOfAnotherTypeAreProtocolMismatchAndPortStaysUsable) {
  std::string pong_bytes = must(wire::encode(MbxPong{"hello world"}));
  // The bytes of a Pong labelled as a Ping: the hash matches, the content does not.
  mbx_->post_unchecked(bytes_to_port(handler<MbxPing>(), wire::type_hash<MbxPing>(), pong_bytes),
                       ret_);
  EXPECT_EQ(ret_.only_root().invalid, InvalidReason::kProtocolMismatch);
  EXPECT_EQ(sink_->size(), 0u);
  // The returned envelope still holds the undecoded bytes (a failed decode changes nothing).
  EXPECT_FALSE(ret_.returned[0]->data().is_typed());

  // Correctly labelled Pong bytes sent to the Ping port: mismatched hash.
  RecordingReturn ret2;
  mbx_->post_unchecked(bytes_to_port(handler<MbxPing>(), wire::type_hash<MbxPong>(), pong_bytes),
                       ret2);
  EXPECT_EQ(ret2.only_root().invalid, InvalidReason::kProtocolMismatch);

  // Well-typed bytes are decoded and delivered as the typed value.
  mbx_->post_unchecked(
      bytes_to_port(handler<MbxPing>(), wire::type_hash<MbxPing>(), must(wire::encode(MbxPing{9}))),
      ret_);
  ASSERT_EQ(sink_->size(), 1u);
  EXPECT_TRUE(sink_->delivered[0]->data().is_typed());
  EXPECT_EQ(sink_->delivered[0]->data().get<MbxPing>()->n, 9);
}

TEST_F(MailboxTest, R_MBX_4_EphemeralPortMismatchKeepsThePort) {
  auto port_sink = std::make_shared<RecordingSink>();
  uint64_t index = open(port_sink, /*once=*/true);
  mbx_->post_unchecked(
      bytes_to_port(Port::ephemeral(index), wire::type_hash<MbxPing>(), std::string("\x01", 1)),
      ret_);
  EXPECT_EQ(ret_.only_root().invalid, InvalidReason::kProtocolMismatch);
  mbx_->post_unchecked(to_port(Port::ephemeral(index), MbxPong{"x"}), ret_);
  ASSERT_EQ(ret_.returned.size(), 2u);
  EXPECT_EQ(ret_.returned[1]->root_failure()->invalid, InvalidReason::kProtocolMismatch);

  // Even a once port is still there: a mismatch is not its one delivery.
  RecordingReturn ok;
  mbx_->post_unchecked(to_port(Port::ephemeral(index), MbxPing{4}), ok);
  EXPECT_TRUE(ok.returned.empty());
  ASSERT_EQ(port_sink->size(), 1u);
  EXPECT_EQ(port_sink->delivered[0]->data().get<MbxPing>()->n, 4);
}

TEST_F(MailboxTest, R_MBX_4_TruncatedBytesAreProtocolMismatchAndMailboxKeepsWorking) {
  const std::string full = must(wire::encode(MbxPong{"a message long enough to cut"}));
  auto port_sink = std::make_shared<RecordingSink>();
  uint64_t index = mbx_->open_port(wire::type_hash<MbxPong>(), &decode_as<MbxPong>, port_sink,
                                   /*once=*/false);
  for (size_t len = 0; len < full.size(); ++len) {
    for (Port port : {handler<MbxPong>(), Port::ephemeral(index)}) {
      RecordingReturn ret;
      mbx_->post_unchecked(bytes_to_port(port, wire::type_hash<MbxPong>(), full.substr(0, len)),
                           ret);
      ASSERT_EQ(ret.returned.size(), 1u) << "prefix " << len << " of " << full.size();
      EXPECT_EQ(ret.returned[0]->root_failure()->invalid, InvalidReason::kProtocolMismatch);
    }
  }
  // Trailing garbage is refused too.
  RecordingReturn trailing;
  mbx_->post_unchecked(bytes_to_port(handler<MbxPong>(), wire::type_hash<MbxPong>(), full + "zz"),
                       trailing);
  EXPECT_EQ(trailing.only_root().invalid, InvalidReason::kProtocolMismatch);
  EXPECT_EQ(sink_->size(), 0u);
  EXPECT_EQ(port_sink->size(), 0u);

  RecordingReturn ok;
  mbx_->post_unchecked(bytes_to_port(handler<MbxPong>(), wire::type_hash<MbxPong>(), full), ok);
  mbx_->post_unchecked(bytes_to_port(Port::ephemeral(index), wire::type_hash<MbxPong>(), full), ok);
  EXPECT_TRUE(ok.returned.empty());
  ASSERT_EQ(sink_->size(), 1u);
  ASSERT_EQ(port_sink->size(), 1u);
  EXPECT_EQ(port_sink->delivered[0]->data().get<MbxPong>()->text, "a message long enough to cut");
}

// --- R-MBX-5: once ports -------------------------------------------------------------------------

TEST_F(MailboxTest, R_MBX_5_OncePortDeliversOnceThenPortGone) {
  auto port_sink = std::make_shared<RecordingSink>();
  uint64_t index = open(port_sink, /*once=*/true);
  mbx_->post_unchecked(to_port(Port::ephemeral(index), MbxPing{1}), ret_);
  EXPECT_TRUE(ret_.returned.empty());
  mbx_->post_unchecked(to_port(Port::ephemeral(index), MbxPing{2}), ret_);
  ASSERT_EQ(port_sink->size(), 1u);
  EXPECT_EQ(port_sink->delivered[0]->data().get<MbxPing>()->n, 1);
  DeliveryFailure root = ret_.only_root();
  EXPECT_EQ(root.kind, FailureKind::kPortGone) << "the sink is alive; the once port is spent";
  EXPECT_EQ(root.message_type, "test.runtime.mailbox.Ping");
}

TEST_F(MailboxTest, R_MBX_5_OrdinaryPortDeliversRepeatedly) {
  auto port_sink = std::make_shared<RecordingSink>();
  uint64_t index = open(port_sink);
  for (int i = 0; i < 5; ++i)
    mbx_->post_unchecked(to_port(Port::ephemeral(index), MbxPing{i}), ret_);
  EXPECT_TRUE(ret_.returned.empty());
  ASSERT_EQ(port_sink->size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(port_sink->delivered[i]->data().get<MbxPing>()->n, i);
  EXPECT_EQ(proc_.stats().delivered, 5u);
}

// A request whose envelope comes back names its reply port in a header; the mailbox completes that
// port with the failure at once instead of letting the requester time out.
TEST_F(MailboxTest, ReturnedRequestFailsItsReplyPortAtOnce) {
  auto reply_sink = std::make_shared<RecordingSink>();
  uint64_t reply = open(reply_sink, /*once=*/true);
  auto request =
      MessageEnvelope::make(mbx_->owner(), proc_.actor_addr(uid("ghost")).port(handler<MbxPing>()),
                            wire::Any::make(MbxPing{1}));
  request->headers().set(kReplyPortHeader, reply);
  request->add_failure(DeliveryFailure::invalid_reference("ghost", InvalidReason::kActorNotExist));
  auto returned =
      MessageEnvelope::make(proc_.system_addr(), mbx_->port_addr(handler<UndeliverableEnvelope>()),
                            wire::Any::make(UndeliverableEnvelope{std::move(request)}));
  mbx_->post_unchecked(std::move(returned), ret_);

  EXPECT_TRUE(ret_.returned.empty());
  EXPECT_EQ(sink_->size(), 0u) << "the failure went to the waiting request, not the handler";
  ASSERT_EQ(reply_sink->failures.size(), 1u);
  EXPECT_EQ(reply_sink->failures[0].invalid, InvalidReason::kActorNotExist);
  // The reply port is spent: a late reply is PortGone.
  RecordingReturn late;
  mbx_->post_unchecked(to_port(Port::ephemeral(reply), MbxPing{2}), late);
  EXPECT_EQ(late.only_root().kind, FailureKind::kPortGone);
}

// --- R-PORT-1: ephemeral indices -----------------------------------------------------------------

TEST_F(MailboxTest, R_PORT_1_IndicesStartAtZeroGrowAndAreNeverReused) {
  auto port_sink = std::make_shared<RecordingSink>();
  EXPECT_EQ(open(port_sink), 0u);
  EXPECT_EQ(open(port_sink), 1u);
  EXPECT_EQ(open(port_sink), 2u);
  mbx_->close_port(1);
  mbx_->close_port(2);
  mbx_->close_port(0);
  EXPECT_EQ(open(port_sink), 3u) << "closed indices are never handed out again";
  EXPECT_EQ(open(port_sink, /*once=*/true), 4u);

  // A message for a closed index does not reach the port that came after it.
  mbx_->post_unchecked(to_port(Port::ephemeral(1), MbxPing{1}), ret_);
  EXPECT_EQ(ret_.only_root().kind, FailureKind::kPortGone);
  EXPECT_EQ(port_sink->size(), 0u);
}

TEST_F(MailboxTest, R_PORT_1_ConcurrentOpensGetDistinctIndices) {
  constexpr int kThreads = 4;
  constexpr int kEach = 250;
  auto port_sink = std::make_shared<RecordingSink>();
  std::vector<std::vector<uint64_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) got[t].push_back(open(port_sink));
    });
  }
  for (auto& th : threads) th.join();
  std::set<uint64_t> all;
  for (const auto& v : got) all.insert(v.begin(), v.end());
  ASSERT_EQ(all.size(), size_t{kThreads * kEach});
  EXPECT_EQ(*all.begin(), 0u);
  EXPECT_EQ(*all.rbegin(), uint64_t{kThreads * kEach - 1});
}

// --- R-PORT-2: one handler port per type ---------------------------------------------------------

TEST(MailboxValidate, R_PORT_2_RejectsATableBindingOneTypeTwice) {
  HandlerTable twice{
      {wire::type_hash<MbxPing>(), &decode_as<MbxPing>},
      {wire::type_hash<MbxPong>(), &decode_as<MbxPong>},
      {wire::type_hash<MbxPing>(), &decode_as<MbxPing>},
  };
  absl::Status s = Mailbox::validate(twice);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_NE(s.message().find("test.runtime.mailbox.Ping"), std::string::npos) << s;

  EXPECT_TRUE(Mailbox::validate(handlers()).ok());
  EXPECT_TRUE(Mailbox::validate(HandlerTable{}).ok());
}

// --- R-ENV-3 on a mailbox: post is policy, post_unchecked mechanism ------------------------------

TEST_F(MailboxTest, R_ENV_3_MailboxPostExpiresAtTtlZero) {
  mbx_->post(MessageEnvelope::make(sender_, mbx_->port_addr(handler<MbxPing>()),
                                   wire::Any::make(MbxPing{1}), 0),
             ret_);
  EXPECT_EQ(ret_.only_root().kind, FailureKind::kExpired);
  EXPECT_EQ(sink_->size(), 0u);

  mbx_->post(MessageEnvelope::make(sender_, mbx_->port_addr(handler<MbxPing>()),
                                   wire::Any::make(MbxPing{2}), 1),
             ret_);
  ASSERT_EQ(sink_->size(), 1u);
  EXPECT_EQ(sink_->delivered[0]->ttl(), 0);
}

}  // namespace
}  // namespace postal::runtime
