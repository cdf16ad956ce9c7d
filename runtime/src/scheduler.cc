#include "postal/runtime/scheduler.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "boost/fiber/all.hpp"
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#include "postal/runtime/deferred_flush.h"
#include "postal/runtime/port_sink.h"
#include "postal/runtime/run_queue.h"
#include "postal/runtime/thread_name.h"

namespace postal::runtime {
namespace {

inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Runner fibers may run handlers with deep call chains (cereal, user code): give them room.
constexpr size_t kRunnerStack = 256 * 1024;

// Guard-paged fiber stacks. Under AddressSanitizer the stack's shadow is cleared on allocation
// and release: ASan does not see Boost.Context's fcontext switches, so poison left by frames
// that unwound on another stack would otherwise surface as false reports when the address range
// is reused.
class RunnerStack {
 public:
  boost::context::stack_context allocate() {
    boost::context::stack_context sc = inner_.allocate();
    unpoison(sc);
    return sc;
  }
  void deallocate(boost::context::stack_context& sc) noexcept {
    unpoison(sc);
    inner_.deallocate(sc);
  }

 private:
  static void unpoison([[maybe_unused]] const boost::context::stack_context& sc) {
#if defined(__SANITIZE_ADDRESS__)
    ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(sc.sp) - sc.size, sc.size);
#endif
  }
  boost::fibers::protected_fixedsize_stack inner_{kRunnerStack};
};
// After this many LIFO-slot runs in a row the slot yields to the FIFO queue (no starvation).
constexpr int kMaxLifoStreak = 32;
// A sleeping worker re-checks for work at least this often, whatever happened to a wake-up.
constexpr auto kSleepCap = std::chrono::milliseconds(20);

}  // namespace

class Worker {
 public:
  Worker(Scheduler& sched, int index) : sched_(sched), index_(index) {}

  void start() {
    thread_ = std::thread([this] {
      name_this_thread(absl::StrCat("postal-w", index_));
      thread_main();
    });
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

  // Called on this worker's thread.
  void push_local(Schedulable* s) {
    if (lifo_ == nullptr) {
      lifo_ = s;
      return;
    }
    Schedulable* displaced = lifo_;
    lifo_ = s;
    if (!local_.push(displaced)) sched_.push_inject(displaced);
    if (sched_.sleepers_.load(std::memory_order_seq_cst) > 0) sched_.wake_one();
  }

  // R-SCHED-3, on this worker's thread: a send to an actor that is runnable already. A slice
  // that keeps feeding one actor (a producer's loop) would keep it in the LIFO slot, where no
  // idle worker may take it, until the slice ends: every kOfferEvery such sends, when a worker
  // sleeps, the slot's occupant moves to the stealable queue and a sleeping worker is woken.
  // (Moving it at once, or with nobody asleep, would bounce ping-pong pairs between workers.)
  void busy_slice_send() {
    if (++busy_sends_ < kOfferEvery) return;
    busy_sends_ = 0;
    if (lifo_ == nullptr || sched_.sleepers_.load(std::memory_order_seq_cst) == 0) return;
    Schedulable* s = lifo_;
    lifo_ = nullptr;
    if (!local_.push(s)) sched_.push_inject(s);
    sched_.wake_one();
  }

  // From any thread: wakes this worker if it sleeps and nobody woke it since it went to sleep.
  // Returns whether this call woke it. One wake per sleep: a thread outside the workers that
  // makes actors runnable in a burst pays the sleep mutex and the notify once, not per actor.
  bool wake() {
    if (!sleeping_.load(std::memory_order_seq_cst)) return false;
    if (wake_sent_.exchange(true, std::memory_order_seq_cst)) return false;
    if (IdlePoller* p = polling_.load(std::memory_order_seq_cst)) {
      p->interrupt();
      return true;
    }
    std::unique_lock<boost::fibers::mutex> lock(sleep_mu_);
    wake_ = true;
    sleep_cv_.notify_one();
    return true;
  }

  bool sleeping() const { return sleeping_.load(std::memory_order_relaxed); }
  // Called on this worker's thread, from inside a slice (Scheduler::worker_has_nothing_queued).
  bool nothing_queued() const {
    return lifo_ == nullptr && local_.empty() && active_ <= 1 && !sched_.inject_.maybe_nonempty();
  }
  Schedulable* steal() { return local_.pop(); }
  bool has_stealable() const { return !local_.empty(); }

  void block_begin() {
    if (--active_ == 0) spawn_runner();
  }
  void block_end() { ++active_; }

  uint64_t slices() const { return slices_.load(std::memory_order_relaxed); }
  uint64_t steals() const { return steals_.load(std::memory_order_relaxed); }
  uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }
  uint64_t server_spins() const { return server_spins_.load(std::memory_order_relaxed); }
  uint64_t polls() const { return polls_.load(std::memory_order_relaxed); }
  uint64_t runners_started() const { return runners_started_.load(std::memory_order_relaxed); }

  static thread_local Worker* current;
  Scheduler& sched_;

 private:
  void thread_main() {
    current = this;
    internal::set_defers_flushes(true);
    spawn_runner();
    std::unique_lock<boost::fibers::mutex> lock(sleep_mu_);
    exit_cv_.wait(lock, [&] { return runners_ == 0; });
    internal::run_deferred_flushes();
    internal::set_defers_flushes(false);
    current = nullptr;
  }

  void spawn_runner() {
    ++runners_;
    ++active_;
    runners_started_.fetch_add(1, std::memory_order_relaxed);
    boost::fibers::fiber(boost::fibers::launch::post, std::allocator_arg, RunnerStack(),
                         [this] { runner(); })
        .detach();
  }

  void runner() {
    while (!sched_.stopping_.load(std::memory_order_acquire)) {
      if (active_ > 1) break;  // a resumed waiter: another runner already dispatches
      Schedulable* s = find_work();
      if (s == nullptr) {
        idle();
        continue;
      }
      slices_.fetch_add(1, std::memory_order_relaxed);
      s->run_slice(sched_.options_.budget);
      internal::run_deferred_flushes();  // the hand-off budget: one flush per burst of sends
      if (held_ != nullptr && held_->wanted_back()) give_back();
    }
    give_back();
    --active_;
    std::unique_lock<boost::fibers::mutex> lock(sleep_mu_);
    --runners_;
    exit_cv_.notify_all();
  }

  Schedulable* find_work() {
    if (lifo_ != nullptr) {
      Schedulable* s = lifo_;
      lifo_ = nullptr;
      if (++lifo_streak_ <= kMaxLifoStreak) return s;
      if (!local_.push(s)) sched_.push_inject(s);
    }
    lifo_streak_ = 0;
    // Every so often look at the shared queue first, so foreign runnables are not starved.
    if ((++tick_ & 63) == 0) {
      if (Schedulable* s = sched_.pop_inject()) return s;
    }
    if (Schedulable* s = local_.pop()) return s;
    if (Schedulable* s = sched_.pop_inject()) return s;
    return steal_from_others();
  }

  Schedulable* steal_from_others() {
    const auto& ws = sched_.workers_;
    for (size_t i = 1; i < ws.size(); ++i) {
      Worker& victim = *ws[(index_ + i) % ws.size()];
      if (Schedulable* s = victim.steal()) {
        steals_.fetch_add(1, std::memory_order_relaxed);
        return s;
      }
    }
    return nullptr;
  }

  bool has_work() const {
    if (lifo_ != nullptr || !local_.empty()) return true;
    if (sched_.inject_.maybe_nonempty()) return true;
    for (const auto& w : sched_.workers_) {
      if (w.get() != this && w->has_stealable()) return true;
    }
    return false;
  }

  // Spins, then sleeps until there is work. The spin lasts `spin`, or up to the server spin
  // when that is on and the last idle gap was within it (scheduler.h); it ends as soon as work
  // shows. `spin` = 0 (low_power) never spins.
  void idle() {
    internal::run_deferred_flushes();  // nothing deferred waits on an idle worker
    const bool learns = sched_.server_spin_ns_.load(std::memory_order_relaxed) > 0;
    // Idle poll: the worker that may wait in the I/O loop does not spin first; the loop is its
    // wait, and a message from the network wakes it there.
    IdlePoller* poller = poll_candidate();
    const std::chrono::nanoseconds spin =
        poller != nullptr ? std::chrono::nanoseconds(0) : sched_.idle_spin_after(last_gap_);
    // The clock is read only for a spin's deadline or a gap to learn (low_power reads none).
    const auto began = spin.count() > 0 || learns ? std::chrono::steady_clock::now()
                                                  : std::chrono::steady_clock::time_point();
    if (spin.count() > 0) {
      if (learns && spin > absl::ToChronoNanoseconds(sched_.options_.spin)) {
        server_spins_.fetch_add(1, std::memory_order_relaxed);
      }
      const auto deadline = began + spin;
      for (int i = 1;; ++i) {
        if (has_work()) return learn_gap(began, learns);
        spin_pause();
        if ((i & 15) == 0) {
          boost::this_fiber::yield();  // let resumed waiters on this thread run
          if (active_ > 1) return;
          // And let another thread of this CPU run: with more runnable threads than cores (a
          // sender outside the workers, 2 vCPUs) a spinning worker would hold the core the
          // sender needs; with nothing else runnable this returns at once.
          if ((i & 63) == 0) std::this_thread::yield();
          if (std::chrono::steady_clock::now() >= deadline) break;
        }
      }
    }
    if (poller != nullptr && (held_ == poller || poller->acquire())) {
      held_ = poller;
      polls_.fetch_add(1, std::memory_order_relaxed);
      wake_sent_.store(false, std::memory_order_seq_cst);
      polling_.store(poller, std::memory_order_seq_cst);
      sleeping_.store(true, std::memory_order_seq_cst);
      sched_.sleepers_.fetch_add(1, std::memory_order_seq_cst);
      while (!has_work() && !sched_.stopping_.load(std::memory_order_seq_cst) &&
             !wake_sent_.load(std::memory_order_seq_cst)) {
        poller->run_once(std::chrono::nanoseconds(kSleepCap));
        internal::run_deferred_flushes();
      }
      sched_.sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      sleeping_.store(false, std::memory_order_seq_cst);
      polling_.store(nullptr, std::memory_order_seq_cst);
      // With other workers the loop goes back at once: the I/O thread then delivers what comes
      // while this one runs, and wakes another worker for it (a long slice here must not keep
      // the proc's other actors from their messages). Alone, the worker keeps it (see above).
      if (sched_.workers_.size() > 1 || poller->wanted_back() ||
          sched_.stopping_.load(std::memory_order_seq_cst)) {
        give_back();
      }
      return learn_gap(began, learns);
    }
    give_back();
    wake_sent_.store(false, std::memory_order_seq_cst);
    sleeping_.store(true, std::memory_order_seq_cst);
    sched_.sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (!has_work() && !sched_.stopping_.load(std::memory_order_seq_cst)) {
      sleeps_.fetch_add(1, std::memory_order_relaxed);
      std::unique_lock<boost::fibers::mutex> lock(sleep_mu_);
      sleep_cv_.wait_for(lock, kSleepCap, [&] {
        return wake_ || sched_.stopping_.load(std::memory_order_acquire);
      });
      wake_ = false;
    }
    sched_.sleepers_.fetch_sub(1, std::memory_order_seq_cst);
    sleeping_.store(false, std::memory_order_seq_cst);
    learn_gap(began, learns);
  }

  // Idle poll (scheduler.h): worker 0, when the scheduler has a poller and no handler of this
  // worker is blocked (only this runner exists: a fiber resumed from elsewhere would otherwise
  // wait for the loop to return).
  IdlePoller* poll_candidate() const {
    if (index_ != 0 || runners_ != 1) return nullptr;
    return sched_.idle_poller_.load(std::memory_order_acquire);
  }

  // Returns the I/O loop this worker holds, if any.
  void give_back() {
    if (held_ == nullptr) return;
    held_->release();
    held_ = nullptr;
  }

  // Only with the server spin on.
  void learn_gap(std::chrono::steady_clock::time_point began, bool learns) {
    if (learns) last_gap_ = std::chrono::steady_clock::now() - began;
  }

  int index_;
  std::thread thread_;
  Schedulable* lifo_ = nullptr;
  int lifo_streak_ = 0;
  static constexpr uint32_t kOfferEvery = 256;
  uint32_t busy_sends_ = 0;
  // The last idle gap (idle(), with the server spin on); "long ago" until one is measured.
  std::chrono::nanoseconds last_gap_ = std::chrono::nanoseconds::max();
  uint32_t tick_ = 0;
  RunQueue local_;

  // Thread-confined runner accounting.
  int runners_ = 0;
  int active_ = 0;

  std::atomic<bool> sleeping_{false};
  std::atomic<bool> wake_sent_{false};  // a wake() since sleeping_ was last set
  std::atomic<IdlePoller*> polling_{nullptr};  // waiting in this poller instead of sleeping
  IdlePoller* held_ = nullptr;                  // the loop this worker holds (worker 0 only)
  boost::fibers::mutex sleep_mu_;
  boost::fibers::condition_variable sleep_cv_;
  boost::fibers::condition_variable exit_cv_;
  bool wake_ = false;

  std::atomic<uint64_t> slices_{0};
  std::atomic<uint64_t> steals_{0};
  std::atomic<uint64_t> sleeps_{0};
  std::atomic<uint64_t> server_spins_{0};
  std::atomic<uint64_t> runners_started_{0};
  std::atomic<uint64_t> polls_{0};
};

thread_local Worker* Worker::current = nullptr;

Scheduler::Scheduler(SchedulerOptions options)
    : options_(options),
      server_spin_ns_(absl::ToInt64Nanoseconds(std::clamp(
          options.server_spin, absl::ZeroDuration(), Scheduler::kMaxServerSpin))) {
  if (options_.manual) {
    options_.workers = 0;
    return;
  }
  int n = options_.workers > 0 ? options_.workers
                               : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options_.workers = n;
  if (options_.budget == 0) options_.budget = 1;
  for (int i = 0; i < n; ++i) workers_.push_back(std::make_unique<Worker>(*this, i));
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::start() {
  if (options_.manual || started_.exchange(true)) return;
  for (auto& w : workers_) w->start();
}

void Scheduler::stop() {
  if (stopping_.exchange(true)) return;
  cancel_waiters();
  for (auto& w : workers_) w->wake();
  for (auto& w : workers_) w->join();
  if (options_.manual) {
    // Let the cancelled waiters on this thread run to the end of their handlers.
    for (int i = 0; i < 1000; ++i) {
      {
        absl::MutexLock lock(&waiters_mu_);
        if (waiters_.empty()) break;
      }
      cancel_waiters();
      boost::this_fiber::yield();
    }
  }
}

void Scheduler::cancel_waiters() {
  std::vector<PortSink*> waiting;
  {
    absl::MutexLock lock(&waiters_mu_);
    waiting.reserve(waiters_.size());
    for (const auto& [sink, n] : waiters_) waiting.push_back(sink);
  }
  const DeliveryFailure stopping = DeliveryFailure::transport_failure(
      "this proc", TransportReason::kLinkUnavailable, "the proc is stopping");
  for (PortSink* w : waiting) w->fail(stopping);
}

void Scheduler::schedule(Schedulable* s) {
  Worker* w = Worker::current;
  if (w != nullptr && &w->sched_ == this) {
    w->push_local(s);
    return;
  }
  push_inject(s);
  if (!options_.manual) wake_one();
}

void Scheduler::push_inject(Schedulable* s) { inject_.push(s); }

namespace internal {
void busy_slice_send() {
  if (Worker* w = Worker::current) w->busy_slice_send();
}
}  // namespace internal

Schedulable* Scheduler::pop_inject() { return static_cast<Schedulable*>(inject_.try_pop()); }

void Scheduler::wake_one() {
  if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
  for (auto& w : workers_) {
    // A worker never wakes itself: one that makes an actor runnable from inside its idle poll
    // (R-SCHED-2) counts as asleep, and would otherwise take the wake-up meant for another.
    if (w.get() == Worker::current) continue;
    if (w->wake()) {
      wakeups_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
}

bool Scheduler::on_worker_thread() const {
  return Worker::current != nullptr && &Worker::current->sched_ == this;
}

bool Scheduler::worker_has_nothing_queued() const {
  Worker* w = Worker::current;
  return w != nullptr && &w->sched_ == this && w->nothing_queued() &&
         !stopping_.load(std::memory_order_relaxed);
}

Scheduler* Scheduler::current() {
  return Worker::current != nullptr ? &Worker::current->sched_ : nullptr;
}

std::chrono::nanoseconds Scheduler::idle_spin_after(std::chrono::nanoseconds last_gap) const {
  const std::chrono::nanoseconds spin = absl::ToChronoNanoseconds(options_.spin);
  const std::chrono::nanoseconds server(server_spin_ns_.load(std::memory_order_relaxed));
  if (spin.count() <= 0) return std::chrono::nanoseconds(0);  // low_power never spins
  return server.count() > 0 && last_gap <= server ? std::max(server, spin) : spin;
}

void Scheduler::raise_server_spin(absl::Duration spin) {
  const int64_t want = absl::ToInt64Nanoseconds(std::min(spin, kMaxServerSpin));
  int64_t have = server_spin_ns_.load(std::memory_order_relaxed);
  while (have < want &&
         !server_spin_ns_.compare_exchange_weak(have, want, std::memory_order_relaxed)) {
  }
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  for (const auto& w : workers_) {
    s.slices += w->slices();
    s.steals += w->steals();
    s.sleeps += w->sleeps();
    s.server_spins += w->server_spins();
    s.runners += w->runners_started();
    s.polls += w->polls();
  }
  s.wakeups = wakeups_.load(std::memory_order_relaxed);
  return s;
}

bool Scheduler::step() {
  boost::this_fiber::yield();  // resumed waiters finish what they were doing first
  if (before_step_) before_step_();
  Schedulable* s = pop_inject();
  // A push from another thread may be between its two stores: wait for it rather than report
  // nothing runnable.
  while (s == nullptr && inject_.maybe_nonempty()) {
    spin_pause();
    s = pop_inject();
  }
  if (s == nullptr) return false;
  auto done = std::make_shared<bool>(false);
  boost::fibers::fiber f(std::allocator_arg, RunnerStack(),
                         [s, done] {
                           s->run_slice(1);
                           *done = true;
                         });
  stepping_fiber_ = f.get_id();
  stepping_blocked_ = false;
  while (!*done && !stepping_blocked_) boost::this_fiber::yield();
  stepping_fiber_.reset();
  f.detach();
  return true;
}

size_t Scheduler::run_until_idle(size_t max_steps) {
  size_t n = 0;
  while (n < max_steps && step()) ++n;
  return n;
}

Scheduler::BlockingScope::BlockingScope(Scheduler& s, PortSink* waiting_on)
    : sched_(s), worker_(nullptr), waiting_on_(waiting_on) {
  if (waiting_on_ != nullptr) {
    absl::MutexLock lock(&sched_.waiters_mu_);
    ++sched_.waiters_[waiting_on_];
  }
  if (sched_.options_.manual) {
    if (sched_.stepping_fiber_ == boost::this_fiber::get_id()) sched_.stepping_blocked_ = true;
    return;
  }
  if (Worker::current != nullptr && &Worker::current->sched_ == &sched_) {
    worker_ = Worker::current;
    worker_->block_begin();
  }
}

Scheduler::BlockingScope::~BlockingScope() {
  if (worker_ != nullptr) worker_->block_end();
  if (waiting_on_ != nullptr) {
    absl::MutexLock lock(&sched_.waiters_mu_);
    auto it = sched_.waiters_.find(waiting_on_);
    if (it != sched_.waiters_.end() && --it->second == 0) sched_.waiters_.erase(it);
  }
}

}  // namespace postal::runtime
