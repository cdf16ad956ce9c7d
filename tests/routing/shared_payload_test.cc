// Large payloads that are never copied (issue 9, wire.md §6.7 and §14.3): the sender's channel
// writes wire::SharedBytes fields from where they are (gathered writes) and the receiver keeps
// large payloads as slices of its reference-counted receive buffers. Ownership must hold: what
// the channel writes, and writes again after a reconnect, stays valid after the sender let go of
// its value; what a receiver holds stays intact while later frames are read.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "channel_fixture.h"
#include "postal/wire/shared_bytes.h"

namespace postal::routing::channel_test {

struct SharedMsg {
  int64_t n = 0;
  wire::SharedBytes body;
  std::string tail;
  template <class A>
  void serialize(A& a) {
    a(n, body, tail);
  }
};

}  // namespace postal::routing::channel_test

POSTAL_MESSAGE(postal::routing::channel_test::SharedMsg, "test.routing.channel.SharedMsg");

namespace postal::routing::channel_test {
namespace {

// Sizes around the thresholds: copied when sent (< 4 KiB); gathered when sent and copied on
// receipt (payload ≤ 64 KiB); gathered and kept as a slice of the receive buffer (the rest); all
// under the 256 KiB chunk size.
size_t size_of(int64_t n) {
  static constexpr size_t kSizes[] = {100, 5000, 20'000, 64 << 10, 200'000};
  return kSizes[n % 5];
}
// Bytes that depend on n and the position: a piece of another message or place shows.
std::string body_of(int64_t n) {
  std::string s(size_of(n), '\0');
  for (size_t i = 0; i < s.size(); ++i)
    s[i] = static_cast<char>((n * 131 + i * 7 + i / 509) & 0xff);
  return s;
}

class SharedPayloadTest : public ChannelTest {
 protected:
  SharedPayloadTest() : shared_(runtime::open_port<SharedMsg>(*bob_)) {}

  // The value is built here and dropped by the caller at once: only the envelope holds it.
  void post_shared(ChannelClient& client, int64_t n) {
    client.post(runtime::MessageEnvelope::make(
                    alice_->self_addr(), shared_.handle.bind().addr(),
                    wire::Any::make(SharedMsg{n, wire::SharedBytes(body_of(n)), "tail"})),
                sending_);
  }
  // Receives `from`..`to`-1 in order and keeps them.
  void receive(int64_t from, int64_t to, std::vector<SharedMsg>& kept) {
    for (int64_t n = from; n < to; ++n) {
      absl::StatusOr<SharedMsg> msg = shared_.receiver.recv(kDeadline);
      ASSERT_TRUE(msg.ok()) << "waiting for " << n << ": " << msg.status();
      ASSERT_EQ(msg->n, n);
      kept.push_back(*std::move(msg));
    }
  }
  static void expect_intact(const std::vector<SharedMsg>& kept) {
    for (const SharedMsg& m : kept) {
      ASSERT_EQ(m.body.size(), size_of(m.n)) << m.n;
      ASSERT_TRUE(m.body.view() == body_of(m.n)) << "the body of " << m.n << " changed";
      ASSERT_EQ(m.tail, "tail");
    }
  }

  runtime::OpenPort<SharedMsg> shared_;
};

TEST_F(SharedPayloadTest, R_CHAN_2_GatheredPayloadsRetransmitTheSameBytesAfterReconnects) {
  constexpr int kCount = 600;
  auto server = serve(ipc_path());
  auto client = dial(server->local_addr());
  std::thread poster([&] {
    for (int n = 0; n < kCount; ++n) {
      post_shared(*client, n);
      if (n % 100 == 50) server->drop_connections();  // mid-stream: unacked frames are resent
    }
  });
  std::vector<SharedMsg> kept;
  receive(0, kCount, kept);
  poster.join();
  expect_intact(kept);
  expect_nothing_returned();
  EXPECT_FALSE(client->closed());
}

TEST_F(SharedPayloadTest, R_CHAN_4_SlicedPayloadsStayIntactWhileLaterFramesAreRead) {
  constexpr int kCount = 400;
  for (const ChannelAddr& addr : {ipc_abstract(), tcp_any()}) {
    auto server = serve(addr);
    auto client = dial(server->local_addr());
    for (int n = 0; n < kCount; ++n) post_shared(*client, n);
    std::vector<SharedMsg> kept;  // every body held while the rest arrive
    receive(0, kCount, kept);
    expect_intact(kept);
  }
}

// The send buffer of this process's socket connected to the Unix socket at `path` (the
// client's end: its peer is the listening path), or -1 when there is none.
int send_buffer_of_socket_to(std::string_view path) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_un peer{};
    socklen_t len = sizeof(peer);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
    if (peer.sun_family != AF_UNIX || std::string_view(peer.sun_path) != path) continue;
    int size = 0;
    socklen_t size_len = sizeof(size);
    if (::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &size_len) != 0) return -1;
    return size;
  }
  return -1;
}

int64_t sysctl_value(const char* file) {
  std::ifstream in(file);
  int64_t v = 0;
  in >> v;
  return v;
}

// A wide ipc send buffer makes the sending worker write every small frame itself (it never
// fills), which cost the 64 B stream ~10 % (decisions.md): a channel widens it only once it sent
// a payload of 64 KiB or more, and then keeps it on every later connection.
TEST_F(SharedPayloadTest, AnIpcChannelWidensItsSendBufferOnlyOnceItSentALargePayload) {
  if (sysctl_value("/proc/sys/net/core/wmem_max") <=
      sysctl_value("/proc/sys/net/core/wmem_default")) {
    GTEST_SKIP() << "net.core.wmem_max is not above wmem_default: no send buffer can be widened";
  }
  const ChannelAddr addr = ipc_path();
  const std::string path(addr.path());
  auto server = serve(addr);
  auto client = dial(server->local_addr());
  std::vector<SharedMsg> kept;
  post_shared(*client, 0);  // 100 bytes
  post_shared(*client, 2);  // 20,000 bytes
  receive(0, 1, kept);
  ASSERT_EQ(shared_.receiver.recv(kDeadline)->n, 2);
  const int small = send_buffer_of_socket_to(path);
  ASSERT_GT(small, 0) << "no socket of this process is connected to " << path;

  post_shared(*client, 3);  // 64 KiB
  ASSERT_EQ(shared_.receiver.recv(kDeadline)->n, 3);
  const int wide = send_buffer_of_socket_to(path);
  EXPECT_GT(wide, small) << "a 64 KiB payload did not widen the send buffer";

  server->drop_connections();  // the client dials again: its new socket is widened at once
  post_shared(*client, 5);
  ASSERT_EQ(shared_.receiver.recv(kDeadline)->n, 5);
  EXPECT_EQ(send_buffer_of_socket_to(path), wide);
  expect_nothing_returned();
}

TEST_F(SharedPayloadTest, R_ENV_4_AReturnedEnvelopeStillDecodesAfterTheChannelLetItGo) {
  ChannelOptions options;
  options.delivery_timeout = absl::Milliseconds(300);
  auto server = serve(ipc_path(), options);
  auto client = dial(server->local_addr(), options);
  server->vanish();  // nothing is acked: the envelope comes back with its gathered bytes
  server.reset();
  post_shared(*client, 3);  // 64 KiB
  absl::StatusOr<EnvelopePtr> env = alice_->next_undeliverable(kDeadline);
  ASSERT_TRUE(env.ok()) << env.status();
  absl::StatusOr<SharedMsg> msg = (*env)->data().take<SharedMsg>();
  ASSERT_TRUE(msg.ok()) << msg.status();
  EXPECT_EQ(msg->n, 3);
  EXPECT_TRUE(msg->body.view() == body_of(3));
}

}  // namespace
}  // namespace postal::routing::channel_test
