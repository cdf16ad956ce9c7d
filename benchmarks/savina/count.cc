// Count (Savina 2, CAF port caf_02_count): a producer sends n increments to a counting actor in
// one handler, then asks for the total. Default n = 1,000,000. Check: the total is n.
#include "absl/strings/str_cat.h"
#include "postal/postal.h"
#include "workload.h"

namespace postal::savina::count {

struct Increment {
  template <class A>
  void serialize(A&) {}
};
struct Total {
  int result = 0;
  template <class A>
  void serialize(A& a) {
    a(result);
  }
};
struct Retrieve {
  PortRef<Total> sender;
  template <class A>
  void serialize(A& a) {
    a(sender);
  }
};

}  // namespace postal::savina::count

POSTAL_MESSAGE(postal::savina::count::Increment, "savina.count.Increment");
POSTAL_MESSAGE(postal::savina::count::Total, "savina.count.Total");
POSTAL_MESSAGE(postal::savina::count::Retrieve, "savina.count.Retrieve");

namespace postal::savina {
namespace count {
namespace {

class Counter : public Actor, public Handles<Increment, Retrieve> {
 public:
  absl::Status handle(Context&, Increment) override {
    ++count_;
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Retrieve m) override {
    m.sender.send(cx, Total{count_});
    return absl::OkStatus();
  }

 private:
  int count_ = 0;
};

class Producer : public Actor, public Handles<Increment, Total> {
 public:
  Producer(int n, ActorRef<Counter> counter, int* total, Completion* done)
      : n_(n), counter_(std::move(counter)), total_(total), done_(done) {}
  absl::Status handle(Context& cx, Increment) override {
    for (int i = 0; i < n_; ++i) counter_.send(cx, Increment{});
    counter_.send(cx, Retrieve{cx.self<Producer>().port<Total>()});
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Total m) override {
    *total_ = m.result;
    done_->done();
    return absl::OkStatus();
  }

 private:
  int n_;
  ActorRef<Counter> counter_;
  int* total_;
  Completion* done_;
};

}  // namespace
}  // namespace count

absl::StatusOr<std::string> run_count(const RunOptions& options) {
  using namespace count;
  const int n = options.size == Size::kDefault ? 1000000 : 20000;
  int total = -1;
  Completion done;
  absl::Status run = run_iteration(options, "count", done, [&](Proc& proc, Client& main) {
    absl::StatusOr<ActorHandle<Counter>> counter = spawn<Counter>(proc, "counter");
    if (!counter.ok()) return annotate(counter.status(), "spawn counter");
    absl::StatusOr<ActorHandle<Producer>> producer =
        spawn<Producer>(proc, "producer", n, counter->ref(), &total, &done);
    if (!producer.ok()) return annotate(producer.status(), "spawn producer");
    producer->ref().send(main, Increment{});
    return absl::OkStatus();
  });
  if (!run.ok()) return run;
  if (total != n) return absl::InternalError(absl::StrCat("counted ", total, ", not ", n));
  return absl::StrCat("counted ", total);
}

}  // namespace postal::savina
