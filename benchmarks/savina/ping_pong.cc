// PingPong (Savina 1, CAF port caf_01_pingpong): two actors exchange n pings and pongs; after
// each pong the pinger sends itself a message before the next ping, as the port does. Default
// n = 40,000. Check: the ponger answered exactly n pings.
#include "absl/strings/str_cat.h"
#include "postal/postal.h"
#include "workload.h"

namespace postal::savina::pingpong {

struct Start {
  template <class A>
  void serialize(A&) {}
};
// What the pinger sends itself between two pings (the port's ping_msg).
struct NextPing {
  template <class A>
  void serialize(A&) {}
};
struct SendPong;
// The port's messages carry the sender's handle; here, the port to answer on.
struct SendPing {
  PortRef<SendPong> sender;
  template <class A>
  void serialize(A& a) {
    a(sender);
  }
};
struct SendPong {
  PortRef<SendPing> sender;
  template <class A>
  void serialize(A& a) {
    a(sender);
  }
};
struct Stop {
  template <class A>
  void serialize(A&) {}
};

}  // namespace postal::savina::pingpong

POSTAL_MESSAGE(postal::savina::pingpong::Start, "savina.pingpong.Start");
POSTAL_MESSAGE(postal::savina::pingpong::NextPing, "savina.pingpong.NextPing");
POSTAL_MESSAGE(postal::savina::pingpong::SendPing, "savina.pingpong.SendPing");
POSTAL_MESSAGE(postal::savina::pingpong::SendPong, "savina.pingpong.SendPong");
POSTAL_MESSAGE(postal::savina::pingpong::Stop, "savina.pingpong.Stop");

namespace postal::savina {
namespace pingpong {
namespace {

struct Result {
  int pings = 0;  // answered by the ponger
};

class Ponger : public Actor, public Handles<SendPing, Stop> {
 public:
  Ponger(Result* result, Completion* done) : result_(result), done_(done) {}
  absl::Status init(Context& cx) override {
    self_ = cx.self<Ponger>().port<SendPing>();
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, SendPing m) override {
    m.sender.send(cx, SendPong{self_});
    ++pings_;
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Stop) override {
    result_->pings = pings_;
    cx.stop();
    done_->done();
    return absl::OkStatus();
  }

 private:
  Result* result_;
  Completion* done_;
  PortRef<SendPing> self_;
  int pings_ = 0;
};

class Pinger : public Actor, public Handles<Start, NextPing, SendPong> {
 public:
  Pinger(int n, ActorRef<Ponger> ponger) : left_(n), ponger_(std::move(ponger)) {}
  absl::Status init(Context& cx) override {
    self_ = cx.self<Pinger>();
    reply_to_ = self_.port<SendPong>();
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Start) override { return ping(cx); }
  absl::Status handle(Context& cx, NextPing) override { return ping(cx); }
  absl::Status handle(Context& cx, SendPong) override {
    if (left_ > 0) {
      self_.send(cx, NextPing{});
    } else {
      ponger_.send(cx, Stop{});
      cx.stop();
    }
    return absl::OkStatus();
  }

 private:
  absl::Status ping(Context& cx) {
    ponger_.send(cx, SendPing{reply_to_});
    --left_;
    return absl::OkStatus();
  }

  int left_;
  ActorRef<Ponger> ponger_;
  ActorRef<Pinger> self_;
  PortRef<SendPong> reply_to_;
};

// The port's starter_actor: spawns both and starts the pinger.
class Starter : public Actor, public Handles<Start> {
 public:
  Starter(int n, Result* result, Completion* done) : n_(n), result_(result), done_(done) {}
  absl::Status init(Context& cx) override {
    absl::StatusOr<ActorHandle<Ponger>> ponger = cx.spawn<Ponger>("pong", result_, done_);
    if (!ponger.ok()) return ponger.status();
    absl::StatusOr<ActorHandle<Pinger>> pinger = cx.spawn<Pinger>("ping", n_, ponger->ref());
    if (!pinger.ok()) return pinger.status();
    pinger->ref().send(cx, Start{});
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Start) override { return absl::OkStatus(); }

 private:
  int n_;
  Result* result_;
  Completion* done_;
};

}  // namespace
}  // namespace pingpong

absl::StatusOr<std::string> run_ping_pong(const RunOptions& options) {
  using namespace pingpong;
  const int n = options.size == Size::kDefault ? 40000 : 2000;
  Result result;
  Completion done;
  absl::Status run = run_iteration(options, "pingpong", done, [&](Proc& proc, Client&) {
    return annotate(spawn<Starter>(proc, "starter", n, &result, &done).status(), "spawn");
  });
  if (!run.ok()) return run;
  if (result.pings != n) {
    return absl::InternalError(absl::StrCat("pong answered ", result.pings, " pings, not ", n));
  }
  return absl::StrCat("pong answered ", result.pings, " pings");
}

}  // namespace postal::savina
