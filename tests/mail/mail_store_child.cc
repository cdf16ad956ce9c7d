// mail_store_child: a second process on a SQLite store, for sqlite_store_process_test.cc.
//
//   mail_store_child create FILE PREFIX N
//       creates public mailboxes PREFIX0 … PREFIX<N-1>, retrying a create that fails with
//       IoFailed (admission contention, M-BOX-7); prints "created NAME" or "existing NAME" per
//       mailbox and "contended K" at the end.
//   mail_store_child burst FILE os|disk MAILBOX THREADS
//       creates MAILBOX, then appends urgent messages "T:I" from THREADS threads until killed,
//       printing "acked SEQ BODY" for each acknowledged append.
// Output is line-buffered through one mutex, so every complete line is a fact that held.
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "postal/mail/mail_errors.h"
#include "postal/mail/sqlite_mail_store.h"

namespace mail = postal::mail;

namespace {

std::mutex out_mu;

void say(const std::string& line) {
  std::lock_guard<std::mutex> lock(out_mu);
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

absl::StatusOr<mail::CreateResult> create_retrying(mail::MailStore& store, const std::string& name,
                                                   int* contended) {
  while (true) {
    absl::StatusOr<mail::CreateResult> r = store.create({.name = name});
    if (!mail::IsIoFailed(r.status())) return r;
    ++*contended;
  }
}

int create_many(mail::MailStore& store, const std::string& prefix, int n) {
  int contended = 0;
  for (int i = 0; i < n; ++i) {
    const std::string name = prefix + std::to_string(i);
    absl::StatusOr<mail::CreateResult> r = create_retrying(store, name, &contended);
    if (!r.ok()) {
      say("error " + r.status().ToString());
      return 1;
    }
    say((r->created ? "created " : "existing ") + name);
  }
  say(absl::StrCat("contended ", contended));
  return 0;
}

int burst(mail::MailStore& store, const std::string& mailbox, int threads) {
  int contended = 0;
  if (absl::StatusOr<mail::CreateResult> r = create_retrying(store, mailbox, &contended); !r.ok()) {
    say("error " + r.status().ToString());
    return 1;
  }
  say("ready");
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0;; ++i) {
        std::string body = absl::StrCat(t, ":", i);
        absl::StatusOr<uint64_t> seq = store.append(mailbox, mail::Priority::kUrgent, body);
        if (!seq.ok()) {
          say("error " + seq.status().ToString());
          return;
        }
        say(absl::StrCat("acked ", *seq, " ", body));
      }
    });
  }
  for (std::thread& w : workers) w.join();
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 4 && args[0] == "create") {
    auto store = mail::SqliteMailStore::open(args[1]);
    if (!store.ok()) return say("error " + store.status().ToString()), 1;
    return create_many(**store, args[2], std::stoi(args[3]));
  }
  if (args.size() == 5 && args[0] == "burst") {
    auto store = mail::SqliteMailStore::open(
        args[1],
        {.durability = args[2] == "disk" ? mail::Durability::kDisk : mail::Durability::kOs});
    if (!store.ok()) return say("error " + store.status().ToString()), 1;
    return burst(**store, args[3], std::stoi(args[4]));
  }
  std::fputs("usage: mail_store_child create FILE PREFIX N | burst FILE os|disk MAILBOX THREADS\n",
             stderr);
  return 2;
}
