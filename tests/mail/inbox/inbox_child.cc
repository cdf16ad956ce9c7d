// inbox_child: a second process on an inbox file, for inbox_process_test.cc.
//
//   inbox_child accept FILE PREFIX N
//       accepts messages PREFIX0 … PREFIX<N-1> (consumer "c", source "s", global scope) and
//       prints "accepted ID" or "duplicate ID" for each; "error …" on failure.
//   inbox_child work FILE
//       runs a worker for consumer "c" whose handler inserts the record's message id into table
//       `effect`, prints "in-handler ID" and then blocks inside its transaction until killed.
// Output is line-buffered, so every complete line is a fact that held.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "postal/mail/inbox.h"
#include "postal/mail/inbox_worker.h"

namespace mail = postal::mail;

namespace {

void say(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

int accept_many(mail::Inbox& inbox, const std::string& prefix, int n) {
  for (int i = 0; i < n; ++i) {
    const std::string id = prefix + std::to_string(i);
    mail::InboxMessage m;
    // std::string temporaries, not `= "s"`: GCC 12 -O3 raises a false -Wrestrict on the latter.
    m.source = std::string("s");
    m.consumer = std::string("c");
    m.message_id = id;
    m.event_type = std::string("t");
    m.payload = std::string(R"({"n":1})");
    absl::StatusOr<mail::AcceptReceipt> r = inbox.accept(m);
    if (!r.ok()) return say(absl::StrCat("error ", r.status().ToString())), 1;
    say(absl::StrCat(r->kind == mail::AcceptReceipt::Kind::kAccepted ? "accepted " : "duplicate ",
                     id));
  }
  return 0;
}

int work(mail::Inbox& inbox) {
  std::vector<mail::HandlerRegistration> handlers;
  handlers.push_back({.consumer = "c",
                      .supports = {{"t", 1}},
                      .handler = [](std::string_view, mail::HandlerContext& ctx) -> absl::Status {
                        absl::Status s =
                            ctx.tx.execute("INSERT INTO effect (message_id) VALUES (?)",
                                           {ctx.record.message.message_id});
                        if (!s.ok()) return s;
                        say(absl::StrCat("in-handler ", ctx.record.message.message_id));
                        while (true) ::pause();  // killed here, inside the transaction
                      }});
  auto worker = mail::InboxWorker::create(inbox, std::move(handlers));
  if (!worker.ok()) return say(absl::StrCat("error ", worker.status().ToString())), 1;
  absl::StatusOr<mail::ProcessResult> r = (*worker)->run_once();
  say(r.ok() ? std::string("returned") : absl::StrCat("error ", r.status().ToString()));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() >= 2) {
    auto inbox = mail::Inbox::open(args[1]);
    if (!inbox.ok()) return say(absl::StrCat("error ", inbox.status().ToString())), 1;
    if (args.size() == 4 && args[0] == "accept") {
      return accept_many(**inbox, args[2], std::stoi(args[3]));
    }
    if (args.size() == 2 && args[0] == "work") return work(**inbox);
  }
  std::fputs("usage: inbox_child accept FILE PREFIX N | work FILE\n", stderr);
  return 2;
}
