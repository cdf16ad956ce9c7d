// frame_decoder_fuzzer: feeds arbitrary bytes, in arbitrary chunk sizes, to FrameDecoder (frame.h).
//
// Input layout: byte 0-1 pick max_frame_bytes (1..65536), byte 2 seeds the chunk sizes, the rest
// is the stream. For every input:
//   * decoding never crashes or reads past what was fed (ASan), and never throws;
//   * decoding in one chunk and in random chunks gives the same frames and the same outcome;
//   * an error is ResourceExhausted, DataLoss or FailedPrecondition with a bounded message, and
//     is sticky;
//   * re-encoding the decoded frames gives back exactly the bytes they were decoded from.
// Any violation prints what failed and calls abort(), which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "postal/routing/frame.h"

namespace {

using postal::routing::Frame;
using postal::routing::FrameDecoder;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "frame_decoder_fuzzer: %s\n", what);
  std::abort();
}

struct Outcome {
  std::vector<Frame> frames;
  absl::Status error;
  size_t buffered = 0;
};

// Decodes `stream`, fed in chunks whose sizes come from a tiny generator seeded by `seed`
// (seed 0: one chunk).
Outcome decode(std::string_view stream, size_t max, uint8_t seed) {
  FrameDecoder decoder(max);
  Outcome out;
  uint32_t state = seed;
  size_t at = 0;
  while (at < stream.size() && out.error.ok()) {
    size_t chunk = stream.size();
    if (seed != 0) {
      state = state * 1103515245u + 12345u;
      chunk = 1 + (state >> 16) % 97;
    }
    decoder.feed(stream.substr(at, chunk));
    at += std::min(chunk, stream.size() - at);
    for (;;) {
      absl::StatusOr<std::optional<Frame>> f = decoder.next();
      if (!f.ok()) {
        out.error = f.status();
        if (decoder.next().status() != out.error) fail("error is not sticky");
        break;
      }
      if (!f->has_value()) break;
      out.frames.push_back(**std::move(f));
    }
  }
  out.buffered = decoder.buffered();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const size_t max = 1 + (static_cast<size_t>(data[0]) | static_cast<size_t>(data[1]) << 8);
  const uint8_t seed = data[2];
  const std::string_view stream(reinterpret_cast<const char*>(data) + 3, size - 3);

  const Outcome whole = decode(stream, max, 0);
  const Outcome chunked = decode(stream, max, seed | 1);
  if (!(whole.frames == chunked.frames)) fail("chunking changed the frames");
  if (whole.error != chunked.error) fail("chunking changed the error");

  if (!whole.error.ok()) {
    const absl::StatusCode code = whole.error.code();
    if (code != absl::StatusCode::kResourceExhausted && code != absl::StatusCode::kDataLoss &&
        code != absl::StatusCode::kFailedPrecondition) {
      fail("unexpected error code");
    }
    if (whole.error.message().size() > 512) fail("unbounded error message");
  }

  std::string again;
  for (const Frame& f : whole.frames) {
    if (const auto* reject = std::get_if<postal::routing::RejectFrame>(&f)) {
      if (reject->reason.size() > postal::routing::kMaxRejectReason) return 0;  // cut on encode
    }
    postal::routing::append_frame(again, f);
  }
  if (stream.substr(0, again.size()) != again) fail("re-encoding differs from the input");
  if (whole.error.ok() && again.size() + whole.buffered != stream.size()) {
    fail("bytes went missing");
  }
  return 0;
}
