// NatsConn (routing/src/nats_conn.h) against a real nats-server: what one libnats connection of
// the routing layer guarantees on its own, below the tunnel.
#include "nats_conn.h"

#include <algorithm>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "support/nats_server.h"
#include "support/scratch_dir.h"

namespace postal::routing::internal {
namespace {

using test_support::NatsServer;

// R-FLOW-3, "never stalls anything else": a publish writes on the calling thread (a worker, for
// a nats:// channel). When the server stops reading, its socket fills; each publish must then
// come back within the write deadline (and fail, or be buffered while libnats reconnects),
// never wait for the server for ever.
TEST(NatsConnTest, R_FLOW_3_APublishToAServerThatStopsReadingReturnsWithinTheWriteDeadline) {
  if (NatsServer::binary().empty()) GTEST_FAIL() << NatsServer::kMissing;
  test_support::ScratchDir scratch;
  NatsServer server(scratch.path() / "nats");
  ASSERT_TRUE(server.ready()) << "see " << server.log();
  NatsConn::Options options;
  options.url = server.url();
  options.timeout = absl::Seconds(5);
  options.name = "write deadline test";
  options.write_deadline = absl::Milliseconds(500);
  absl::StatusOr<std::unique_ptr<NatsConn>> conn = NatsConn::connect(std::move(options));
  ASSERT_TRUE(conn.ok()) << conn.status();

  server.pause();
  const std::string body(256 << 10, 'x');
  absl::Duration longest;
  bool failed = false;
  absl::Notification done;
  std::thread publisher([&] {
    // Loopback socket buffers hold a few MiB, libnats' reconnect buffer 8 MiB: 256 MiB is far
    // past both, so the loop ends with a refused publish.
    for (int i = 0; i < 1024 && !failed; ++i) {
      const absl::Time start = absl::Now();
      failed = natsConnection_Publish((*conn)->nc(), "test.deadline", body.data(),
                                      static_cast<int>(body.size())) != NATS_OK;
      longest = std::max(longest, absl::Now() - start);
    }
    done.Notify();
  });
  const bool ended = done.WaitForNotificationWithTimeout(absl::Seconds(30));
  server.resume();  // a publish stuck in the socket can finish now
  publisher.join();
  EXPECT_TRUE(ended) << "a publish waited for the stopped server for over 30 s";
  EXPECT_TRUE(failed) << "256 MiB published to a server that reads nothing";
  EXPECT_LT(longest, absl::Seconds(3)) << "one publish waited " << longest;
}

}  // namespace
}  // namespace postal::routing::internal
