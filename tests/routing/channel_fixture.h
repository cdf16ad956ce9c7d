// The fixture of the channel tests (channel_test.cc, channel_transfer_test.cc): two procs in one
// test process — alice (a Client on the sending proc) posts envelopes through a ChannelClient to
// bob's port on the receiving proc, whose ChannelServer delivers into it — and the helpers of
// tests that play one end of the wire themselves (RawPeer).
#pragma once

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "envelope_codec.h"
#include "frames_v2.h"
#include "gtest/gtest.h"
#include "postal/routing/channel_client.h"
#include "postal/routing/channel_server.h"
#include "postal/runtime/client.h"
#include "postal/runtime/port.h"
#include "support/must.h"
#include "support/raw_peer.h"
#include "support/wait_for.h"

namespace postal::routing::channel_test {

struct ChanMsg {
  int64_t n = 0;
  std::string pad;
  template <class A>
  void serialize(A& a) {
    a(n, pad);
  }
};

inline std::atomic<int> counted_serializations{0};
struct CountedMsg {
  int64_t n = 0;
  template <class A>
  void serialize(A& a) {
    counted_serializations.fetch_add(1);
    a(n);
  }
};

}  // namespace postal::routing::channel_test

POSTAL_MESSAGE(postal::routing::channel_test::ChanMsg, "test.routing.channel.Msg");
POSTAL_MESSAGE(postal::routing::channel_test::CountedMsg, "test.routing.channel.Counted");

namespace postal::routing::channel_test {

using runtime::ChannelAddr;
using runtime::EnvelopePtr;
using runtime::TransportReason;

constexpr absl::Duration kDeadline = absl::Seconds(20);
constexpr int kMany = 10'000;

using test_support::connect_raw;
using test_support::must;
using test_support::RawPeer;

inline runtime::ProcOptions quiet_proc() {
  runtime::ProcOptions o = runtime::ProcOptions::threads(1);
  o.scheduler.spin = absl::ZeroDuration();
  return o;
}

inline std::string unique_name() {
  static std::atomic<int> counter{0};
  return absl::StrCat("postal-chan-", ::getpid(), "-", counter.fetch_add(1));
}
// A socket file of this process's own name. A raw `LocalAcceptor` (below) leaves its
// file behind, and pids are reused: a file of that name from an earlier process is removed.
inline ChannelAddr ipc_path() {
  const std::string path = "/tmp/" + unique_name() + ".sock";
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
  return must(ChannelAddr::ipc(path));
}
inline ChannelAddr ipc_abstract() { return must(ChannelAddr::ipc_abstract(unique_name())); }
inline ChannelAddr tcp_any() { return must(ChannelAddr::tcp("127.0.0.1", 0)); }

class ChannelTest : public testing::Test {
 protected:
  ChannelTest()
      : sending_(quiet_proc()),
        receiving_(quiet_proc()),
        alice_(must(runtime::Client::attach(sending_, "alice"))),
        bob_(must(runtime::Client::attach(receiving_, "bob"))),
        port_(runtime::open_port<ChanMsg>(*bob_)) {}

  std::unique_ptr<ChannelServer> serve(ChannelAddr addr, ChannelOptions options = {}) {
    return must(ChannelServer::serve(io_, std::move(addr), receiving_, receiving_, options));
  }
  std::unique_ptr<ChannelClient> dial(const ChannelAddr& addr, ChannelOptions options = {}) {
    return must(ChannelClient::dial(io_, addr, sending_, options));
  }

  EnvelopePtr envelope(int64_t n, size_t pad = 0) {
    return runtime::MessageEnvelope::make(alice_->self_addr(), port_.handle.bind().addr(),
                                          wire::Any::make(ChanMsg{n, std::string(pad, 'x')}));
  }
  void post(ChannelClient& client, int64_t n, size_t pad = 0) {
    client.post(envelope(n, pad), sending_);
  }

  // Receives exactly `from`..`to`-1, in order.
  void expect_in_order(int64_t from, int64_t to) {
    for (int64_t n = from; n < to; ++n) {
      absl::StatusOr<ChanMsg> msg = port_.receiver.recv(kDeadline);
      ASSERT_TRUE(msg.ok()) << "waiting for " << n << ": " << msg.status();
      ASSERT_EQ(msg->n, n);
    }
  }
  void expect_nothing_more() {
    absl::StatusOr<ChanMsg> extra = port_.receiver.recv(absl::Milliseconds(100));
    EXPECT_FALSE(extra.ok()) << "unexpected message " << extra->n;
  }
  // The next envelope of alice's that came back, and its root failure.
  runtime::DeliveryFailure next_returned() {
    absl::StatusOr<EnvelopePtr> env = alice_->next_undeliverable(kDeadline);
    EXPECT_TRUE(env.ok()) << env.status();
    if (!env.ok() || (*env)->root_failure() == nullptr) return {};
    return *(*env)->root_failure();
  }

  // The next envelope of alice's that came back: its payload's n and its root failure.
  std::pair<int64_t, runtime::DeliveryFailure> next_returned_n() {
    absl::StatusOr<EnvelopePtr> env = alice_->next_undeliverable(kDeadline);
    EXPECT_TRUE(env.ok()) << env.status();
    if (!env.ok() || (*env)->root_failure() == nullptr) return {-1, {}};
    absl::StatusOr<ChanMsg> msg = (*env)->data().take<ChanMsg>();
    EXPECT_TRUE(msg.ok()) << msg.status();
    return {msg.ok() ? msg->n : -1, *(*env)->root_failure()};
  }
  void expect_nothing_returned() {
    absl::StatusOr<EnvelopePtr> env = alice_->next_undeliverable(absl::Milliseconds(100));
    EXPECT_FALSE(env.ok()) << "returned: "
                           << ((*env)->root_failure() ? (*env)->root_failure()->to_string() : "");
  }
  // Waits (with a deadline) until the client's acks have caught up to `n` unacked envelopes.
  static void wait_unacked(const ChannelClient& client, size_t n) {
    test_support::wait_for([&] { return client.unacked() == n; }, kDeadline);
    ASSERT_EQ(client.unacked(), n);
  }

  void deliver_many(ChannelAddr addr) {
    auto server = serve(addr);
    EXPECT_NE(server->local_addr().to_string(), "tcp://127.0.0.1:0");
    auto client = dial(server->local_addr());
    for (int n = 0; n < kMany; ++n) post(*client, n, n % 7 == 0 ? 3000 : 10);
    expect_in_order(0, kMany);
    expect_nothing_more();
  }

  IoThread io_;
  runtime::Proc sending_;
  runtime::Proc receiving_;
  std::unique_ptr<runtime::Client> alice_;
  std::unique_ptr<runtime::Client> bob_;
  runtime::OpenPort<ChanMsg> port_;
};

using LocalAcceptor = boost::asio::local::stream_protocol::acceptor;

// A fake server's next connection, or an unconnected peer after `timeout`.
inline std::optional<RawPeer> accept_within(LocalAcceptor& acceptor, absl::Duration timeout = kDeadline) {
  pollfd p{acceptor.native_handle(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) return std::nullopt;
  return RawPeer(acceptor.accept());
}

namespace v2 = internal::v2;

// The frames a test peer reads, decoded by kind.
inline v2::Hello as_hello(const RawPeer::Received& f) { return must(v2::decode_hello(f.body)); }
inline v2::Welcome as_welcome(const RawPeer::Received& f) { return must(v2::decode_welcome(f.body)); }
inline v2::Ack as_ack(const RawPeer::Received& f) { return must(v2::decode_ack(f.body)); }
inline v2::Reject as_reject(const RawPeer::Received& f) { return must(v2::decode_reject(f.body)); }

// The next frame, which must be of `kind`.
inline RawPeer::Received expect_kind(RawPeer& peer, v2::Kind kind) {
  std::optional<RawPeer::Received> f = peer.next();
  EXPECT_TRUE(f.has_value() && f->kind == kind)
      << "expected kind " << static_cast<int>(kind) << ", got "
      << (f ? absl::StrCat(static_cast<int>(f->kind)) : std::string("nothing"));
  return f && f->kind == kind ? *f : RawPeer::Received{kind, {}};
}

inline v2::Hello hello(uint64_t session, bool resuming = false, uint64_t first_unacked = 0) {
  v2::Hello h;
  h.client_session = session;
  h.resuming = resuming;
  h.first_unacked_seq = first_unacked;
  return h;
}

inline v2::Welcome welcome(uint64_t next_expected) {
  v2::Welcome w;
  w.next_expected = next_expected;
  return w;
}

// The sending half of a session, for a test playing the client.
struct TestSession {
  v2::EnvelopeEncoder encoder;
  std::string data(uint64_t seq, runtime::MessageEnvelope& env) {
    return test_support::data_frame(encoder, seq, env);
  }
};

// The receiving half of a session, for a test playing the server: a DATA frame's seq and n.
struct SeenData {
  uint64_t seq = 0;
  int64_t n = -1;
};
struct TestDecoder {
  v2::EnvelopeDecoder decoder;
  SeenData next(RawPeer& peer) {
    RawPeer::Received f = expect_kind(peer, v2::Kind::kData);
    SeenData seen;
    absl::StatusOr<EnvelopePtr> env = decoder.decode(f.body, seen.seq);
    EXPECT_TRUE(env.ok()) << env.status();
    if (!env.ok()) return seen;
    absl::StatusOr<ChanMsg> msg = (*env)->data().take<ChanMsg>();
    seen.n = msg.ok() ? msg->n : -1;
    return seen;
  }
};

}  // namespace postal::routing::channel_test
