// nats_parser.h — an incremental parser of the NATS client protocol, as a client sends it
// (CONNECT, PUB, HPUB, SUB, UNSUB, PING, PONG), for the mq9 bridge (mq9_bridge.h).
//
// Bytes go in with `feed`; complete operations come out of `next` as views into the parser's
// buffer, valid until the next call of `feed` or `next`. Every input is bounded: a control line
// longer than `max_control_line` or a payload larger than `max_payload` is an error, so the
// buffer never holds more than max_control_line + max_payload + 2 bytes. An error is final: the
// connection is to be closed with `-ERR '<error>'`, the error text being what nats-server says
// for the same fault where it has one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace postal::mail::mq9 {

enum class NatsOp { kNone, kConnect, kPub, kSub, kUnsub, kPing, kPong };

struct NatsCommand {
  NatsOp op = NatsOp::kNone;
  std::string_view subject{};  // PUB, HPUB, SUB
  std::string_view reply{};    // PUB, HPUB: empty when none
  std::string_view queue{};    // SUB: empty when none
  std::string_view sid{};      // SUB, UNSUB
  uint64_t max_msgs = 0;       // UNSUB: 0 = at once
  std::string_view headers{};  // HPUB: the header block ("NATS/1.0\r\n...\r\n\r\n")
  std::string_view payload{};  // PUB, HPUB: the body; CONNECT: its JSON
};

struct NatsParserLimits {
  size_t max_control_line = 4096;
  size_t max_payload = 1 << 20;
};

class NatsParser {
 public:
  explicit NatsParser(NatsParserLimits limits = {}) : limits_(limits) {}

  void feed(std::string_view bytes);
  // The next complete command (op kNone: more bytes needed, or `failed()`).
  NatsCommand next();
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  // Bytes held (a partial command).
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  NatsCommand fail(std::string error);
  NatsCommand parse_line(std::string_view line, size_t line_end);

  NatsParserLimits limits_;
  std::string buf_;
  size_t pos_ = 0;  // start of what is not consumed yet
  std::string error_;
};

}  // namespace postal::mail::mq9
