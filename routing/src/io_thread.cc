// IoThread: the proc's I/O loop and the thread that runs it, lent to an idle worker
// (runtime/scheduler.h, "Idle poll"; R-SCHED-2).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "absl/strings/str_cat.h"
#include "postal/routing/channel.h"
#include "postal/runtime/logger.h"
#include "postal/runtime/mailbox_bound.h"
#include "postal/runtime/thread_name.h"

namespace postal::routing {

// Who runs the context: the I/O thread, or the worker it is lent to, never both at once. While
// lent, the I/O thread waits; it looks at the holder after kReclaimFirst and then at doubling
// intervals up to kReclaimMax while the holder keeps waiting in the loop, and asks for the loop
// back as soon as it finds the holder doing something else (running slices). The holder gives
// it back at its next slice's end (the scheduler's part), so the network never waits for a busy
// worker longer than one slice plus one interval.
class IoThread::Lender final : public runtime::IdlePoller {
 public:
  static constexpr std::chrono::microseconds kReclaimFirst{200};
  static constexpr std::chrono::microseconds kReclaimMax{20'000};

  explicit Lender(boost::asio::io_context& ctx) : ctx_(ctx) {}

  bool acquire() override {
    std::unique_lock<std::mutex> lock(mu_);
    if (lent_ || want_ || stopping_) return false;
    want_ = true;
    if (io_running_) boost::asio::post(ctx_, [] {});  // the I/O thread leaves its wait
    cv_.wait(lock, [&] { return !io_running_ || stopping_; });
    want_ = false;
    if (stopping_) {
      cv_.notify_all();
      return false;
    }
    lent_ = true;
    want_back_.store(false, std::memory_order_relaxed);
    holder_.store(std::this_thread::get_id(), std::memory_order_release);
    cv_.notify_all();  // the I/O thread starts watching the holder
    return true;
  }

  void run_once(std::chrono::nanoseconds max) override {
    runtime::NoBlockScope no_block;  // as on the I/O thread: moving envelopes never waits
    in_poll_.store(true, std::memory_order_relaxed);
    try {
      // A stopped context returns at once: wait as a sleep would (only at teardown).
      if (ctx_.run_one_for(max) == 0 && ctx_.stopped()) std::this_thread::sleep_for(max);
    } catch (const std::exception& e) {
      runtime::Logger::routing().error(
          absl::StrCat("I/O loop on a worker: unexpected exception: ", e.what()));
    }
    in_poll_.store(false, std::memory_order_relaxed);
  }

  void interrupt() override { boost::asio::post(ctx_, [] {}); }

  void release() override {
    std::lock_guard<std::mutex> lock(mu_);
    lent_ = false;
    want_back_.store(false, std::memory_order_relaxed);
    holder_.store(std::thread::id(), std::memory_order_release);
    cv_.notify_all();
  }

  bool wanted_back() const override { return want_back_.load(std::memory_order_relaxed); }

  // The I/O thread: runs the context whenever it is not lent.
  void io_loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        std::chrono::microseconds interval = kReclaimFirst;
        while ((lent_ || want_) && !stopping_) {
          if (!lent_) {  // a worker is taking the loop
            cv_.wait(lock);
            continue;
          }
          if (cv_.wait_for(lock, interval) == std::cv_status::no_timeout || !lent_) continue;
          if (in_poll_.load(std::memory_order_relaxed)) {
            interval = std::min(interval * 2, kReclaimMax);
          } else {
            want_back_.store(true, std::memory_order_relaxed);
            interval = kReclaimFirst;
          }
        }
        if (stopping_) return;
        io_running_ = true;
        holder_.store(std::this_thread::get_id(), std::memory_order_release);
      }
      try {
        ctx_.run_one();
      } catch (const std::exception& e) {  // a handler threw: log it and keep the thread alive
        runtime::Logger::routing().error(
            absl::StrCat("I/O thread: unexpected exception: ", e.what()));
      }
      std::lock_guard<std::mutex> lock(mu_);
      io_running_ = false;
      holder_.store(std::thread::id(), std::memory_order_release);
      if (want_) cv_.notify_all();
      if (ctx_.stopped()) return;
    }
  }

  void stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }

  bool held_by_caller() const {
    return holder_.load(std::memory_order_acquire) == std::this_thread::get_id();
  }

 private:
  boost::asio::io_context& ctx_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool lent_ = false;        // a worker holds the loop
  bool want_ = false;        // a worker is taking it
  bool io_running_ = false;  // the I/O thread is inside the loop
  bool stopping_ = false;
  std::atomic<std::thread::id> holder_{};
  std::atomic<bool> in_poll_{false};    // the holder waits in the loop now
  std::atomic<bool> want_back_{false};  // the I/O thread asked for the loop back
};

IoThread::IoThread()
    : context_(std::make_unique<boost::asio::io_context>(1)),
      lender_(std::make_unique<Lender>(*context_)) {
  // The work guard exists before the thread does: a worker can take the loop (R-SCHED-2)
  // before this thread has started, and the context, out of work after that worker's first
  // handler, would stop itself for good (seen: a posted handler never ran, ~1 in 300 runs of
  // R_SCHED_2_OneThreadRunsTheLoopAndABusyHolderIsAskedForItBack under ASan beside a busy core).
  auto guard = boost::asio::make_work_guard(*context_);
  thread_ = std::thread([lender = lender_.get(), guard = std::move(guard)] {
    runtime::name_this_thread("postal-io");
    runtime::NoBlockScope no_block;  // R-FLOW-2: a thread that moves envelopes never waits for room
    lender->io_loop();
  });
}

IoThread::~IoThread() {
  lender_->stop();
  context_->stop();
  thread_.join();
}

bool IoThread::in_io_thread() const { return lender_->held_by_caller(); }

runtime::IdlePoller& IoThread::idle_poller() { return *lender_; }

}  // namespace postal::routing
