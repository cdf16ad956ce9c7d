// nats_parser.cc — see nats_parser.h.
#include "nats_parser.h"

#include <array>
#include <charconv>


namespace postal::mail::mq9 {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'a' && a[i] <= 'z' ? static_cast<char>(a[i] - 32) : a[i];
    if (x != b[i]) return false;  // `b` is upper case
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits a control line's arguments on spaces and tabs; at most `N` of them (one more: -1).
template <size_t N>
int split_args(std::string_view s, std::array<std::string_view, N>& out) {
  int n = 0;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    if (i == s.size()) break;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
    if (n == static_cast<int>(N)) return -1;
    out[n++] = s.substr(i, j - i);
    i = j;
  }
  return n;
}

bool parse_size(std::string_view s, uint64_t& out) {
  if (s.empty() || s.size() > 19) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

void NatsParser::feed(std::string_view bytes) {
  if (failed()) return;
  // Compact once the consumed prefix is most of the buffer: each byte moves O(1) times.
  if (pos_ > 0 && pos_ * 2 >= buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
}

NatsCommand NatsParser::fail(std::string error) {
  error_ = std::move(error);
  buf_.clear();
  buf_.shrink_to_fit();
  pos_ = 0;
  return {};
}

NatsCommand NatsParser::next() {
  if (failed()) return {};
  std::string_view rest(buf_.data() + pos_, buf_.size() - pos_);
  size_t nl = rest.find('\n');
  if (nl == std::string_view::npos) {
    if (rest.size() > limits_.max_control_line) return fail("Maximum Control Line Exceeded");
    return {};
  }
  if (nl > limits_.max_control_line) return fail("Maximum Control Line Exceeded");
  std::string_view line = rest.substr(0, nl);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return parse_line(line, pos_ + nl + 1);
}

NatsCommand NatsParser::parse_line(std::string_view line, size_t line_end) {
  size_t sp = line.find_first_of(" \t");
  std::string_view verb = line.substr(0, sp);
  std::string_view args = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
  NatsCommand cmd;
  auto done = [&](NatsOp op) {
    cmd.op = op;
    pos_ = line_end;
    return cmd;
  };
  if (iequals(verb, "PING")) return done(NatsOp::kPing);
  if (iequals(verb, "PONG")) return done(NatsOp::kPong);
  if (iequals(verb, "CONNECT")) {
    cmd.payload = trim(args);
    return done(NatsOp::kConnect);
  }
  if (iequals(verb, "SUB")) {
    std::array<std::string_view, 3> a;
    int n = split_args(args, a);
    if (n < 2) return fail("Parser Error: SUB needs a subject and a sid");
    cmd.subject = a[0];
    if (n == 3) cmd.queue = a[1];
    cmd.sid = a[n - 1];
    return done(NatsOp::kSub);
  }
  if (iequals(verb, "UNSUB")) {
    std::array<std::string_view, 2> a;
    int n = split_args(args, a);
    if (n < 1) return fail("Parser Error: UNSUB needs a sid");
    cmd.sid = a[0];
    if (n == 2 && !parse_size(a[1], cmd.max_msgs)) return fail("Parser Error: UNSUB max is not a count");
    return done(NatsOp::kUnsub);
  }
  bool hpub = iequals(verb, "HPUB");
  if (hpub || iequals(verb, "PUB")) {
    std::array<std::string_view, 4> a;
    int n = split_args(args, a);
    int sizes = hpub ? 2 : 1;
    if (n < 1 + sizes || n > 2 + sizes) {
      return fail(hpub ? "Parser Error: HPUB needs subject [reply] hdr_len total_len"
                       : "Parser Error: PUB needs subject [reply] size");
    }
    uint64_t hdr = 0, total = 0;
    if (!parse_size(a[n - 1], total) || (hpub && !parse_size(a[n - 2], hdr)) || hdr > total) {
      return fail("Parser Error: bad message size");
    }
    if (total > limits_.max_payload) return fail("Maximum Payload Violation");
    cmd.subject = a[0];
    if (n == 2 + sizes) cmd.reply = a[1];
    // The payload and its CRLF must be here; otherwise wait (the line is parsed again then).
    size_t need = line_end + total + 2;
    if (buf_.size() < need) return {};
    if (buf_[need - 2] != '\r' || buf_[need - 1] != '\n') {
      return fail("Parser Error: the payload is not followed by CRLF");
    }
    std::string_view body(buf_.data() + line_end, total);
    cmd.headers = body.substr(0, hdr);
    cmd.payload = body.substr(hdr);
    cmd.op = NatsOp::kPub;
    pos_ = need;
    return cmd;
  }
  return fail("Unknown Protocol Operation");
}

}  // namespace postal::mail::mq9
