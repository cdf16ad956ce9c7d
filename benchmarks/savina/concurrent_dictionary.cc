// Concurrent Dictionary (Savina 8, CAF port caf_08_concdict): w workers each make m requests to
// one dictionary actor (an unordered_map), w % of them writes, the rest reads, one at a time
// (each waits for its result). Default w = 20, m = 10,000, 10 % writes, keys and values from
// SavinaRandom seeded per worker as in the port. Check: the dictionary handled w·m requests and
// holds exactly the keys the workers' random sequences wrote.
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "postal/postal.h"
#include "savina_random.h"
#include "workload.h"

namespace postal::savina::concdict {

class Dictionary;
struct Result {
  postal::ActorRef<Dictionary> sender;
  int key = 0;
  template <class A>
  void serialize(A& a) {
    a(sender, key);
  }
};
struct Write {
  postal::PortRef<Result> sender;
  int key = 0;
  int value = 0;
  template <class A>
  void serialize(A& a) {
    a(sender, key, value);
  }
};
struct Read {
  postal::PortRef<Result> sender;
  int key = 0;
  template <class A>
  void serialize(A& a) {
    a(sender, key);
  }
};
struct EndWork {
  template <class A>
  void serialize(A&) {}
};

}  // namespace postal::savina::concdict

POSTAL_MESSAGE(postal::savina::concdict::Result, "savina.concdict.Result");
POSTAL_MESSAGE(postal::savina::concdict::Write, "savina.concdict.Write");
POSTAL_MESSAGE(postal::savina::concdict::Read, "savina.concdict.Read");
POSTAL_MESSAGE(postal::savina::concdict::EndWork, "savina.concdict.EndWork");

namespace postal::savina::concdict {

struct Params {
  int workers = 0;
  int msgs_per_worker = 0;
  int write_percent = 10;
};

struct Outcome {
  int requests = 0;  // handled by the dictionary
  size_t size = 0;   // of the map at the end
};

class Dictionary : public Actor, public Handles<Write, Read, EndWork> {
 public:
  Dictionary(Outcome* outcome, Completion* done) : outcome_(outcome), done_(done) {}
  absl::Status init(Context& cx) override {
    self_ = cx.self<Dictionary>();
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Write m) override {
    ++requests_;
    map_[m.key] = m.value;
    m.sender.send(cx, Result{self_, m.value});
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Read m) override {
    ++requests_;
    auto it = map_.find(m.key);
    m.sender.send(cx, Result{self_, it != map_.end() ? it->second : -1});
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, EndWork) override {
    outcome_->requests = requests_;
    outcome_->size = map_.size();
    cx.stop();
    done_->done();
    return absl::OkStatus();
  }

 private:
  Outcome* outcome_;
  Completion* done_;
  ActorRef<Dictionary> self_;
  std::unordered_map<int, int> map_;
  int requests_ = 0;
};

class Worker : public Actor, public Handles<Result> {
 public:
  Worker(PortRef<EndWork> master, ActorRef<Dictionary> dictionary, int id, const Params& p)
      : master_(std::move(master)),
        dictionary_(std::move(dictionary)),
        msgs_(p.msgs_per_worker),
        write_percent_(p.write_percent),
        random_(id + p.msgs_per_worker + p.write_percent) {}
  absl::Status init(Context& cx) override {
    self_ = cx.self<Worker>().port<Result>();
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Result) override {
    ++count_;
    if (count_ <= msgs_) {
      if (random_.next_int(100) < write_percent_) {
        const int key = random_.next_int();
        dictionary_.send(cx, Write{self_, key, random_.next_int()});
      } else {
        dictionary_.send(cx, Read{self_, random_.next_int()});
      }
    } else {
      master_.send(cx, EndWork{});
      cx.stop();
    }
    return absl::OkStatus();
  }

 private:
  PortRef<EndWork> master_;
  ActorRef<Dictionary> dictionary_;
  int msgs_;
  int write_percent_;
  SavinaRandom random_;
  PortRef<Result> self_;
  int count_ = 0;
};

class Master : public Actor, public Handles<EndWork> {
 public:
  Master(Params p, Outcome* outcome, Completion* done) : p_(p), outcome_(outcome), done_(done) {}
  absl::Status init(Context& cx) override {
    absl::StatusOr<ActorHandle<Dictionary>> dict =
        cx.spawn<Dictionary>("dictionary", outcome_, done_);
    if (!dict.ok()) return dict.status();
    dictionary_ = dict->ref();
    const PortRef<EndWork> self = cx.self<Master>().port<EndWork>();
    for (int i = 0; i < p_.workers; ++i) {
      absl::StatusOr<ActorHandle<Worker>> w = cx.spawn<Worker>("worker", self, dictionary_, i, p_);
      if (!w.ok()) return w.status();
      w->ref().send(cx, Result{ActorRef<Dictionary>(), -1});  // the port's do_work_msg
    }
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, EndWork) override {
    if (++terminated_ == p_.workers) {
      dictionary_.send(cx, EndWork{});
      cx.stop();
    }
    return absl::OkStatus();
  }

 private:
  Params p_;
  Outcome* outcome_;
  Completion* done_;
  ActorRef<Dictionary> dictionary_;
  int terminated_ = 0;
};

// The keys the workers write, by replaying their random sequences.
size_t expected_size(const Params& p) {
  std::unordered_set<int> keys;
  for (int id = 0; id < p.workers; ++id) {
    SavinaRandom random(id + p.msgs_per_worker + p.write_percent);
    for (int i = 0; i < p.msgs_per_worker; ++i) {
      if (random.next_int(100) < p.write_percent) {
        keys.insert(random.next_int());
        random.next_int();
      } else {
        random.next_int();
      }
    }
  }
  return keys.size();
}

}  // namespace postal::savina::concdict

namespace postal::savina {

absl::StatusOr<std::string> run_concurrent_dictionary(const RunOptions& options) {
  using namespace concdict;
  const bool full = options.size == Size::kDefault;
  Params p{full ? 20 : 5, full ? 10000 : 1000, 10};
  Outcome outcome;
  Completion done;
  absl::Status run = run_iteration(options, "concdict", done, [&](Proc& proc, Client&) {
    return annotate(spawn<Master>(proc, "master", p, &outcome, &done).status(), "spawn");
  });
  if (!run.ok()) return run;
  const int requests = p.workers * p.msgs_per_worker;
  const size_t size = expected_size(p);
  if (outcome.requests != requests || outcome.size != size) {
    return absl::InternalError(absl::StrCat("dictionary handled ", outcome.requests, " (expected ",
                                            requests, "), holds ", outcome.size, " keys (expected ",
                                            size, ")"));
  }
  return absl::StrCat("dictionary handled ", requests, " requests, holds ", size, " keys");
}

}  // namespace postal::savina
