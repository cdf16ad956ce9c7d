// Fibonacci (Savina 29, CAF port caf_29_fib): fib(n) computed by spawning two children per
// request down to n <= 2, each answering its parent and stopping. Default n = 25 (150,049
// actors). Check: the root's result is fib(n).
#include <optional>

#include "absl/strings/str_cat.h"
#include "postal/postal.h"
#include "workload.h"

namespace postal::savina::fib {

struct Request {
  int n = 0;
  template <class A>
  void serialize(A& a) {
    a(n);
  }
};
struct Response {
  int value = 0;
  template <class A>
  void serialize(A& a) {
    a(value);
  }
};

}  // namespace postal::savina::fib

POSTAL_MESSAGE(postal::savina::fib::Request, "savina.fib.Request");
POSTAL_MESSAGE(postal::savina::fib::Response, "savina.fib.Response");

namespace postal::savina {
namespace fib {
namespace {

struct Root {
  int result = 0;
  Completion done;
};

class FibActor : public Actor, public Handles<Request, Response> {
 public:
  // No parent: the root, which reports to `root`.
  FibActor(std::optional<PortRef<Response>> parent, Root* root)
      : parent_(std::move(parent)), root_(root) {}
  absl::Status handle(Context& cx, Request m) override {
    if (m.n <= 2) {
      result_ = 1;
      return finish(cx);
    }
    const PortRef<Response> self = cx.self<FibActor>().port<Response>();
    for (int k : {m.n - 1, m.n - 2}) {
      absl::StatusOr<ActorHandle<FibActor>> child = cx.spawn<FibActor>("fib", self, root_);
      if (!child.ok()) return child.status();
      child->ref().send(cx, Request{k});
    }
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Response m) override {
    result_ += m.value;
    if (++received_ == 2) return finish(cx);
    return absl::OkStatus();
  }

 private:
  absl::Status finish(Context& cx) {
    if (parent_) {
      parent_->send(cx, Response{result_});
    } else {
      root_->result = result_;
      root_->done.done();
    }
    cx.stop();
    return absl::OkStatus();
  }

  std::optional<PortRef<Response>> parent_;
  Root* root_;
  int result_ = 0;
  int received_ = 0;
};

int fibonacci(int n) {
  int a = 1;
  int b = 1;
  for (int i = 3; i <= n; ++i) {
    const int c = a + b;
    a = b;
    b = c;
  }
  return b;
}

}  // namespace
}  // namespace fib

absl::StatusOr<std::string> run_fibonacci(const RunOptions& options) {
  using namespace fib;
  const int n = options.size == Size::kDefault ? 25 : 12;
  Root root;
  absl::Status run = run_iteration(options, "fib", root.done, [&](Proc& proc, Client& main) {
    absl::StatusOr<ActorHandle<FibActor>> h =
        spawn<FibActor>(proc, "fib", std::optional<PortRef<Response>>(), &root);
    if (!h.ok()) return annotate(h.status(), "spawn");
    h->ref().send(main, Request{n});
    return absl::OkStatus();
  });
  if (!run.ok()) return run;
  if (root.result != fibonacci(n)) {
    return absl::InternalError(
        absl::StrCat("fib(", n, ") came out ", root.result, ", not ", fibonacci(n)));
  }
  return absl::StrCat("fib(", n, ") = ", root.result);
}

}  // namespace postal::savina
