// Fork-Join create (Savina 4, CAF port caf_04_fjcreate): the main thread spawns n actors and
// sends each one message; each does Savina's small computation and stops. Default n = 40,000.
// Root actors need distinct names here ("w<i>"); CAF's have none. Check: all n handled theirs.
#include <atomic>

#include "absl/strings/str_cat.h"
#include "postal/postal.h"
#include "workload.h"

namespace postal::savina::fjcreate {

struct Work {
  template <class A>
  void serialize(A&) {}
};

}  // namespace postal::savina::fjcreate

POSTAL_MESSAGE(postal::savina::fjcreate::Work, "savina.fjcreate.Work");

namespace postal::savina {
namespace fjcreate {
namespace {

struct Finish {
  std::atomic<int> handled{0};
  int expected = 0;
  Completion done;
};

class ForkJoin : public Actor, public Handles<Work> {
 public:
  explicit ForkJoin(Finish* finish) : finish_(finish) {}
  absl::Status handle(Context& cx, Work) override {
    if (!perform_computation(37.2)) return absl::InternalError("unrealistic computation result");
    cx.stop();
    if (finish_->handled.fetch_add(1, std::memory_order_acq_rel) + 1 == finish_->expected) {
      finish_->done.done();
    }
    return absl::OkStatus();
  }

 private:
  Finish* finish_;
};

}  // namespace
}  // namespace fjcreate

absl::StatusOr<std::string> run_fork_join_create(const RunOptions& options) {
  using namespace fjcreate;
  const int n = options.size == Size::kDefault ? 40000 : 2000;
  Finish finish;
  finish.expected = n;
  absl::Status run = run_iteration(options, "fjcreate", finish.done, [&](Proc& proc, Client& main) {
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<ActorHandle<ForkJoin>> h =
          spawn<ForkJoin>(proc, absl::StrCat("w", i), &finish);
      if (!h.ok()) return annotate(h.status(), "spawn");
      h->ref().send(main, Work{});
    }
    return absl::OkStatus();
  });
  if (!run.ok()) return run;
  const int handled = finish.handled.load();
  if (handled != n) return absl::InternalError(absl::StrCat(handled, " of ", n, " handled"));
  return absl::StrCat(n, " actors handled their message");
}

}  // namespace postal::savina
