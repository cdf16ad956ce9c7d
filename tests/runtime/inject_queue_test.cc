// Tests for InjectQueue (inject_queue.h): the scheduler's lock-free queue of runnables made
// runnable off the workers. Several producers and several consumers run at once; every node must
// come out exactly once, and each producer's nodes in the order it pushed them.
#include "postal/runtime/inject_queue.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace postal::runtime {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(30);

struct Node : InjectLink {
  int producer = 0;
  int seq = 0;
  std::atomic<int> popped{0};
  std::atomic<bool> held{false};  // between a consumer's pop and its next push
};

TEST(InjectQueue, EmptyQueuePopsNothing) {
  InjectQueue q;
  EXPECT_FALSE(q.maybe_nonempty());
  EXPECT_EQ(q.try_pop(), nullptr);
}

TEST(InjectQueue, OneThreadPopsInPushOrderAndEmptiesAgain) {
  InjectQueue q;
  std::vector<Node> nodes(5);
  for (Node& n : nodes) q.push(&n);
  EXPECT_TRUE(q.maybe_nonempty());
  for (Node& n : nodes) EXPECT_EQ(q.try_pop(), &n);
  EXPECT_EQ(q.try_pop(), nullptr);
  EXPECT_FALSE(q.maybe_nonempty());
  // A popped node may be pushed again (an actor made runnable once more).
  q.push(&nodes[2]);
  EXPECT_EQ(q.try_pop(), &nodes[2]);
  EXPECT_FALSE(q.maybe_nonempty());
}

// Would fail if a node were lost (the total is never reached before the deadline), popped twice
// (a count above one), or a producer's nodes overtook each other at one consumer.
TEST(InjectQueue, ConcurrentProducersAndConsumersLoseAndDuplicateNothing) {
  constexpr int kProducers = 3;
  constexpr int kConsumers = 3;
  constexpr int kPerProducer = 200000;
  constexpr int kTotal = kProducers * kPerProducer;
  InjectQueue q;
  std::vector<std::vector<Node>> nodes;
  for (int p = 0; p < kProducers; ++p) {
    nodes.emplace_back(kPerProducer);
    for (int i = 0; i < kPerProducer; ++i) {
      nodes[p][i].producer = p;
      nodes[p][i].seq = i;
    }
  }
  std::atomic<int> total{0};
  std::atomic<bool> out_of_order{false};
  const absl::Time deadline = absl::Now() + kDeadline;
  std::vector<std::thread> threads;
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&] {
      std::vector<int> last(kProducers, -1);
      while (total.load() < kTotal && absl::Now() < deadline) {
        InjectLink* l = q.try_pop();
        if (l == nullptr) continue;
        Node* n = static_cast<Node*>(l);
        n->popped.fetch_add(1);
        if (n->seq <= last[n->producer]) out_of_order.store(true);
        last[n->producer] = n->seq;
        total.fetch_add(1);
      }
    });
  }
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (Node& n : nodes[p]) q.push(&n);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(total.load(), kTotal);
  EXPECT_FALSE(out_of_order.load());
  int not_once = 0;
  for (const auto& v : nodes) {
    for (const Node& n : v) not_once += n.popped.load() != 1;
  }
  EXPECT_EQ(not_once, 0);
  EXPECT_EQ(q.try_pop(), nullptr);
  EXPECT_FALSE(q.maybe_nonempty());
}

// The scheduler's pattern: a few nodes, each pushed again as soon as it is popped (an actor made
// runnable again), by the consumer itself or by another producer. Each node carries a token count
// that only the popping consumer moves; a lost node stops its tokens, a duplicate one runs twice.
TEST(InjectQueue, NodesPushedAgainAfterEachPopAreNeverLostOrDuplicated) {
  constexpr int kNodes = 8;
  constexpr int kRoundsPerNode = 100000;
  InjectQueue q;
  std::vector<Node> nodes(kNodes);
  std::atomic<int> inside{0};
  std::atomic<bool> twice{false};
  std::atomic<int> finished{0};
  for (Node& n : nodes) q.push(&n);
  const absl::Time deadline = absl::Now() + kDeadline;
  std::vector<std::thread> threads;
  for (int c = 0; c < 3; ++c) {
    threads.emplace_back([&] {
      while (finished.load() < kNodes && absl::Now() < deadline) {
        InjectLink* l = q.try_pop();
        if (l == nullptr) continue;
        Node* n = static_cast<Node*>(l);
        // Only one thread may hold a node between its pop and its next push.
        if (n->held.exchange(true)) twice.store(true);
        inside.fetch_add(1);
        const int rounds = n->popped.fetch_add(1) + 1;
        n->held.store(false);
        if (rounds < kRoundsPerNode) {
          q.push(n);
        } else {
          finished.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(twice.load());
  EXPECT_EQ(finished.load(), kNodes);
  EXPECT_EQ(inside.load(), kNodes * kRoundsPerNode);
  for (const Node& n : nodes) EXPECT_EQ(n.popped.load(), kRoundsPerNode);
  EXPECT_FALSE(q.maybe_nonempty());
}

}  // namespace
}  // namespace postal::runtime
