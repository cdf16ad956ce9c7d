// The messages of the overload demonstration (overload_bench.cc, overload_consumer.cc).
#pragma once

#include <cstdint>
#include <string>

#include "postal/runtime/port.h"
#include "postal/wire/type_registry.h"

namespace postal::overload {

// One unit of work for the consumer (1 ms each).
struct Work {
  int64_t seq = 0;
  std::string pad;
  template <class A>
  void serialize(A& a) {
    a(seq, pad);
  }
};

// The producer's self-message: send the next burst.
struct Tick {
  template <class A>
  void serialize(A&) {}
};

// To the second actor behind the same connection; it answers at once.
struct Ping {
  using Reply = int64_t;
  int64_t n = 0;
  runtime::OncePortRef<int64_t> reply_to;
  template <class A>
  void serialize(A& a) {
    a(n, reply_to);
  }
};

// What the consumer's proc says about itself (internal accounting, not sampled from outside).
struct ConsumerStats {
  uint64_t handled = 0;           // Work handled so far
  uint64_t queued = 0;            // the consumer's mailbox now: envelopes
  uint64_t queued_bytes = 0;      //   and bytes (MailboxBound accounting)
  uint64_t max_queued_bytes = 0;  // the largest queued_bytes the consumer saw at a handler
  uint64_t bound_bytes = 0;
  uint64_t bound_messages = 0;
  uint64_t rss_kib = 0;  // the consumer process's VmRSS
  // Returns the consumer's proc could not send back (its channel to the producer was past its
  // per-destination cap): dropped and counted there (R-FAIL-4), so part of the accounting.
  uint64_t dropped = 0;
  template <class A>
  void serialize(A& a) {
    a(handled, queued, queued_bytes, max_queued_bytes, bound_bytes, bound_messages, rss_kib,
      dropped);
  }
};

struct StatsQuery {
  using Reply = ConsumerStats;
  runtime::OncePortRef<ConsumerStats> reply_to;
  template <class A>
  void serialize(A& a) {
    a(reply_to);
  }
};

// VmRSS of `pid` (0: this process) in KiB, from /proc; 0 when unreadable.
uint64_t rss_kib(long pid = 0);

}  // namespace postal::overload

POSTAL_MESSAGE(postal::overload::Work, "postal.overload.Work");
POSTAL_MESSAGE(postal::overload::Tick, "postal.overload.Tick");
POSTAL_MESSAGE(int64_t, "postal.overload.I64");
POSTAL_MESSAGE(postal::overload::Ping, "postal.overload.Ping");
POSTAL_MESSAGE(postal::overload::ConsumerStats, "postal.overload.ConsumerStats");
POSTAL_MESSAGE(postal::overload::StatsQuery, "postal.overload.StatsQuery");
