// ThreadRing (Savina 5, CAF port caf_05_threadring): n actors in a ring pass one token r times
// round, then an exit token goes round and stops them. Default n = 100, r = 100,000. The port's
// exit token starts at n and so makes n + 1 hops, the last to an actor that has already quit
// (CAF drops it); here it starts at n - 1: every actor gets exactly one, and nothing is sent to a
// stopped actor. Check: the ring handled r + 1 pings and n exits.
#include <vector>

#include "absl/strings/str_cat.h"
#include "postal/postal.h"
#include "workload.h"

namespace postal::savina::threadring {

struct Ping {
  int pings_left = 0;
  template <class A>
  void serialize(A& a) {
    a(pings_left);
  }
};
struct Exit {
  int exits_left = 0;
  template <class A>
  void serialize(A& a) {
    a(exits_left);
  }
};
class RingActor;
struct Data {
  postal::ActorRef<RingActor> next;
  template <class A>
  void serialize(A& a) {
    a(next);
  }
};

}  // namespace postal::savina::threadring

POSTAL_MESSAGE(postal::savina::threadring::Ping, "savina.threadring.Ping");
POSTAL_MESSAGE(postal::savina::threadring::Exit, "savina.threadring.Exit");
POSTAL_MESSAGE(postal::savina::threadring::Data, "savina.threadring.Data");

namespace postal::savina::threadring {

// What each ring member handled, one slot each (read after the proc is gone).
struct Tally {
  int pings = 0;
  int exits = 0;
};

class RingActor : public Actor, public Handles<Ping, Exit, Data> {
 public:
  RingActor(int ring_size, Tally* tally, Completion* done)
      : ring_size_(ring_size), tally_(tally), done_(done) {}
  absl::Status handle(Context& cx, Ping m) override {
    ++tally_->pings;
    if (m.pings_left > 0) {
      next_.send(cx, Ping{m.pings_left - 1});
    } else {
      next_.send(cx, Exit{ring_size_ - 1});
    }
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Exit m) override {
    ++tally_->exits;
    if (m.exits_left > 0) {
      next_.send(cx, Exit{m.exits_left - 1});
    } else {
      done_->done();
    }
    cx.stop();
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Data m) override {
    next_ = std::move(m.next);
    return absl::OkStatus();
  }

 private:
  int ring_size_;
  Tally* tally_;
  Completion* done_;
  ActorRef<RingActor> next_;
};

namespace {

// The port's starter_actor: spawns the ring, links it, sends the first ping.
class Starter : public Actor, public Handles<Ping> {
 public:
  Starter(int r, std::vector<Tally>* tallies, Completion* done)
      : r_(r), tallies_(tallies), done_(done) {}
  absl::Status init(Context& cx) override {
    const int n = static_cast<int>(tallies_->size());
    std::vector<ActorRef<RingActor>> ring;
    ring.reserve(n);
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<ActorHandle<RingActor>> h =
          cx.spawn<RingActor>("ring", n, &(*tallies_)[i], done_);
      if (!h.ok()) return h.status();
      ring.push_back(h->ref());
    }
    for (int i = 0; i < n; ++i) ring[i].send(cx, Data{ring[(i + 1) % n]});
    ring[0].send(cx, Ping{r_});
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Ping) override { return absl::OkStatus(); }

 private:
  int r_;
  std::vector<Tally>* tallies_;
  Completion* done_;
};

}  // namespace
}  // namespace postal::savina::threadring

namespace postal::savina {

absl::StatusOr<std::string> run_thread_ring(const RunOptions& options) {
  using namespace threadring;
  const bool full = options.size == Size::kDefault;
  const int n = full ? 100 : 10;
  const int r = full ? 100000 : 5000;
  std::vector<Tally> tallies(n);
  Completion done;
  absl::Status run = run_iteration(options, "threadring", done, [&](Proc& proc, Client&) {
    return annotate(spawn<Starter>(proc, "starter", r, &tallies, &done).status(), "spawn");
  });
  if (!run.ok()) return run;
  int pings = 0;
  for (const Tally& t : tallies) {
    pings += t.pings;
    if (t.exits != 1) return absl::InternalError(absl::StrCat("an actor got ", t.exits, " exits"));
  }
  if (pings != r + 1) return absl::InternalError(absl::StrCat(pings, " pings, not ", r + 1));
  return absl::StrCat("the ring of ", n, " passed ", pings, " pings and ", n, " exits");
}

}  // namespace postal::savina
