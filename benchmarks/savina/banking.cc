// Banking (Savina 15, CAF port caf_15_banking): a teller sends n credit orders at once to random
// source accounts among a; each source debits itself, asks the destination (always an account
// with a higher index, so waits never form a cycle) to credit the amount, waits for its answer
// and then tells the teller. Default a = 1,000, n = 50,000; amounts and accounts from
// SavinaRandom seeded 123456, as in the port; balances start at its huge initial balance.
//
// The port has three ways to wait for the destination; each has a postal twin:
//   banking-blocking  `ref.request(cx, ...)` in the handler: the fiber blocks, the account handles
//                     nothing else meanwhile (CAF `request(...).await`, 6000 s timeout)
//   banking-then      `cx.request(...).then(...)`: the handler returns, the continuation runs
//                     later and the account keeps handling messages (CAF `request(...).then`)
//   banking-become    the answer comes to a plain port; until it does, the account receives
//                     only the answer (`cx.receive_only<Reply>()`, then `cx.receive_all()`): the
//                     others wait unhandled (CAF `become(keep_behavior, ...)` with `skip`, "fast")
//   banking-stash     the same protocol, but each handler stashes its message itself while the
//                     account waits (`cx.stash`): a second postal style beside the same CAF variant
//
// Check (balance conserved): besides the port's double balances, every account keeps its
// debits and credits in exact micro-units; the sums over all accounts must be equal and equal
// to what the teller ordered, and the teller must have heard back n times.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "postal/postal.h"
#include "savina_random.h"
#include "workload.h"

namespace postal::savina::banking {

// The port's reply_msg_atom: from the destination to the source, and from the source to the
// teller.
struct Reply {
  template <class A>
  void serialize(A&) {}
};
// The port's debit_msg: sent to the destination, which adds `amount`.
struct Debit {
  using Reply = banking::Reply;
  postal::OncePortRef<banking::Reply> reply_to;  // a request's reply port
  double amount = 0;
  template <class A>
  void serialize(A& a) {
    a(reply_to, amount);
  }
};
// Debit for banking-stash: the answer goes to the source's own Reply port.
struct DebitTo {
  postal::PortRef<Reply> sender;
  double amount = 0;
  template <class A>
  void serialize(A& a) {
    a(sender, amount);
  }
};
struct Stop {
  template <class A>
  void serialize(A&) {}
};
struct Start {
  template <class A>
  void serialize(A&) {}
};

}  // namespace postal::savina::banking

POSTAL_MESSAGE(postal::savina::banking::Reply, "savina.banking.Reply");
POSTAL_MESSAGE(postal::savina::banking::Debit, "savina.banking.Debit");
POSTAL_MESSAGE(postal::savina::banking::DebitTo, "savina.banking.DebitTo");
POSTAL_MESSAGE(postal::savina::banking::Stop, "savina.banking.Stop");
POSTAL_MESSAGE(postal::savina::banking::Start, "savina.banking.Start");

namespace postal::savina::banking {

// The port's "6000 s" (HIGH_TIMEOUT): postal's requests always have a deadline.
constexpr absl::Duration kRequestTimeout = absl::Seconds(6000);

int64_t micros(double amount) { return std::llround(amount * 1e6); }

// One account's exact record, read after the proc is gone.
struct Ledger {
  int64_t debited = 0;   // micro-units taken out (as a source)
  int64_t credited = 0;  // micro-units put in (as a destination)
};

// The port's credit_msg, for an account class A: take `amount` out, put it into `recipient`.
template <class A>
struct Credit {
  postal::PortRef<Reply> sender;
  double amount = 0;
  postal::ActorRef<A> recipient;
  template <class Ar>
  void serialize(Ar& a) {
    a(sender, amount, recipient);
  }
};

class BlockingAccount;
class ThenAccount;
class StashAccount;
class BecomeAccount;

}  // namespace postal::savina::banking

POSTAL_MESSAGE(postal::savina::banking::Credit<postal::savina::banking::BlockingAccount>,
               "savina.banking.CreditBlocking");
POSTAL_MESSAGE(postal::savina::banking::Credit<postal::savina::banking::ThenAccount>,
               "savina.banking.CreditThen");
POSTAL_MESSAGE(postal::savina::banking::Credit<postal::savina::banking::StashAccount>,
               "savina.banking.CreditStash");
POSTAL_MESSAGE(postal::savina::banking::Credit<postal::savina::banking::BecomeAccount>,
               "savina.banking.CreditBecome");

namespace postal::savina::banking {

// What every account variant shares: its balance and its ledger.
class AccountBase : public Actor {
 public:
  AccountBase(double balance, Ledger* ledger) : balance_(balance), ledger_(ledger) {}

 protected:
  void take(double amount) {
    balance_ -= amount;
    ledger_->debited += micros(amount);
  }
  void put(double amount) {
    balance_ += amount;
    ledger_->credited += micros(amount);
  }

 private:
  double balance_;
  Ledger* ledger_;
};

// The request styles' accounts (blocking, then): they differ only in how a credit waits.
template <class Self>
class RequestAccount : public AccountBase, public Handles<Credit<Self>, Debit, Stop> {
 public:
  using AccountBase::AccountBase;
  using Handler<Credit<Self>>::handle;  // each variant overrides it; clang's -Woverloaded-virtual
  absl::Status handle(Context& cx, Debit m) override {
    put(m.amount);
    m.reply_to.send(cx, Reply{});
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Stop) override {
    cx.stop();
    return absl::OkStatus();
  }
};

class BlockingAccount : public RequestAccount<BlockingAccount> {
 public:
  using RequestAccount::handle;
  using RequestAccount::RequestAccount;
  absl::Status handle(Context& cx, Credit<BlockingAccount> m) override {
    take(m.amount);
    absl::StatusOr<Reply> r = m.recipient.request(cx, Debit{{}, m.amount}, kRequestTimeout);
    if (!r.ok()) return r.status();
    m.sender.send(cx, Reply{});
    return absl::OkStatus();
  }
};

class ThenAccount : public RequestAccount<ThenAccount> {
 public:
  using RequestAccount::handle;
  using RequestAccount::RequestAccount;
  absl::Status handle(Context& cx, Credit<ThenAccount> m) override {
    take(m.amount);
    cx.request(m.recipient.port<Debit>(), Debit{{}, m.amount}, kRequestTimeout)
        .then([sender = std::move(m.sender)](Context& cx, absl::StatusOr<Reply> r) -> absl::Status {
          if (!r.ok()) return r.status();
          sender.send(cx, Reply{});
          return absl::OkStatus();
        });
    return absl::OkStatus();
  }
};

class StashAccount : public AccountBase,
                     public Handles<Credit<StashAccount>, DebitTo, Reply, Stop> {
 public:
  using AccountBase::AccountBase;
  absl::Status init(Context& cx) override {
    self_ = cx.self<StashAccount>().port<Reply>();
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Credit<StashAccount> m) override {
    if (waiting_) return cx.stash(std::move(m));
    take(m.amount);
    m.recipient.send(cx, DebitTo{self_, m.amount});
    teller_ = std::move(m.sender);
    waiting_ = true;
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, DebitTo m) override {
    if (waiting_) return cx.stash(std::move(m));
    put(m.amount);
    m.sender.send(cx, Reply{});
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Reply) override {
    teller_.send(cx, Reply{});
    waiting_ = false;
    cx.unstash_all();
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Stop m) override {
    if (waiting_) return cx.stash(std::move(m));
    cx.stop();
    return absl::OkStatus();
  }

 private:
  PortRef<Reply> self_;
  PortRef<Reply> teller_;
  bool waiting_ = false;
};

// CAF's become/unbecome "fast" twin: the handlers are the plain ones; while waiting the cell
// holds back everything but the answer.
class BecomeAccount : public AccountBase,
                      public Handles<Credit<BecomeAccount>, DebitTo, Reply, Stop> {
 public:
  using AccountBase::AccountBase;
  absl::Status init(Context& cx) override {
    self_ = cx.self<BecomeAccount>().port<Reply>();
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Credit<BecomeAccount> m) override {
    take(m.amount);
    m.recipient.send(cx, DebitTo{self_, m.amount});
    teller_ = std::move(m.sender);
    cx.receive_only<Reply>();
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, DebitTo m) override {
    put(m.amount);
    m.sender.send(cx, Reply{});
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Reply) override {
    teller_.send(cx, Reply{});
    cx.receive_all();
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Stop) override {
    cx.stop();
    return absl::OkStatus();
  }

 private:
  PortRef<Reply> self_;
  PortRef<Reply> teller_;
};

struct Outcome {
  int completed = 0;    // replies the teller heard
  int64_t ordered = 0;  // micro-units the teller ordered moved
  std::vector<Ledger> ledgers;
};

template <class A>
class Teller : public Actor, public Handles<Start, Reply> {
 public:
  Teller(int accounts, int bankings, Outcome* outcome, Completion* done)
      : num_accounts_(accounts), bankings_(bankings), outcome_(outcome), done_(done) {}
  absl::Status init(Context& cx) override {
    const double initial =
        ((std::numeric_limits<double>::max() / (num_accounts_ * bankings_)) / 1000) * 1000;
    accounts_.reserve(num_accounts_);
    for (int i = 0; i < num_accounts_; ++i) {
      absl::StatusOr<ActorHandle<A>> h = cx.spawn<A>("account", initial, &outcome_->ledgers[i]);
      if (!h.ok()) return h.status();
      accounts_.push_back(h->ref());
    }
    self_ = cx.self<Teller<A>>().template port<Reply>();
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Start) override {
    for (int m = 0; m < bankings_; ++m) generate_work(cx);
    return absl::OkStatus();
  }
  absl::Status handle(Context& cx, Reply) override {
    if (++outcome_->completed == bankings_) {
      for (const auto& account : accounts_) account.send(cx, Stop{});
      cx.stop();
      done_->done();
    }
    return absl::OkStatus();
  }

 private:
  // The port's generate_work: the destination is always above the source.
  void generate_work(Context& cx) {
    const int size = static_cast<int>(accounts_.size());
    const int src = random_.next_int((size / 10) * 8);
    int loop = random_.next_int(size - src);
    if (loop == 0) ++loop;
    const int dest = src + loop;
    const double amount = std::abs(random_.next_double()) * 1000;
    outcome_->ordered += micros(amount);
    accounts_[src].send(cx, Credit<A>{self_, amount, accounts_[dest]});
  }

  int num_accounts_;
  int bankings_;
  Outcome* outcome_;
  Completion* done_;
  std::vector<ActorRef<A>> accounts_;
  PortRef<Reply> self_;
  SavinaRandom random_{123456};
};

template <class A>
absl::StatusOr<std::string> run_banking(const RunOptions& options, std::string_view what) {
  const bool full = options.size == Size::kDefault;
  const int a = full ? 1000 : 50;
  const int n = full ? 50000 : 2000;
  Outcome outcome;
  outcome.ledgers.resize(a);
  Completion done;
  absl::Status run = run_iteration(options, what, done, [&](Proc& proc, Client& main) {
    absl::StatusOr<ActorHandle<Teller<A>>> teller =
        spawn<Teller<A>>(proc, "teller", a, n, &outcome, &done);
    if (!teller.ok()) return annotate(teller.status(), "spawn");
    teller->ref().send(main, Start{});
    return absl::OkStatus();
  });
  if (!run.ok()) return run;
  int64_t debited = 0;
  int64_t credited = 0;
  for (const Ledger& l : outcome.ledgers) {
    debited += l.debited;
    credited += l.credited;
  }
  if (outcome.completed != n || debited != credited || debited != outcome.ordered) {
    return absl::InternalError(absl::StrCat(outcome.completed, " of ", n, " transactions; ",
                                            debited, " µ taken, ", credited, " µ put, ",
                                            outcome.ordered, " µ ordered"));
  }
  return absl::StrCat(n, " transactions, ", debited, " µ moved, balance conserved");
}

}  // namespace postal::savina::banking

namespace postal::savina {

absl::StatusOr<std::string> run_banking_blocking(const RunOptions& options) {
  return banking::run_banking<banking::BlockingAccount>(options, "banking-blocking");
}
absl::StatusOr<std::string> run_banking_then(const RunOptions& options) {
  return banking::run_banking<banking::ThenAccount>(options, "banking-then");
}
absl::StatusOr<std::string> run_banking_become(const RunOptions& options) {
  return banking::run_banking<banking::BecomeAccount>(options, "banking-become");
}
absl::StatusOr<std::string> run_banking_stash(const RunOptions& options) {
  return banking::run_banking<banking::StashAccount>(options, "banking-stash");
}

}  // namespace postal::savina
