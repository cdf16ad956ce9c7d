// Big (Savina 7, CAF port caf_07_big): w actors each ping a random one of the others n times,
// waiting for each pong, then tell a sink; when all w have, the sink stops them. Default
// n = 20,000, w = 120 (random targets from std::default_random_engine seeded with the actor's
// id, as in the port). Check: every actor made n pings and every pong came from the expected
// actor.
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cereal/types/vector.hpp"
#include "postal/postal.h"
#include "workload.h"

namespace postal::savina::big {

struct Ping {
  int sender = 0;
  template <class A>
  void serialize(A& a) {
    a(sender);
  }
};
struct Pong {
  int sender = 0;
  template <class A>
  void serialize(A& a) {
    a(sender);
  }
};
struct Exit {
  template <class A>
  void serialize(A&) {}
};
class BigActor;
struct Neighbors {
  std::vector<postal::ActorRef<BigActor>> neighbors;
  template <class A>
  void serialize(A& a) {
    a(neighbors);
  }
};

}  // namespace postal::savina::big

POSTAL_MESSAGE(postal::savina::big::Ping, "savina.big.Ping");
POSTAL_MESSAGE(postal::savina::big::Pong, "savina.big.Pong");
POSTAL_MESSAGE(postal::savina::big::Exit, "savina.big.Exit");
POSTAL_MESSAGE(postal::savina::big::Neighbors, "savina.big.Neighbors");

namespace postal::savina::big {

// One actor's record, read after the proc is gone.
struct Tally {
  int pings = 0;
  int wrong_pongs = 0;
};

class Sink : public Actor, public Handles<Exit, Neighbors> {
 public:
  Sink(int workers, Completion* done) : workers_(workers), done_(done) {}
  absl::Status handle(Context& cx, Exit) override;
  absl::Status handle(Context&, Neighbors m) override {
    neighbors_ = std::move(m.neighbors);
    return absl::OkStatus();
  }

 private:
  int workers_;
  Completion* done_;
  int exits_ = 0;
  std::vector<ActorRef<BigActor>> neighbors_;
};

class BigActor : public Actor, public Handles<Ping, Pong, Exit, Neighbors> {
 public:
  BigActor(int id, int pings, ActorRef<Sink> sink, Tally* tally)
      : pings_(pings), sink_(std::move(sink)), tally_(tally), my_ping_{id}, my_pong_{id} {
    random_.seed(id);
  }
  absl::Status handle(Context& cx, Ping m) override {
    neighbors_[m.sender].send(cx, my_pong_);
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Pong m) override {
    if (m.sender != expected_pinger_) ++tally_->wrong_pongs;
    if (tally_->pings == pings_) {
      sink_.send(cx, Exit{});
    } else {
      const int target = static_cast<int>(random_() % neighbors_.size());
      expected_pinger_ = target;
      neighbors_[target].send(cx, my_ping_);
      ++tally_->pings;
    }
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Exit) override {
    cx.stop();
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Neighbors m) override {
    neighbors_ = std::move(m.neighbors);
    return absl::OkStatus();
  }

 private:
  int pings_;
  ActorRef<Sink> sink_;
  Tally* tally_;
  Ping my_ping_;
  Pong my_pong_;
  int expected_pinger_ = -1;
  std::default_random_engine random_;
  std::vector<ActorRef<BigActor>> neighbors_;
};

absl::Status Sink::handle(Context& cx, Exit) {
  if (++exits_ == workers_) {
    for (const auto& worker : neighbors_) worker.send(cx, Exit{});
    cx.stop();
    done_->done();
  }
  return absl::OkStatus();
}

}  // namespace postal::savina::big

namespace postal::savina {

absl::StatusOr<std::string> run_big(const RunOptions& options) {
  using namespace big;
  const bool full = options.size == Size::kDefault;
  const int n = full ? 20000 : 500;
  const int w = full ? 120 : 12;
  std::vector<Tally> tallies(w);
  Completion done;
  absl::Status run = run_iteration(options, "big", done, [&](Proc& proc, Client& main) {
    absl::StatusOr<ActorHandle<Sink>> sink = spawn<Sink>(proc, "sink", w, &done);
    if (!sink.ok()) return annotate(sink.status(), "spawn sink");
    std::vector<ActorRef<BigActor>> actors;
    actors.reserve(w);
    for (int i = 0; i < w; ++i) {
      absl::StatusOr<ActorHandle<BigActor>> h =
          spawn<BigActor>(proc, absl::StrCat("big", i), i, n, sink->ref(), &tallies[i]);
      if (!h.ok()) return annotate(h.status(), "spawn");
      actors.push_back(h->ref());
    }
    sink->ref().send(main, Neighbors{actors});
    for (const auto& a : actors) a.send(main, Neighbors{actors});
    for (const auto& a : actors) a.send(main, Pong{-1});
    return absl::OkStatus();
  });
  if (!run.ok()) return run;
  for (int i = 0; i < w; ++i) {
    if (tallies[i].pings != n || tallies[i].wrong_pongs != 0) {
      return absl::InternalError(absl::StrCat("actor ", i, ": ", tallies[i].pings, " pings, ",
                                              tallies[i].wrong_pongs, " unexpected pongs"));
    }
  }
  return absl::StrCat(w, " actors made ", n, " pings each");
}

}  // namespace postal::savina
