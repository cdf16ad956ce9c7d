// Chameneos (Savina 6, CAF port caf_06_chameneos): c chameneos meet in a mall, which pairs two
// waiting ones per meeting; each pair exchanges colours. After m meetings the mall turns every
// newcomer away and each reports how often it met. Default c = 100, m = 200,000. Check: the
// reported meetings add up to 2 m (two chameneos per meeting).
#include <optional>

#include "absl/strings/str_cat.h"
#include "postal/postal.h"
#include "workload.h"

namespace postal::savina::chameneos {

enum class Color : int { kRed, kBlue, kYellow, kFaded };

class Chameneo;
class Mall;

struct Meet {
  Color color = Color::kRed;
  postal::ActorRef<Chameneo> sender;
  template <class A>
  void serialize(A& a) {
    a(color, sender);
  }
};
struct Change {
  Color color = Color::kRed;
  postal::ActorRef<Chameneo> sender;
  template <class A>
  void serialize(A& a) {
    a(color, sender);
  }
};
struct MeetingCount {
  int count = 0;
  postal::ActorRef<Chameneo> sender;
  template <class A>
  void serialize(A& a) {
    a(count, sender);
  }
};
struct Exit {
  postal::ActorRef<Mall> sender;
  template <class A>
  void serialize(A& a) {
    a(sender);
  }
};

}  // namespace postal::savina::chameneos

POSTAL_MESSAGE(postal::savina::chameneos::Meet, "savina.chameneos.Meet");
POSTAL_MESSAGE(postal::savina::chameneos::Change, "savina.chameneos.Change");
POSTAL_MESSAGE(postal::savina::chameneos::MeetingCount, "savina.chameneos.MeetingCount");
POSTAL_MESSAGE(postal::savina::chameneos::Exit, "savina.chameneos.Exit");

namespace postal::savina::chameneos {

// Savina's colour complement table.
Color complement(Color color, Color other) {
  if (color == Color::kFaded || other == Color::kFaded) return Color::kFaded;
  if (color == other) return color;
  // Two different of red, blue, yellow: the third.
  const int third = 3 - static_cast<int>(color) - static_cast<int>(other);
  return static_cast<Color>(third);
}

class Chameneo : public Actor, public Handles<Meet, Change, Exit> {
 public:
  Chameneo(ActorRef<Mall> mall, Color color) : mall_(std::move(mall)), color_(color) {}
  absl::Status init(Context& cx) override;
  absl::Status handle(Context& cx, Meet m) override;
  absl::Status handle(Context& cx, Change m) override;
  absl::Status handle(Context& cx, Exit m) override;

 private:
  void meet(Context& cx);

  ActorRef<Mall> mall_;
  ActorRef<Chameneo> self_;
  Color color_;
  int meetings_ = 0;
};

struct Result {
  int sum_meetings = 0;
  int faded = 0;
};

class Mall : public Actor, public Handles<MeetingCount, Meet> {
 public:
  Mall(int meetings, int chameneos, Result* result, Completion* done)
      : left_(meetings), chameneos_(chameneos), result_(result), done_(done) {}
  absl::Status init(Context& cx) override {
    self_ = cx.self<Mall>();
    for (int i = 0; i < chameneos_; ++i) {
      absl::StatusOr<ActorHandle<Chameneo>> c =
          cx.spawn<Chameneo>("chameneo", self_, static_cast<Color>(i % 3));
      if (!c.ok()) return c.status();
    }
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, MeetingCount m) override {
    ++result_->faded;
    result_->sum_meetings += m.count;
    if (result_->faded == chameneos_) {
      cx.stop();
      done_->done();
    }
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Meet m) override {
    if (left_ == 0) {
      m.sender.send(cx, Exit{self_});
    } else if (!waiting_) {
      waiting_ = std::move(m.sender);
    } else {
      --left_;
      waiting_->send(cx, std::move(m));
      waiting_.reset();
    }
    return absl::OkStatus();
  }

 private:
  int left_;
  int chameneos_;
  Result* result_;
  Completion* done_;
  ActorRef<Mall> self_;
  std::optional<ActorRef<Chameneo>> waiting_;
};

absl::Status Chameneo::init(Context& cx) {
  self_ = cx.self<Chameneo>();
  meet(cx);
  return absl::OkStatus();
}

void Chameneo::meet(Context& cx) { mall_.send(cx, Meet{color_, self_}); }

absl::Status Chameneo::handle(Context& cx, Meet m) {
  color_ = complement(color_, m.color);
  ++meetings_;
  m.sender.send(cx, Change{color_, self_});
  meet(cx);
  return absl::OkStatus();
}

absl::Status Chameneo::handle(Context& cx, Change m) {
  color_ = m.color;
  ++meetings_;
  meet(cx);
  return absl::OkStatus();
}

absl::Status Chameneo::handle(Context& cx, Exit m) {
  color_ = Color::kFaded;
  m.sender.send(cx, MeetingCount{meetings_, self_});
  cx.stop();
  return absl::OkStatus();
}

}  // namespace postal::savina::chameneos

namespace postal::savina {

absl::StatusOr<std::string> run_chameneos(const RunOptions& options) {
  using namespace chameneos;
  const bool full = options.size == Size::kDefault;
  const int c = full ? 100 : 10;
  const int m = full ? 200000 : 5000;
  Result result;
  Completion done;
  absl::Status run = run_iteration(options, "chameneos", done, [&](Proc& proc, Client&) {
    return annotate(spawn<Mall>(proc, "mall", m, c, &result, &done).status(), "spawn");
  });
  if (!run.ok()) return run;
  if (result.sum_meetings != 2 * m) {
    return absl::InternalError(
        absl::StrCat(result.sum_meetings, " meetings reported, not ", 2 * m));
  }
  return absl::StrCat(c, " chameneos reported ", result.sum_meetings, " meetings");
}

}  // namespace postal::savina
