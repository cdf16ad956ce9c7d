// ping_pong: two actors bounce a counter; the smallest complete postal program.
//
//   build/release/examples/ping_pong [round_trips]
#include <cstdlib>
#include <iostream>

#include "postal/postal.h"

struct Ball {
  int hits = 0;
  postal::PortRef<Ball> back;  // where to return the ball
  template <class Archive>
  void serialize(Archive& ar) {
    ar(hits, back);
  }
};
struct Finished {
  int hits = 0;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(hits);
  }
};
POSTAL_MESSAGE(Ball, "examples.Ball");
POSTAL_MESSAGE(Finished, "examples.Finished");

// Returns every ball, one hit more.
class Ponger : public postal::Actor, public postal::Handles<Ball> {
 public:
  absl::Status handle(postal::Context& cx, Ball ball) override {
    ball.back.send(cx, Ball{ball.hits + 1, cx.self<Ponger>().port<Ball>()});
    return absl::OkStatus();
  }
};

// Serves until `limit` hits, then reports.
class Pinger : public postal::Actor, public postal::Handles<Ball> {
 public:
  Pinger(int limit, postal::PortRef<Finished> report) : limit_(limit), report_(report) {}

  absl::Status handle(postal::Context& cx, Ball ball) override {
    if (ball.hits >= limit_) {
      report_.send(cx, Finished{ball.hits});
      return absl::OkStatus();
    }
    ball.back.send(cx, Ball{ball.hits + 1, cx.self<Pinger>().port<Ball>()});
    return absl::OkStatus();
  }

 private:
  int limit_;
  postal::PortRef<Finished> report_;
};

int main(int argc, char** argv) {
  const int hits = argc > 1 ? std::atoi(argv[1]) : 1'000'000;
  postal::Proc proc(postal::ProcOptions::threads(2));
  auto main_client = postal::Client::attach(proc, "main");
  if (!main_client.ok()) {
    std::cerr << main_client.status() << "\n";
    return 1;
  }
  postal::Client& cx = **main_client;

  auto [report, finished] = postal::runtime::open_port<Finished>(cx);
  auto ponger = postal::spawn<Ponger>(proc, "ponger");
  auto pinger = postal::spawn<Pinger>(proc, "pinger", hits, report.bind());
  if (!ponger.ok() || !pinger.ok()) {
    std::cerr << "spawn failed\n";
    return 1;
  }

  absl::Time start = absl::Now();
  pinger->ref().send(cx, Ball{0, ponger->ref().port<Ball>()});
  absl::StatusOr<Finished> done = finished.recv(absl::Seconds(60));
  if (!done.ok()) {
    std::cerr << "no result: " << done.status() << "\n";
    return 1;
  }
  double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::cout << done->hits << " hits in " << seconds * 1e3 << " ms: " << done->hits / seconds / 1e6
            << " M messages/s\n";
  return 0;
}
