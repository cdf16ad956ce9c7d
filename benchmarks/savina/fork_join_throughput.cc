// Fork-Join throughput (Savina 3, CAF port caf_03_fjthrput): the main thread sends n messages
// to each of a actors, round robin; each does Savina's small computation per message and stops
// after n. Default n = 10,000, a = 60. Check: every actor handled exactly n.
#include <atomic>
#include <vector>

#include "absl/strings/str_cat.h"
#include "postal/postal.h"
#include "workload.h"

namespace postal::savina::fjthrput {

struct Work {
  template <class A>
  void serialize(A&) {}
};

}  // namespace postal::savina::fjthrput

POSTAL_MESSAGE(postal::savina::fjthrput::Work, "savina.fjthrput.Work");

namespace postal::savina {
namespace fjthrput {
namespace {

// How many actors still run; the last to finish ends the iteration.
struct Finish {
  std::atomic<int> running;
  Completion done;
};

class Throughput : public Actor, public Handles<Work> {
 public:
  Throughput(int total, int* handled, Finish* finish)
      : total_(total), handled_(handled), finish_(finish) {}
  absl::Status handle(Context& cx, Work) override {
    ++*handled_;
    if (!perform_computation(37.2)) return absl::InternalError("unrealistic computation result");
    if (*handled_ == total_) {
      cx.stop();
      if (finish_->running.fetch_sub(1, std::memory_order_acq_rel) == 1) finish_->done.done();
    }
    return absl::OkStatus();
  }

 private:
  int total_;
  int* handled_;  // this actor's slot, read after the proc is gone
  Finish* finish_;
};

}  // namespace
}  // namespace fjthrput

absl::StatusOr<std::string> run_fork_join_throughput(const RunOptions& options) {
  using namespace fjthrput;
  const bool full = options.size == Size::kDefault;
  const int n = full ? 10000 : 500;
  const int a = full ? 60 : 10;
  std::vector<int> handled(a, 0);
  Finish finish;
  finish.running.store(a);
  absl::Status run = run_iteration(options, "fjthrput", finish.done, [&](Proc& proc, Client& main) {
    std::vector<ActorRef<Throughput>> actors;
    actors.reserve(a);
    for (int i = 0; i < a; ++i) {
      absl::StatusOr<ActorHandle<Throughput>> h =
          spawn<Throughput>(proc, absl::StrCat("t", i), n, &handled[i], &finish);
      if (!h.ok()) return annotate(h.status(), "spawn");
      actors.push_back(h->ref());
    }
    for (int m = 0; m < n; ++m) {
      for (const auto& actor : actors) actor.send(main, Work{});
    }
    return absl::OkStatus();
  });
  if (!run.ok()) return run;
  for (int i = 0; i < a; ++i) {
    if (handled[i] != n) {
      return absl::InternalError(absl::StrCat("actor ", i, " handled ", handled[i], ", not ", n));
    }
  }
  return absl::StrCat(a, " actors handled ", n, " messages each");
}

}  // namespace postal::savina
