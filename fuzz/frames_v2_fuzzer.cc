// libFuzzer: wire v2's frame splitter and control-frame decoders (routing/src/frames_v2.h,
// docs/wire.md §3, §4, §8–§11). Any bytes: frames or a stream error, never a crash; a frame that
// decodes encodes back to the same body (HELLO, WELCOME, ACK, ABORT/CANCEL, GOODBYE, PING), or
// for CREDIT (§10.1, whose actor texts are parsed) to a body that decodes to the same frame.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "credit_frame.h"
#include "frames_v2.h"

namespace v2 = postal::routing::internal::v2;

namespace {

template <class F, class Decode, class Append>
void round_trip(std::string_view body, Decode decode, Append append) {
  auto f = decode(body);
  if (!f.ok()) return;
  std::string again;
  append(again, *f);
  if (std::string_view(again).substr(v2::kPrefixBytes) != body) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  v2::FrameSplitter splitter(1 << 16);
  splitter.feed(std::string_view(reinterpret_cast<const char*>(data), size));
  for (;;) {
    auto frame = splitter.next();
    if (!frame.ok() || !frame->has_value()) break;
    const std::string_view body = (*frame)->body;
    switch ((*frame)->kind) {
      case v2::Kind::kHello: {
        auto h = v2::decode_hello(body);
        if (h.ok() && h->version == v2::kVersion) {
          std::string again;
          v2::append(again, *h);
          if (std::string_view(again).substr(v2::kPrefixBytes) != body) __builtin_trap();
        }
        break;
      }
      case v2::Kind::kWelcome:
        round_trip<v2::Welcome>(body, v2::decode_welcome,
                                [](std::string& o, const v2::Welcome& f) { v2::append(o, f); });
        break;
      case v2::Kind::kAck:
        round_trip<v2::Ack>(body, v2::decode_ack,
                            [](std::string& o, const v2::Ack& f) { v2::append(o, f); });
        break;
      case v2::Kind::kAbort:
        round_trip<v2::TransferEnd>(body, v2::decode_transfer_end, v2::append_abort);
        break;
      case v2::Kind::kGoodbye:
        round_trip<v2::Goodbye>(body, v2::decode_goodbye,
                                [](std::string& o, const v2::Goodbye& f) { v2::append(o, f); });
        break;
      case v2::Kind::kPing:
        round_trip<v2::Ping>(body, v2::decode_ping, v2::append_ping);
        break;
      case v2::Kind::kCredit: {
        auto c = v2::decode_credit(body);
        if (!c.ok()) break;
        std::string again;
        v2::append(again, *c);
        auto back = v2::decode_credit(std::string_view(again).substr(v2::kPrefixBytes));
        if (!back.ok() || !(*back == *c)) __builtin_trap();
        break;
      }
      case v2::Kind::kReject:
        (void)v2::decode_reject(body);
        break;
      case v2::Kind::kChunk:
        (void)v2::decode_chunk(body);
        break;
      default:
        break;
    }
  }
  return 0;
}
