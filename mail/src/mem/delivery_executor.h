// DeliveryExecutor: the threads that run the mem provider's subscription callbacks (internal).
//
// Work is posted to strands: tasks of one strand run one at a time, in order; different strands
// run in parallel. Threads are started on demand, when work is ready and no thread is idle, up
// to `max_threads`; past that, ready strands wait their turn. A callback that blocks holds one
// thread, so other subscriptions keep flowing on the others.
//
// `shutdown()` stops accepting work, drops queued tasks without running them (a strand's that is
// running when it stops: once its running task returns), and joins the
// threads — except the calling thread, when shutdown runs on one of them (it is detached and
// exits after its task). Each thread holds the shared state, so nothing dangles.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace postal::mail::mem_internal {

class DeliveryExecutor {
 public:
  using Task = absl::AnyInvocable<void() &&>;
  struct Strand;

  explicit DeliveryExecutor(size_t max_threads);
  ~DeliveryExecutor();  // shutdown()
  DeliveryExecutor(const DeliveryExecutor&) = delete;
  DeliveryExecutor& operator=(const DeliveryExecutor&) = delete;

  std::shared_ptr<Strand> make_strand();
  // False (and `task` dropped) after shutdown.
  bool post(const std::shared_ptr<Strand>& strand, Task task);
  void shutdown();

 private:
  struct State;
  static void worker(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

struct DeliveryExecutor::Strand {
  std::deque<Task> tasks;  // guarded by State::mu
  bool scheduled = false;  // in the ready queue or running
};

}  // namespace postal::mail::mem_internal
