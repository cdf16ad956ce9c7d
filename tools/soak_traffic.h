// SoakTraffic: the load `postal soak` keeps on a topology while it breaks its procs.
//
// One thread sends pings (routing::Payload, kPing) from a Client on the host's proc to the echo
// of every target proc — half of them straight, half through a postal.Relay on another proc (a
// second hop between procs, whose returns the relay reports as RelayedReturn) — at most `window`
// unresolved per target and `rate` per second in all,
// bodies of 16 B to 2 KiB and now and then one of 300 KiB (a chunked transfer, wire.md §9) —
// and feeds the SoakLedger: each payload's seq is its ledger id, each reply (the echo sends the
// payload back) and each returned envelope (Client::next_undeliverable) resolves that id.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "postal/routing/workload.h"
#include "postal/runtime/client.h"
#include "postal/runtime/proc.h"
#include "soak_ledger.h"

namespace postal::tools {

class SoakTraffic {
 public:
  SoakTraffic(SoakLedger& ledger, uint64_t seed, uint64_t rate, uint64_t window)
      : ledger_(ledger), rng_(seed), rate_(rate), window_(window) {}
  ~SoakTraffic() { stop(); }

  // Opens the client and its ports on `proc`; the address relays report returns to.
  absl::StatusOr<runtime::PortAddr> attach(runtime::Proc& proc);
  // Targets, before start(): the echo each one's pings go to; its index in the ledger.
  uint32_t add_target(runtime::ActorAddr echo);
  // A relay on proc `via` (a target index) that forwards to `target`'s echo.
  void add_relay(uint32_t via, uint32_t target, runtime::ActorAddr relay);
  // A target's proc restarted: later pings count against its new incarnation.
  void next_incarnation(uint32_t target);
  uint32_t incarnation(uint32_t target) const;

  void start();
  void stop_sending() { sending_ = false; }
  void stop();

 private:
  struct Target {
    runtime::ActorAddr echo;
    uint32_t incarnation = 0;
    std::vector<std::pair<uint32_t, runtime::ActorAddr>> relays;  // (via, relay)
  };
  void run();
  void send_one(uint32_t target);
  bool drain();  // replies and returns waiting now; whether there were any

  SoakLedger& ledger_;
  std::mt19937_64 rng_;  // the traffic thread's
  const uint64_t rate_;
  const uint64_t window_;
  mutable absl::Mutex mu_;
  std::vector<Target> targets_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<runtime::Client> client_;
  std::unique_ptr<runtime::PortReceiver<routing::Payload>> replies_;
  std::unique_ptr<runtime::PortReceiver<routing::RelayedReturn>> relayed_;
  runtime::PortRef<routing::Payload> reply_to_;
  std::atomic<bool> sending_{true};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace postal::tools
