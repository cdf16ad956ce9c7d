// Past one machine, for real: three network namespaces (`ip netns`, as root) joined by a bridge,
// a three-node NATS cluster — one node in each — and a `postal proc` in each of the first two,
// each attached to the node of its own namespace. Traffic between the procs crosses the
// cluster's routes; a NATS node is killed with kill -9 mid-traffic and the traffic goes on with
// nothing lost silently. Skipped, saying why, where namespaces cannot be made (not root, no `ip`).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "postal/actors/system_actors.h"
#include "postal/routing/node.h"
#include "postal/routing/workload.h"
#include "postal/runtime/client.h"
#include "postal/runtime/port.h"
#include "support/child_process.h"
#include "support/nats_server.h"
#include "support/scratch_dir.h"
#include "support/wait_for.h"

namespace postal::routing {
namespace {

using runtime::ChannelAddr;
using test_support::ChildProcess;

constexpr absl::Duration kDeadline = absl::Seconds(120);

// `command` through the shell; whether it exited 0.
bool run(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

// A set-up command: `command`, tried up to three times (the first `ip netns add` after boot
// mounts /run/netns, and a module loading on first use can refuse once; neither is what the test
// is about). An empty string when it succeeded, else what the last try printed.
std::string setup(const std::string& command) {
  std::string out;
  for (int attempt = 0; attempt < 3; ++attempt) {
    out.clear();
    FILE* p = ::popen((command + " 2>&1").c_str(), "r");
    if (p == nullptr) return "popen failed: " + command;
    char buf[256];
    while (::fgets(buf, sizeof(buf), p) != nullptr) out += buf;
    if (::pclose(p) == 0) return "";
    // A try that failed after it made the thing (a namespace, a link, an address) leaves it.
    if (attempt > 0 && out.find("File exists") != std::string::npos) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return absl::StrCat("`", command, "` failed 3 times: ", out.empty() ? "(no output)" : out);
}

size_t lines_with(const std::filesystem::path& log, std::string_view text) {
  size_t n = 0;
  for (const std::string& l : test_support::log_lines(log)) n += l.find(text) != std::string::npos;
  return n;
}

class NatsNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test_support::NatsServer::binary().empty()) GTEST_FAIL() << test_support::NatsServer::kMissing;
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to make network namespaces (ip netns)";
    tag_ = std::to_string(::getpid() % 10000);
    subnet_ = absl::StrCat("10.77.", ::getpid() % 250, ".");
    bridge_ = "pbr" + tag_;
    if (!run("ip link add " + bridge_ + " type bridge")) {
      GTEST_SKIP() << "cannot make a bridge with `ip link` here (no CAP_NET_ADMIN?)";
    }
    made_bridge_ = true;
    ASSERT_EQ(setup(absl::StrCat("ip addr add ", subnet_, "254/24 dev ", bridge_)), "");
    ASSERT_EQ(setup("ip link set " + bridge_ + " up"), "");
    for (int i = 1; i <= 3; ++i) {
      const std::string ns = this->ns(i), veth = absl::StrCat("pv", tag_, "n", i);
      ASSERT_EQ(setup("ip netns add " + ns), "");
      namespaces_.push_back(ns);
      ASSERT_EQ(setup(absl::StrCat("ip link add ", veth, " type veth peer name ", veth, "p")), "");
      ASSERT_EQ(setup(absl::StrCat("ip link set ", veth, "p netns ", ns)), "");
      ASSERT_EQ(setup(absl::StrCat("ip link set ", veth, " master ", bridge_, " up")), "");
      ASSERT_EQ(setup(absl::StrCat("ip netns exec ", ns, " ip addr add ", ip(i), "/24 dev ", veth, "p")), "");
      ASSERT_EQ(setup(absl::StrCat("ip netns exec ", ns, " ip link set ", veth, "p up")), "");
      ASSERT_EQ(setup(absl::StrCat("ip netns exec ", ns, " ip link set lo up")), "");
    }
    for (int i = 1; i <= 3; ++i) start_node(i);
    // A full mesh: every node has routes to the two others.
    for (int i = 1; i <= 3; ++i) {
      ASSERT_TRUE(test_support::wait_for(
          [&] { return lines_with(node_log(i), "Route connection created") >= 2; }, kDeadline))
          << "the cluster did not form; see " << node_log(i);
    }
  }

  void TearDown() override {
    if (HasFailure()) {  // the nodes' and procs' logs outlive the scratch folder
      const std::filesystem::path kept = "/tmp/postal-netns-failed-" + tag_;
      std::error_code ec;
      std::filesystem::copy(scratch_.path(), kept, std::filesystem::copy_options::recursive, ec);
      ADD_FAILURE() << "logs kept in " << kept << (ec ? " (copy failed: " + ec.message() + ")" : "");
    }
    node_.reset();
    procs_.clear();
    nodes_.clear();
    for (const std::string& ns : namespaces_) run("ip netns del " + ns);
    if (made_bridge_) run("ip link del " + bridge_);
  }

  std::string ns(int i) const { return absl::StrCat("pn", tag_, "n", i); }
  std::string ip(int i) const { return absl::StrCat(subnet_, i); }
  std::string url(int i) const { return absl::StrCat("nats://", ip(i), ":4222"); }
  std::filesystem::path node_log(int i) const { return scratch_.path() / absl::StrCat("n", i, ".log"); }

  void start_node(int i) {
    std::vector<std::string> routes;
    for (int j = 1; j <= 3; ++j) routes.push_back(absl::StrCat("nats://", ip(j), ":6222"));
    std::filesystem::remove(node_log(i));
    nodes_.resize(3);
    nodes_[i - 1] = std::make_unique<ChildProcess>(
        "/usr/sbin/ip",
        std::vector<std::string>{"netns", "exec", ns(i), test_support::NatsServer::binary(), "-a",
                                 ip(i), "-p", "4222", "-n", absl::StrCat("n", i), "--cluster_name",
                                 "postal", "--cluster", absl::StrCat("nats://", ip(i), ":6222"),
                                 "--routes", absl::StrJoin(routes, ",")},
        node_log(i));
  }

  // `postal proc` named `name` in namespace i, serving a subject on that namespace's node.
  runtime::ProcAddr start_proc(int i, const std::string& name) {
    const std::filesystem::path log = scratch_.path() / (name + ".log");
    procs_.push_back(std::make_unique<ChildProcess>(
        "/usr/sbin/ip",
        std::vector<std::string>{"netns", "exec", ns(i), POSTAL_BINARY, "proc", "--name", name,
                                 "--listen", absl::StrCat(url(i), "/postal.nn", tag_, ".", name),
                                 "--workers", "1"},
        log));
    EXPECT_TRUE(test_support::wait_log_lines(log, "POSTAL-READY", 1, kDeadline)) << log;
    for (const std::string& l : test_support::log_lines(log)) {
      if (l.rfind("POSTAL-READY ", 0) != 0) continue;
      std::istringstream words(l.substr(13));
      std::string addr;
      words >> addr;
      if (absl::StatusOr<runtime::ProcAddr> a = runtime::ProcAddr::parse(addr); a.ok()) return *a;
    }
    ADD_FAILURE() << name << " did not report its address; see " << log;
    return {};
  }

  std::string tag_, subnet_, bridge_;
  bool made_bridge_ = false;
  std::vector<std::string> namespaces_;
  test_support::ScratchDir scratch_;
  std::vector<std::unique_ptr<ChildProcess>> nodes_;
  std::vector<std::unique_ptr<ChildProcess>> procs_;
  std::unique_ptr<Node> node_;  // the test's own, in the root namespace, on node 3
};

TEST_F(NatsNetnsTest, R_CHAN_2_ProcsInTwoNamespacesTalkThroughTheClusterAndSurviveANodeKill) {
  const runtime::ProcAddr alpha = start_proc(1, "alpha");
  const runtime::ProcAddr beta = start_proc(2, "beta");
  NodeOptions o;
  o.id = runtime::ProcId{runtime::Uid::singleton(*runtime::Label::parse("tester"))};
  o.listen = *ChannelAddr::parse(absl::StrCat(url(3), "/postal.nn", tag_, ".tester"));
  o.scheduler.workers = 1;
  absl::StatusOr<std::unique_ptr<Node>> node = Node::start(std::move(o));
  ASSERT_TRUE(node.ok()) << node.status();
  node_ = *std::move(node);
  auto client = runtime::Client::attach(node_->proc(), "tester");
  ASSERT_TRUE(client.ok()) << client.status();
  register_workload_actors();
  auto driver = actors::spawn_remote(**client, alpha, std::string(kDriverType), "driver", {},
                                     kDeadline);
  ASSERT_TRUE(driver.ok()) << driver.status();
  auto echo = actors::spawn_remote(**client, beta, std::string(kEchoType), "echo", {}, kDeadline);
  ASSERT_TRUE(echo.ok()) << echo.status();

  auto drive = [&](std::string pattern, uint64_t n) {
    DriveRequest r;
    r.pattern = std::move(pattern);
    r.targets = {payload_port(*echo)};
    r.messages = n;
    r.size = 64;
    return runtime::request(**client, drive_port(*driver), std::move(r), kDeadline);
  };
  // alpha (namespace 1, node 1) → beta (namespace 2, node 2): across the cluster's routes.
  absl::StatusOr<DriveResult> warm = drive("ping-pong", 200);
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_TRUE(warm->error.empty()) << warm->error;
  EXPECT_EQ(warm->messages, 200u);

  // Node 1 — alpha's — dies mid-stream; alpha's NATS connections fail over to nodes 2 and 3
  // (they learned the cluster's addresses), the tunnels cut, the channels resume their sessions.
#if defined(__SANITIZE_ADDRESS__)
  constexpr uint64_t kStream = 50'000;
#else
  constexpr uint64_t kStream = 300'000;  // a few seconds: the kill lands mid-stream
#endif
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // chaos timing, not a wait
    nodes_[0]->kill();
  });
  absl::StatusOr<DriveResult> r = drive("stream", kStream);
  killer.join();
  ASSERT_TRUE(r.ok()) << r.status();
  // Nothing lost silently: every message arrived, or came back to the driver as a failure.
  EXPECT_EQ(r->sent, kStream);
  EXPECT_EQ(r->unresolved, 0u);
  EXPECT_EQ(r->messages + r->failures, kStream)
      << "messages " << r->messages << ", failures " << r->failures << ": " << r->error;
  EXPECT_EQ(r->out_of_order, 0u);
  // The kill landed mid-stream: alpha's channel lost its connection and resumed.
  EXPECT_GT(lines_with(scratch_.path() / "alpha.log", "reconnected"), 0u)
      << "the stream ended before node 1 was killed; see " << scratch_.path() / "alpha.log";
  std::printf("stream %.2f s; after the kill: %llu delivered, %llu returned (%llu maybe delivered)\n",
              r->seconds(),
              static_cast<unsigned long long>(r->messages),
              static_cast<unsigned long long>(r->failures),
              static_cast<unsigned long long>(r->possibly_delivered));
  // And the path works again afterwards.
  absl::StatusOr<DriveResult> after = drive("ping-pong", 200);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(after->error.empty()) << after->error;
  EXPECT_EQ(after->messages, 200u);
}

}  // namespace
}  // namespace postal::routing
