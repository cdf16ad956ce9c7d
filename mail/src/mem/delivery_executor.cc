#include "delivery_executor.h"

#include <utility>

#include "postal/runtime/thread_name.h"

namespace postal::mail::mem_internal {

struct DeliveryExecutor::State {
  absl::Mutex mu;
  absl::CondVar ready_cv;
  std::deque<std::shared_ptr<Strand>> ready ABSL_GUARDED_BY(mu);
  std::vector<std::thread> threads ABSL_GUARDED_BY(mu);
  size_t idle ABSL_GUARDED_BY(mu) = 0;
  size_t max_threads = 1;
  bool stopping ABSL_GUARDED_BY(mu) = false;
};

DeliveryExecutor::DeliveryExecutor(size_t max_threads) : state_(std::make_shared<State>()) {
  state_->max_threads = max_threads == 0 ? 1 : max_threads;
}

DeliveryExecutor::~DeliveryExecutor() { shutdown(); }

std::shared_ptr<DeliveryExecutor::Strand> DeliveryExecutor::make_strand() {
  return std::make_shared<Strand>();
}

bool DeliveryExecutor::post(const std::shared_ptr<Strand>& strand, Task task) {
  absl::MutexLock lock(&state_->mu);
  if (state_->stopping) return false;
  strand->tasks.push_back(std::move(task));
  if (strand->scheduled) return true;
  strand->scheduled = true;
  state_->ready.push_back(strand);
  if (state_->idle > 0) {
    state_->ready_cv.Signal();
  } else if (state_->threads.size() < state_->max_threads) {
    state_->threads.emplace_back(&DeliveryExecutor::worker, state_);
  }
  return true;
}

void DeliveryExecutor::worker(std::shared_ptr<State> state) {
  runtime::name_this_thread("postal-deliver");
  absl::MutexLock lock(&state->mu);
  while (true) {
    while (!state->stopping && state->ready.empty()) {
      ++state->idle;
      state->ready_cv.Wait(&state->mu);
      --state->idle;
    }
    if (state->stopping) return;
    std::shared_ptr<Strand> strand = std::move(state->ready.front());
    state->ready.pop_front();
    Task task = std::move(strand->tasks.front());
    strand->tasks.pop_front();
    state->mu.Unlock();
    std::move(task)();
    task = nullptr;  // destroy captures unlocked
    state->mu.Lock();
    if (state->stopping) {
      // shutdown() drops the queued tasks of the strands it finds ready; this one was running,
      // so its queue is dropped here. Kept, its tasks (which may own what owns the strand)
      // would keep each other alive past the executor.
      std::deque<Task> left = std::move(strand->tasks);
      strand->tasks.clear();
      strand->scheduled = false;
      state->mu.Unlock();
      left.clear();  // destroy captures unlocked
      strand.reset();
      state->mu.Lock();
      continue;
    }
    if (strand->tasks.empty()) {
      strand->scheduled = false;
    } else {
      state->ready.push_back(std::move(strand));  // round-robin between strands
    }
  }
}

void DeliveryExecutor::shutdown() {
  std::vector<std::thread> threads;
  std::vector<Task> dropped;
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopping = true;
    for (auto& strand : state_->ready) {
      for (Task& t : strand->tasks) dropped.push_back(std::move(t));
      strand->tasks.clear();
      strand->scheduled = false;
    }
    state_->ready.clear();
    threads = std::move(state_->threads);
    state_->threads.clear();
    state_->ready_cv.SignalAll();
  }
  dropped.clear();
  for (std::thread& t : threads) {
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();
    } else {
      t.join();
    }
  }
}

}  // namespace postal::mail::mem_internal
