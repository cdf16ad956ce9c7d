// Event-based request/reply (R-ACT-10): `cx.request(...).then(...)` sends and returns; the
// continuation runs later on the actor with the reply, a timeout or the request's failure.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "postal/postal.h"
#include "support/count_msg.h"
#include "support/virtual_time_proc.h"

namespace {
using Answer = postal::test_support::CountMsg;  // one number
struct Question {
  using Reply = Answer;
  int n = 0;
  bool ignore = false;  // the server keeps the reply port and does not answer
  postal::OncePortRef<Answer> reply_to;
  template <class A>
  void serialize(A& a) {
    a(n, ignore, reply_to);
  }
};
struct Go {  // ask `server` about `n`, with `timeout_ms`
  postal::PortRef<Question> server;
  int n = 0;
  bool ignore = false;
  int64_t timeout_ms = 60000;
  bool fail_in_continuation = false;
  template <class A>
  void serialize(A& a) {
    a(server, n, ignore, timeout_ms, fail_in_continuation);
  }
};
struct Other {
  template <class A>
  void serialize(A&) {}
};
}  // namespace

POSTAL_MESSAGE(Question, "test.then.Question");
POSTAL_MESSAGE(Go, "test.then.Go");
POSTAL_MESSAGE(Other, "test.then.Other");

namespace postal::actors {
namespace {

using test_support::VirtualTimeProc;

struct Server : Actor, Handles<Question> {
  postal::OncePortRef<Answer>* kept;
  explicit Server(postal::OncePortRef<Answer>* k) : kept(k) {}
  absl::Status handle(Context& cx, Question q) override {
    if (q.ignore) {
      *kept = q.reply_to;
      return absl::OkStatus();
    }
    q.reply_to.send(cx, Answer{q.n * 2});
    return absl::OkStatus();
  }
};

struct Asker : Actor, Handles<Go, Other> {
  std::vector<std::string>* log;
  PortRef<Answer> report;  // when set, answers go there too
  explicit Asker(std::vector<std::string>* l, PortRef<Answer> r = {}) : log(l), report(r) {}
  absl::Status handle(Context& cx, Go g) override {
    cx.request(g.server, Question{g.n, g.ignore, {}}, absl::Milliseconds(g.timeout_ms))
        .then([this, fail = g.fail_in_continuation](Context& cx,
                                                    absl::StatusOr<Answer> a) -> absl::Status {
          if (fail) return absl::InternalError("continuation gave up");
          log->push_back(a.ok() ? absl::StrCat("answer ", a->n)
                                : std::string(absl::StatusCodeToString(a.status().code())));
          if (a.ok() && !(report.addr() == runtime::PortAddr{})) report.send(cx, *a);
          return absl::OkStatus();
        });
    log->push_back("asked");
    return absl::OkStatus();
  }
  absl::Status handle(Context&, Other) override {
    log->push_back("other");
    return absl::OkStatus();
  }
};

struct World {
  World() {
    server = *spawn<Server>(t.proc, "server", &kept);
    asker = *spawn<Asker>(t.proc, "asker", &log);
    t.run();
  }
  VirtualTimeProc t;
  postal::OncePortRef<Answer> kept;
  std::vector<std::string> log;
  ActorHandle<Server> server;
  ActorHandle<Asker> asker;
};

TEST(RequestThen, R_ACT_10_TheContinuationRunsOnTheActorWithTheReplyAndNothingBlocks) {
  World w;
  w.asker.ref().send(w.t.client, Go{w.server.ref().port<Question>(), 21});
  w.asker.ref().send(w.t.client, Other{});
  w.t.run();
  // The asker handled Other while its question was out: no fiber waited for the answer.
  EXPECT_EQ(w.log, (std::vector<std::string>{"asked", "other", "answer 42"}));
}

TEST(RequestThen, R_ACT_10_ATimeoutGivesDeadlineExceededAndALateReplyIsPortGone) {
  World w;
  w.asker.ref().send(w.t.client, Go{w.server.ref().port<Question>(), 1, true, 5000});
  w.t.run();
  w.t.advance(absl::Milliseconds(4999));
  EXPECT_EQ(w.log, std::vector<std::string>{"asked"});
  w.t.advance(absl::Milliseconds(1));
  EXPECT_EQ(w.log, (std::vector<std::string>{"asked", "DEADLINE_EXCEEDED"}));
  ASSERT_TRUE(w.kept.valid());
  w.kept.send(w.t.client, Answer{7});
  w.t.run();
  EXPECT_EQ(w.log.size(), 2u);  // exactly one outcome
  absl::StatusOr<runtime::EnvelopePtr> back = w.t.client.next_undeliverable(absl::ZeroDuration());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->root_failure()->kind, runtime::FailureKind::kPortGone);
}

// The cell keeps its requests' deadlines itself and arms one proc timer for the earliest: a
// shorter timeout asked later still expires first, each exactly at its own deadline, and an
// answered request never times out.
TEST(RequestThen, R_ACT_10_EachRequestTimesOutAtItsOwnDeadlineWhateverTheOrderAsked) {
  World w;
  w.asker.ref().send(w.t.client, Go{w.server.ref().port<Question>(), 1, true, 5000});
  w.asker.ref().send(w.t.client, Go{w.server.ref().port<Question>(), 2, true, 1000});
  w.asker.ref().send(w.t.client, Go{w.server.ref().port<Question>(), 3, false, 500});
  w.t.run();
  EXPECT_EQ(w.log, (std::vector<std::string>{"asked", "asked", "asked", "answer 6"}));
  w.t.advance(absl::Milliseconds(999));
  EXPECT_EQ(w.log.size(), 4u);  // the answered 500-ms request did not time out
  w.t.advance(absl::Milliseconds(1));
  ASSERT_EQ(w.log.size(), 5u);
  EXPECT_EQ(w.log[4], "DEADLINE_EXCEEDED");
  w.t.advance(absl::Milliseconds(3999));
  EXPECT_EQ(w.log.size(), 5u);
  w.t.advance(absl::Milliseconds(1));
  ASSERT_EQ(w.log.size(), 6u);
  EXPECT_EQ(w.log[5], "DEADLINE_EXCEEDED");
}

TEST(RequestThen, R_ACT_10_ABouncedRequestFailsAtOnceWithUnavailable) {
  World w;
  w.server.stop();
  w.t.run();
  w.asker.ref().send(w.t.client, Go{w.server.ref().port<Question>(), 1});
  w.t.run();  // no clock move
  EXPECT_EQ(w.log, (std::vector<std::string>{"asked", "UNAVAILABLE"}));
  EXPECT_EQ(w.asker.status().state, ActorState::kIdle);
}

TEST(RequestThen, R_ACT_10_AnErrorFromTheContinuationFailsTheActor) {
  World w;
  Go go{w.server.ref().port<Question>(), 1};
  go.fail_in_continuation = true;
  w.asker.ref().send(w.t.client, go);
  w.t.run();
  EXPECT_EQ(w.asker.status().state, ActorState::kFailed);
  EXPECT_NE(w.asker.status().reason.find("continuation gave up"), std::string::npos);
}

TEST(RequestThen, R_ACT_10_ARestartDropsTheOldIncarnationsContinuations) {
  World w;
  std::vector<std::string> log;
  auto asker = *spawn<Asker>(
      w.t.proc,
      SpawnOptions{Supervision::one_for_one().with_backoff(absl::Seconds(1), absl::Seconds(1))},
      "restarting-asker", &log, PortRef<Answer>{});
  Go go{w.server.ref().port<Question>(), 1, true};
  asker.ref().send(w.t.client, go);
  go.fail_in_continuation = true;
  go.ignore = false;
  w.t.run();
  ASSERT_TRUE(w.kept.valid());
  // Fail the asker some other way: a continuation error of a second request.
  asker.ref().send(w.t.client, go);
  w.t.run();
  ASSERT_EQ(asker.status().state, ActorState::kRestarting);
  w.t.advance(absl::Seconds(1));
  w.kept.send(w.t.client, Answer{9});  // the reply to the first incarnation
  w.t.run();
  EXPECT_EQ(log, (std::vector<std::string>{"asked", "asked"}));  // no continuation ran
  absl::StatusOr<runtime::EnvelopePtr> back = w.t.client.next_undeliverable(absl::ZeroDuration());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->root_failure()->kind, runtime::FailureKind::kPortGone);
}

// R-ACT-9: a continuation handles no handler message, so it has nothing to stash.
struct StashingAsker : Actor, Handles<Go> {
  absl::Status* stashed;
  explicit StashingAsker(absl::Status* s) : stashed(s) {}
  absl::Status handle(Context& cx, Go g) override {
    cx.request(g.server, Question{g.n, false, {}}, absl::Seconds(60))
        .then([this](Context& cx, absl::StatusOr<Answer> a) -> absl::Status {
          if (!a.ok()) return a.status();
          *stashed = cx.stash(*a);
          return absl::OkStatus();
        });
    return absl::OkStatus();
  }
};

TEST(RequestThen, R_ACT_9_AContinuationCannotStashItsReply) {
  World w;
  absl::Status stashed;
  auto asker = *spawn<StashingAsker>(w.t.proc, "stashing-asker", &stashed);
  asker.ref().send(w.t.client, Go{w.server.ref().port<Question>(), 4});
  w.t.run();
  EXPECT_EQ(stashed.code(), absl::StatusCode::kFailedPrecondition) << stashed;
  EXPECT_EQ(asker.status().state, ActorState::kIdle);
}

TEST(RequestThen, R_ACT_10_OnAThreadedProc) {
  test_support::ProcWithClient pc(runtime::ProcOptions::threads(2), "test");
  postal::OncePortRef<Answer> kept;
  auto server = *spawn<Server>(pc.proc, "server", &kept);
  auto [port, receiver] = runtime::open_port<Answer>(*pc.client);
  std::vector<std::string> log;
  auto asker = *spawn<Asker>(pc.proc, "asker", &log, port.bind());
  asker.ref().send(*pc.client, Go{server.ref().port<Question>(), 5});
  absl::StatusOr<Answer> a = receiver.recv(absl::Seconds(10));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->n, 10);
}

}  // namespace
}  // namespace postal::actors
