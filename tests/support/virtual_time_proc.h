// VirtualTimeProc: a deterministic proc on a clock the test moves, with one Client — the fixture
// of timing tests (tombstone grace, restart backoff, timers) that must never sleep.
//
// `advance(d)` moves the clock and steps until idle: the timers due by then fire (the scheduler
// fires them before every step) and what they post is handled.
#pragma once

#include <memory>
#include <string_view>

#include "absl/time/time.h"
#include "support/proc_client.h"

namespace postal::test_support {

struct VirtualTimeProc {
  explicit VirtualTimeProc(runtime::ProcOptions options = runtime::ProcOptions::deterministic(),
                           std::string_view client_name = "test")
      : now(std::make_shared<absl::Time>(absl::FromUnixSeconds(1'000'000))),
        pc(with_clock(std::move(options), now), client_name),
        proc(pc.proc),
        client(*pc.client) {}

  void advance(absl::Duration d) {
    *now += d;
    proc.scheduler().run_until_idle();
  }
  void run() { proc.scheduler().run_until_idle(); }

  std::shared_ptr<absl::Time> now;
  ProcWithClient pc;
  runtime::Proc& proc;
  runtime::Client& client;

 private:
  static runtime::ProcOptions with_clock(runtime::ProcOptions o, std::shared_ptr<absl::Time> t) {
    o.clock = [t] { return *t; };
    return o;
  }
};

}  // namespace postal::test_support
